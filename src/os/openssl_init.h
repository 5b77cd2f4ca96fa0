// OpenSSL's set-up for a short-lived client process (the CLI), which pays it on every run.
#pragma once

namespace gpupool::os {

// Sets OpenSSL up for a process that, over plain HTTP, only hashes and signs: without the legacy
// tables of every cipher's and digest's names (EVP_get_cipherbyname and kin, which gpupool does
// not use: it names its algorithms through EVP_sha256() and TLS's own fetches), and with the
// system's OpenSSL configuration read only once TLS is used (LoadDeferredOpenSslConfig).
// Building the tables and parsing the configuration were half of the instructions of a
// `gpupool submit` (docs/benchmarks.md "CLI cost"). Call before any other use of OpenSSL.
void InitOpenSslForClient();

// Reads the system's OpenSSL configuration if InitOpenSslForClient deferred it and it has not
// been read yet; otherwise does nothing (OpenSSL read it at its own start). Called before a TLS
// context is made, so that a client's TLS honours the system's settings as any other's does.
void LoadDeferredOpenSslConfig();

}  // namespace gpupool::os
