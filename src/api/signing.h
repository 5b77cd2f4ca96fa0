// Request signing shared by the client and the server: the canonical request, HMAC-SHA256 over it
// with the secret key, the Authorization header, and the server's checks in their fixed order
// (docs/api.md "Authentication"); and the other way in, the web console's session: its cookie,
// its lookup and its CSRF check (docs/api.md "Console sessions"). Secrets never appear in an
// error message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/http_message.h"
#include "core/result.h"
#include "server/auth_service.h"

namespace gpupool::api {

inline constexpr std::string_view kAuthScheme = "GPUPOOL-HMAC-SHA256";
// "Authorization: GPUPOOL-TASK <token>": a task's own token (GPUPOOL_TASK_TOKEN), unsigned; it
// reads that task's usage and metrics only (docs/api.md "Task tokens").
inline constexpr std::string_view kTaskTokenScheme = "GPUPOOL-TASK";
inline constexpr int64_t kMaxClockSkewMs = 300'000;  // ±5 minutes
inline constexpr size_t kMinNonceLength = 16;
inline constexpr size_t kMaxNonceLength = 128;

std::string HmacSha256Hex(std::string_view key, std::string_view data);
// Equal length and bytes, in time that depends only on the length.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// The query's parameters decoded, sorted by name (then value), percent-encoded again and joined
// as "a=1&b=2"; so any encoding or order of the same parameters gives the same string.
Result<std::string> CanonicalQuery(std::string_view raw_query);

// METHOD \n PATH \n canonical-query \n hex(SHA-256(body)) \n timestamp \n nonce
// `path` is the path exactly as sent (still percent-encoded), without the query.
Result<std::string> CanonicalRequest(std::string_view method, std::string_view path,
                                     std::string_view raw_query, std::string_view body,
                                     int64_t timestamp_ms, std::string_view nonce);

// The fields of an Authorization header of the GPUPOOL-HMAC-SHA256 scheme.
struct Credential {
  std::string access_key;
  int64_t timestamp_ms = 0;
  std::string nonce;
  std::string signature;  // 64 lower-case hex digits

  friend bool operator==(const Credential&, const Credential&) = default;
};

// "GPUPOOL-HMAC-SHA256 Credential=<key>, Timestamp=<ms>, Nonce=<nonce>, Signature=<hex>"; the
// four fields in any order, each once. The error says what is wrong with the header.
Result<Credential> ParseAuthorization(std::string_view header);
std::string FormatAuthorization(const Credential& credential);

// The Authorization header value for a request to `target` (path and query as sent).
Result<std::string> SignRequest(std::string_view access_key, std::string_view secret_key,
                                std::string_view method, std::string_view target,
                                std::string_view body, int64_t timestamp_ms,
                                std::string_view nonce);

// 32 random hex characters from the kernel's CSPRNG (getrandom).
std::string NewNonce();

// A request whose signature checked out; its nonce is not consumed yet.
struct Verified {
  server::Caller caller;
  Credential credential;
};

// The server's checks, in order, each failing with kUnauthenticated and its reason: missing or
// malformed header; unknown or revoked access key (AuthService::LookupKey's message); timestamp
// more than kMaxClockSkewMs from `now_ms`; bad signature. Reads only: nothing is recorded.
Result<Verified> VerifyRequest(server::AuthService& auth, const HttpRequest& request,
                               int64_t now_ms);

// The last check: records the nonce, failing when it was used before. `durable` for requests
// that change something (every method but GET and HEAD).
Status ConsumeNonce(server::AuthService& auth, const Verified& verified, bool durable);

// --- console sessions ---

inline constexpr std::string_view kSessionCookie = "gpupool_session";

// Whether `method` changes something: every method but GET and HEAD (such requests consume
// their nonce durably, and a session's must carry its CSRF token).
bool IsWriteMethod(std::string_view method);

// The value of the cookie `name` in a Cookie header ("a=1; gpupool_session=…"); nullopt when it
// is not there. The first one counts when a name repeats.
std::optional<std::string_view> CookieValue(std::string_view cookie_header, std::string_view name);

// The console session the request's gpupool_session cookie names (AuthService::LookupSession),
// then, for a write method, its CSRF token in X-CSRF-Token, compared in constant time. Fails with
// kUnauthenticated when there is no cookie or no live session (saying why), kPermissionDenied
// when the token is missing or wrong.
Result<server::SessionGrant> VerifySession(server::AuthService& auth, const HttpRequest& request);

// Set-Cookie values: the session's cookie for `max_age_s` (HttpOnly, SameSite=Strict, Path=/;
// Secure when `secure`: set over HTTPS, it must never travel over plain HTTP), and the one that
// clears it.
std::string SessionSetCookie(std::string_view value, int64_t max_age_s, bool secure);
std::string ClearedSessionSetCookie(bool secure);

// --- the gateway's signed links (docs/api.md "The gateway") ---

// The query parameter of a signed link, and the cookie (scoped to the port's path) that its
// exchange sets: a console session of the link's key.
inline constexpr std::string_view kGatewayLinkParam = "gpupool_link";
inline constexpr std::string_view kGatewayCookie = "gpupool_gateway";
// How far ahead a link may expire.
inline constexpr int64_t kMaxGatewayLinkMs = 15 * 60'000;

// "<access key>.<expires_ms>.<hex HMAC-SHA256(secret, "GPUPOOL-LINK\n<task>\n<port>\n<expires>")>":
// a bearer credential for one task's port until `expires_ms`.
std::string SignGatewayLink(std::string_view access_key, std::string_view secret_key,
                            std::string_view task, int32_t port, int64_t expires_ms);
// The caller a link's token stands for, if it is for this task and port, unexpired, not too far
// ahead, and its key active. kUnauthenticated saying why otherwise.
Result<server::Caller> VerifyGatewayLink(server::AuthService& auth, std::string_view token,
                                         std::string_view task, int32_t port, int64_t now_ms);
// Set-Cookie of the gateway's cookie for one port's path ("/t/t-1/8888/"); Secure as above.
std::string GatewaySetCookie(std::string_view value, std::string_view path, int64_t max_age_s,
                             bool secure);

}  // namespace gpupool::api
