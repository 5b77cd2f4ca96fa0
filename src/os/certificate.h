// TLS certificates made with OpenSSL: the self-signed pair `gpupool server --tls-self-signed`
// (and `up`) generates and serves, and the CAs and server certificates tests make to check that
// clients verify the server.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace gpupool::os {

// A certificate and its private key, PEM.
struct CertificatePair {
  std::string certificate_pem;
  std::string key_pem;
};

struct CertificateRequest {
  // DNS names and IP addresses ("localhost", "127.0.0.1", "::1") for its subjectAltName; the
  // first is also its common name. At least one.
  std::vector<std::string> names;
  int days = 825;  // valid from an hour ago for this long
  // A CA (basicConstraints CA:TRUE, may sign certificates) besides a server certificate.
  bool ca = false;
  // Signed by this CA's key (its certificate names the issuer); nullptr: signed by itself.
  const CertificatePair* issuer = nullptr;
};

// A new ECDSA P-256 key and a certificate for it (X.509 v3, SHA-256, a random serial, key usage
// for TLS servers). kInvalidArgument for no names or an issuer that cannot be read.
Result<CertificatePair> MakeCertificate(const CertificateRequest& request);

}  // namespace gpupool::os
