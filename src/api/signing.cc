// HMAC-SHA256 request signing and verification (see signing.h and docs/api.md).
#include "api/signing.h"

#include <openssl/crypto.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <random>
#include <utility>
#include <vector>

#include "api/url.h"
#include "core/hex.h"
#include "core/text.h"
#include "os/sha256.h"

namespace gpupool::api {
namespace {

Error Unauthenticated(std::string message) {
  return Error{ErrorCode::kUnauthenticated, std::move(message)};
}

// Characters allowed in access keys and nonces: they travel unquoted in the header.
bool IsTokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Quotes a client-supplied value in an error message, cut to a readable length.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "'";
  out += s.substr(0, kMax);
  if (s.size() > kMax) out += "…";
  out += "'";
  return out;
}

}  // namespace

std::string HmacSha256Hex(std::string_view key, std::string_view data) {
  return HexEncode(os::HmacSha256(key, data));
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::string> CanonicalQuery(std::string_view raw_query) {
  auto params = ParseQueryString(raw_query);
  if (!params) return tl::unexpected(params.error());
  std::sort(params->begin(), params->end());
  std::string out;
  for (const auto& [name, value] : *params) {
    if (!out.empty()) out.push_back('&');
    out += PercentEncode(name);
    out.push_back('=');
    out += PercentEncode(value);
  }
  return out;
}

Result<std::string> CanonicalRequest(std::string_view method, std::string_view path,
                                     std::string_view raw_query, std::string_view body,
                                     int64_t timestamp_ms, std::string_view nonce) {
  Result<std::string> query = CanonicalQuery(raw_query);
  if (!query) return tl::unexpected(query.error());
  std::string out;
  out.reserve(method.size() + path.size() + query->size() + nonce.size() + 100);
  out.append(method).push_back('\n');
  out.append(path).push_back('\n');
  out.append(*query).push_back('\n');
  out.append(os::Sha256Hex(body)).push_back('\n');
  out.append(std::to_string(timestamp_ms)).push_back('\n');
  out.append(nonce);
  return out;
}

Result<Credential> ParseAuthorization(std::string_view header) {
  const auto malformed = [](std::string why) {
    return tl::unexpected(Unauthenticated("malformed Authorization header: " + std::move(why)));
  };
  header = TrimBlanks(header);
  if (header.empty()) {
    return tl::unexpected(Unauthenticated(
        "missing Authorization header; requests must be signed with GPUPOOL-HMAC-SHA256"));
  }
  const size_t space = header.find(' ');
  const std::string_view scheme = header.substr(0, space);
  if (scheme != kAuthScheme) {
    return malformed("scheme must be GPUPOOL-HMAC-SHA256, got " + Quote(scheme));
  }
  if (space == std::string_view::npos) return malformed("no fields after the scheme");
  std::string_view rest = header.substr(space + 1);

  Credential c;
  bool have_key = false, have_ts = false, have_nonce = false, have_sig = false;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view field = TrimBlanks(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos) return malformed("field " + Quote(field) + " has no '='");
    const std::string_view name = field.substr(0, eq);
    const std::string_view value = field.substr(eq + 1);
    bool* seen = nullptr;
    if (name == "Credential") {
      seen = &have_key;
      if (!IsToken(value))
        return malformed("Credential must be an access key, got " + Quote(value));
      c.access_key = std::string(value);
    } else if (name == "Timestamp") {
      seen = &have_ts;
      const auto [ptr, ec] =
          std::from_chars(value.data(), value.data() + value.size(), c.timestamp_ms);
      if (value.empty() || ec != std::errc() || ptr != value.data() + value.size() ||
          c.timestamp_ms < 0) {
        return malformed("Timestamp must be milliseconds since the epoch, got " + Quote(value));
      }
    } else if (name == "Nonce") {
      seen = &have_nonce;
      if (value.size() < kMinNonceLength || value.size() > kMaxNonceLength || !IsToken(value)) {
        return malformed("Nonce must be 16..128 characters of A-Z a-z 0-9 - _ . ~, got " +
                         Quote(value));
      }
      c.nonce = std::string(value);
    } else if (name == "Signature") {
      seen = &have_sig;
      const bool hex =
          value.size() == 64 && std::all_of(value.begin(), value.end(), [](char ch) {
            return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
          });
      if (!hex) return malformed("Signature must be 64 hex digits");
      c.signature = std::string(value);
      for (char& ch : c.signature) {
        if (ch >= 'A' && ch <= 'F') ch = static_cast<char>(ch - 'A' + 'a');
      }
    } else {
      return malformed("unknown field " + Quote(name));
    }
    if (*seen) return malformed("field " + std::string(name) + " given twice");
    *seen = true;
  }
  if (!have_key) return malformed("Credential is missing");
  if (!have_ts) return malformed("Timestamp is missing");
  if (!have_nonce) return malformed("Nonce is missing");
  if (!have_sig) return malformed("Signature is missing");
  return c;
}

