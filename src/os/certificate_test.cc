// Tests of the certificates os makes: what they name, who signed them, and that OpenSSL's own
// verification accepts a chain to the CA and refuses one to another CA.
#include "os/certificate.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

namespace gpupool::os {
namespace {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
using CertPtr = std::unique_ptr<X509, X509Free>;

CertPtr Parse(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  CertPtr cert(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return cert;
}

// Whether `leaf` verifies against `ca` as its only trust anchor.
bool Verifies(const std::string& leaf, const std::string& ca) {
  CertPtr leaf_cert = Parse(leaf);
  CertPtr ca_cert = Parse(ca);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca_cert.get());
  X509_STORE_CTX* context = X509_STORE_CTX_new();
  X509_STORE_CTX_init(context, store, leaf_cert.get(), nullptr);
  const bool ok = X509_verify_cert(context) == 1;
  X509_STORE_CTX_free(context);
  X509_STORE_free(store);
  return ok;
}

TEST(MakeCertificate, NamesItsHostsAndAddressesAndVerifiesAsItsOwnAnchor) {
  Result<CertificatePair> pair =
      MakeCertificate({.names = {"localhost", "127.0.0.1", "::1"}, .ca = true});
  ASSERT_TRUE(pair) << pair.error().message;
  EXPECT_NE(pair->certificate_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(pair->key_pem.find("BEGIN PRIVATE KEY"), std::string::npos);
  CertPtr cert = Parse(pair->certificate_pem);
  ASSERT_TRUE(cert);
  EXPECT_EQ(X509_check_host(cert.get(), "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "::1", 0), 1);
  EXPECT_NE(X509_check_host(cert.get(), "example.com", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_ip_asc(cert.get(), "127.0.0.2", 0), 1);
  EXPECT_TRUE(Verifies(pair->certificate_pem, pair->certificate_pem));
}

TEST(MakeCertificate, AServerCertificateVerifiesAgainstItsCaOnly) {
  Result<CertificatePair> ca = MakeCertificate({.names = {"test CA"}, .ca = true});
  Result<CertificatePair> other = MakeCertificate({.names = {"other CA"}, .ca = true});
  ASSERT_TRUE(ca && other);
  Result<CertificatePair> server =
      MakeCertificate({.names = {"localhost"}, .days = 2, .issuer = &*ca});
  ASSERT_TRUE(server) << server.error().message;
  EXPECT_TRUE(Verifies(server->certificate_pem, ca->certificate_pem));
  EXPECT_FALSE(Verifies(server->certificate_pem, other->certificate_pem));
  // A server certificate may not sign others.
  Result<CertificatePair> below = MakeCertificate({.names = {"evil.example"}, .issuer = &*server});
  ASSERT_TRUE(below);
  EXPECT_FALSE(Verifies(below->certificate_pem, ca->certificate_pem));
}

TEST(MakeCertificate, RefusesNoNamesAndAnUnreadableIssuer) {
  EXPECT_EQ(MakeCertificate({}).error().code, ErrorCode::kInvalidArgument);
  const CertificatePair junk{.certificate_pem = "not pem", .key_pem = "not pem"};
  Result<CertificatePair> r = MakeCertificate({.names = {"localhost"}, .issuer = &junk});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupool::os
