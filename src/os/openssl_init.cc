// OpenSSL's set-up for a client process (see openssl_init.h).
#include "os/openssl_init.h"

#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <atomic>
#include <mutex>

namespace gpupool::os {
namespace {

std::atomic<bool> config_deferred{false};
std::once_flag config_loaded;

}  // namespace

void InitOpenSslForClient() {
  OPENSSL_init_crypto(OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS |
                          OPENSSL_INIT_NO_LOAD_CONFIG,
                      nullptr);
  config_deferred = true;
}

void LoadDeferredOpenSslConfig() {
  if (!config_deferred) return;
  std::call_once(config_loaded, [] {
    // As OpenSSL's own start does it: the default file and section, a missing file is no error,
    // and a configuration it cannot apply does not stop the client (the TLS handshake still
    // checks the server).
    (void)CONF_modules_load_file(nullptr, nullptr,
                                 CONF_MFLAGS_DEFAULT_SECTION | CONF_MFLAGS_IGNORE_MISSING_FILE);
    ERR_clear_error();
  });
}

}  // namespace gpupool::os
