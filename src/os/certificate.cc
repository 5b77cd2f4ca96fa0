// TLS certificates made with OpenSSL (see certificate.h).
#include "os/certificate.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace gpupool::os {
namespace {

template <auto Free>
struct Deleter {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;

// OpenSSL's last error in words (and the queue emptied).
std::string OpenSslError(const std::string& what) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  char text[256] = "unknown error";
  if (code != 0) ERR_error_string_n(code, text, sizeof(text));
  return what + ": " + text;
}

tl::unexpected<Error> Failed(const std::string& what) {
  return MakeError(ErrorCode::kInternal, OpenSslError(what));
}

bool IsIpAddress(const std::string& name) {
  unsigned char bytes[16];
  return inet_pton(AF_INET, name.c_str(), bytes) == 1 ||
         inet_pton(AF_INET6, name.c_str(), bytes) == 1;
}

Result<std::string> Pem(int (*write)(BIO*, void*), void* object, const std::string& what) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get(), object) != 1) return Failed("writing the " + what);
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

// One extension of `cert` in OpenSSL's configuration syntax ("critical,CA:TRUE").
Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, cert, nullptr, nullptr, 0);
  ExtPtr extension(X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
  if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
    return Failed(std::string("adding the extension ") + OBJ_nid2sn(nid) + " = " + value);
  }
  return {};
}

}  // namespace

Result<CertificatePair> MakeCertificate(const CertificateRequest& request) {
  if (request.names.empty()) return InvalidArgument("a certificate needs at least one name");
  if (request.days < 1) return InvalidArgument("a certificate must be valid for at least a day");

  // The issuer: the request's CA, or the new certificate itself.
  KeyPtr issuer_key;
  CertPtr issuer_cert;
  if (request.issuer != nullptr) {
    BioPtr key_bio(BIO_new_mem_buf(request.issuer->key_pem.data(),
                                   static_cast<int>(request.issuer->key_pem.size())));
    issuer_key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
    BioPtr cert_bio(BIO_new_mem_buf(request.issuer->certificate_pem.data(),
                                    static_cast<int>(request.issuer->certificate_pem.size())));
    issuer_cert.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
    if (!issuer_key || !issuer_cert) {
      return InvalidArgument(OpenSslError("the issuer's certificate or key is not PEM"));
    }
  }

  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Failed("generating an ECDSA P-256 key");
  CertPtr cert(X509_new());
  if (!cert) return Failed("allocating a certificate");
  BnPtr serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Failed("choosing a serial number");
  }
  X509_set_version(cert.get(), 2);  // v3
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(request.days) * 86'400);
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return Failed("setting the public key");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  const std::string& common = request.names.front();
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("gpupool"), -1, -1, 0);
  if (X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(common.c_str()), -1, -1,
                                 0) != 1) {
    return InvalidArgument(OpenSslError("name '" + common + "' cannot be a common name"));
  }
  X509* signer = issuer_cert ? issuer_cert.get() : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));

  std::string alt_names;
  for (const std::string& name : request.names) {
    if (name.empty() || name.find_first_of(",:\n") != std::string::npos) {
      if (!IsIpAddress(name)) return InvalidArgument("name '" + name + "' is malformed");
    }
    if (!alt_names.empty()) alt_names += ",";
    alt_names += (IsIpAddress(name) ? "IP:" : "DNS:") + name;
  }
  const std::string constraints = request.ca ? "critical,CA:TRUE" : "critical,CA:FALSE";
  const std::string usage = request.ca ? "critical,digitalSignature,keyCertSign,cRLSign"
                                       : "critical,digitalSignature,keyEncipherment";
  for (const auto& [nid, value] :
       {std::pair{NID_subject_alt_name, alt_names}, std::pair{NID_basic_constraints, constraints},
        std::pair{NID_key_usage, usage}, std::pair{NID_ext_key_usage, std::string("serverAuth")},
        std::pair{NID_subject_key_identifier, std::string("hash")},
        std::pair{NID_authority_key_identifier, std::string("keyid:always")}}) {
    if (Status s = AddExtension(cert.get(), signer, nid, value); !s)
      return tl::unexpected(s.error());
  }
  EVP_PKEY* signing_key = issuer_key ? issuer_key.get() : key.get();
  if (X509_sign(cert.get(), signing_key, EVP_sha256()) == 0) return Failed("signing");

  CertificatePair pair;
  Result<std::string> cert_pem =
      Pem([](BIO* b, void* x) { return PEM_write_bio_X509(b, static_cast<X509*>(x)); }, cert.get(),
          "certificate");
  if (!cert_pem) return tl::unexpected(cert_pem.error());
  Result<std::string> key_pem = Pem(
      [](BIO* b, void* k) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr,
                                        nullptr);
      },
      key.get(), "private key");
  if (!key_pem) return tl::unexpected(key_pem.error());
  pair.certificate_pem = std::move(*cert_pem);
  pair.key_pem = std::move(*key_pem);
  return pair;
}

}  // namespace gpupool::os