std::string FormatAuthorization(const Credential& c) {
  std::string out(kAuthScheme);
  out += " Credential=" + c.access_key;
  out += ", Timestamp=" + std::to_string(c.timestamp_ms);
  out += ", Nonce=" + c.nonce;
  out += ", Signature=" + c.signature;
  return out;
}

Result<std::string> SignRequest(std::string_view access_key, std::string_view secret_key,
                                std::string_view method, std::string_view target,
                                std::string_view body, int64_t timestamp_ms,
                                std::string_view nonce) {
  const size_t q = target.find('?');
  const std::string_view path = target.substr(0, q);
  const std::string_view query =
      q == std::string_view::npos ? std::string_view() : target.substr(q + 1);
  Result<std::string> canonical = CanonicalRequest(method, path, query, body, timestamp_ms, nonce);
  if (!canonical) return tl::unexpected(canonical.error());
  Credential c;
  c.access_key = std::string(access_key);
  c.timestamp_ms = timestamp_ms;
  c.nonce = std::string(nonce);
  c.signature = HmacSha256Hex(secret_key, *canonical);
  return FormatAuthorization(c);
}

std::string NewNonce() {
  // From the kernel's generator rather than OpenSSL's: a nonce is not a secret, only unique, and
  // OpenSSL's first RAND_bytes sets up its whole provider and DRBG machinery — two thirds of the
  // instructions of a CLI invocation (docs/benchmarks.md "CLI cost").
  unsigned char bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      std::random_device device;  // no getrandom (a seccomp filter): the library's source
      for (; filled < sizeof(bytes); ++filled) bytes[filled] = static_cast<unsigned char>(device());
    }
  }
  return HexEncode(std::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

Result<Verified> VerifyRequest(server::AuthService& auth, const HttpRequest& request,
                               int64_t now_ms) {
  Result<Credential> credential = ParseAuthorization(request.authorization);
  if (!credential) return tl::unexpected(credential.error());

  Result<server::KeyGrant> grant = auth.LookupKey(credential->access_key);
  if (!grant) {
    // Only "unknown" and "revoked" are expected; anything else (the store failing) is not an
    // authentication problem and keeps its code.
    return tl::unexpected(grant.error());
  }

  const int64_t skew_ms = now_ms - credential->timestamp_ms;
  if (skew_ms > kMaxClockSkewMs || skew_ms < -kMaxClockSkewMs) {
    const int64_t skew_s = (skew_ms < 0 ? -skew_ms : skew_ms) / 1000;
    return tl::unexpected(
        Unauthenticated("request timestamp " + std::to_string(credential->timestamp_ms) + " is " +
                        std::to_string(skew_s) + " s from server time; allowed ±" +
                        std::to_string(kMaxClockSkewMs / 1000) + " s"));
  }

  Result<std::string> canonical =
      CanonicalRequest(request.method, request.Path(), request.RawQuery(), request.body,
                       credential->timestamp_ms, credential->nonce);
  if (!canonical) return tl::unexpected(canonical.error());
  const std::string expected = HmacSha256Hex(grant->secret, *canonical);
  if (!ConstantTimeEquals(expected, credential->signature)) {
    return tl::unexpected(Unauthenticated(
        "signature does not match for access key '" + credential->access_key +
        "'; sign METHOD, path, sorted query, SHA-256 of the body, timestamp and nonce with the "
        "secret key"));
  }
  return Verified{std::move(grant->caller), std::move(*credential)};
}

Status ConsumeNonce(server::AuthService& auth, const Verified& verified, bool durable) {
  return auth.ConsumeNonce(verified.credential.access_key, verified.credential.nonce,
                           verified.credential.timestamp_ms, durable);
}

bool IsWriteMethod(std::string_view method) { return method != "GET" && method != "HEAD"; }

std::optional<std::string_view> CookieValue(std::string_view cookie_header, std::string_view name) {
  constexpr std::string_view kSpace = " \t";
  while (!cookie_header.empty()) {
    const size_t end = cookie_header.find(';');
    std::string_view pair = cookie_header.substr(0, end);
    cookie_header =
        end == std::string_view::npos ? std::string_view() : cookie_header.substr(end + 1);
    const size_t start = pair.find_first_not_of(kSpace);
    if (start == std::string_view::npos) continue;
    pair = pair.substr(start, pair.find_last_not_of(kSpace) - start + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return value;
  }
  return std::nullopt;
}

Result<server::SessionGrant> VerifySession(server::AuthService& auth, const HttpRequest& request) {
  const std::optional<std::string_view> cookie = CookieValue(request.cookie, kSessionCookie);
  if (!cookie || cookie->empty()) {
    return tl::unexpected(Unauthenticated(
        "no console session: the " + std::string(kSessionCookie) +
        " cookie is missing (log in with POST /v1/console/sessions, or sign the request)"));
  }
  Result<server::SessionGrant> session = auth.LookupSession(std::string(*cookie));
  if (!session) return tl::unexpected(session.error());
  if (IsWriteMethod(request.method) &&
      (request.csrf_token.empty() ||
       !ConstantTimeEquals(request.csrf_token, session->csrf_token))) {
    return tl::unexpected(
        Error{ErrorCode::kPermissionDenied,
              std::string(request.csrf_token.empty() ? "missing" : "wrong") +
                  " X-CSRF-Token header: a " + request.method +
                  " of a console session must carry the session's csrf_token (GET "
                  "/v1/console/sessions/current shows it)"});
  }
  return session;
}

std::string SessionSetCookie(std::string_view value, int64_t max_age_s, bool secure) {
  return std::string(kSessionCookie) + "=" + std::string(value) +
         "; Path=/; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age_s) +
         (secure ? "; Secure" : "");
}

std::string ClearedSessionSetCookie(bool secure) { return SessionSetCookie("", 0, secure); }

namespace {
std::string GatewayLinkText(std::string_view task, int32_t port, int64_t expires_ms) {
  return "GPUPOOL-LINK\n" + std::string(task) + "\n" + std::to_string(port) + "\n" +
         std::to_string(expires_ms);
}
}  // namespace

std::string SignGatewayLink(std::string_view access_key, std::string_view secret_key,
                            std::string_view task, int32_t port, int64_t expires_ms) {
  return std::string(access_key) + "." + std::to_string(expires_ms) + "." +
         HmacSha256Hex(secret_key, GatewayLinkText(task, port, expires_ms));
}

Result<server::Caller> VerifyGatewayLink(server::AuthService& auth, std::string_view token,
                                         std::string_view task, int32_t port, int64_t now_ms) {
  const size_t second = token.rfind('.');
  const size_t first = second == std::string_view::npos ? second : token.rfind('.', second - 1);
  if (first == std::string_view::npos || first == 0) {
    return tl::unexpected(
        Unauthenticated("the link's token is malformed: expected <key>.<expires>.<signature>"));
  }
  const std::string access_key(token.substr(0, first));
  const std::string expires_text(token.substr(first + 1, second - first - 1));
  int64_t expires_ms = 0;
  const auto [end, ec] =
      std::from_chars(expires_text.data(), expires_text.data() + expires_text.size(), expires_ms);
  if (ec != std::errc() || end != expires_text.data() + expires_text.size()) {
    return tl::unexpected(
        Unauthenticated("the link's expiry '" + expires_text + "' is not a number"));
  }
  if (expires_ms <= now_ms)
    return tl::unexpected(Unauthenticated("the link expired; ask for a new one"));
  if (expires_ms - now_ms > kMaxGatewayLinkMs) {
    return tl::unexpected(Unauthenticated("the link expires more than " +
                                          std::to_string(kMaxGatewayLinkMs / 60'000) +
                                          " minutes ahead"));
  }
  Result<server::KeyGrant> grant = auth.LookupKey(access_key);
  if (!grant) return tl::unexpected(grant.error());
  const std::string expected =
      HmacSha256Hex(grant->secret, GatewayLinkText(task, port, expires_ms));
  if (!ConstantTimeEquals(expected, token.substr(second + 1))) {
    return tl::unexpected(
        Unauthenticated("the link's signature does not match (a link is for one task's port)"));
  }
  return std::move(grant->caller);
}

std::string GatewaySetCookie(std::string_view value, std::string_view path, int64_t max_age_s,
                             bool secure) {
  return std::string(kGatewayCookie) + "=" + std::string(value) + "; Path=" + std::string(path) +
         "; HttpOnly; SameSite=Strict; Max-Age=" + std::to_string(max_age_s) +
         (secure ? "; Secure" : "");
}

}  // namespace gpupool::api
