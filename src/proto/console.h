// Wire types of the web console's sessions (docs/api.md "Console sessions"): the login request,
// the session it opens (who it acts as, its CSRF token and expiry) and the logout's answer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/accounts.h"
#include "proto/describe.h"

namespace gpupool::proto {

// How long a console session may live: a minute to a week, twelve hours unless asked.
inline constexpr int64_t kMinSessionTtlS = 60;
inline constexpr int64_t kMaxSessionTtlS = 7 * 24 * 3600;
inline constexpr int64_t kDefaultSessionTtlS = 12 * 3600;

// POST /v1/console/sessions (signed).
struct SessionCreate {
  int64_t ttl_s = kDefaultSessionTtlS;
  static constexpr std::string_view kName = "SessionCreate";
  static constexpr std::string_view kDoc = "A console login: how long its session lives.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("ttl_s", s.ttl_s,
      {.min = kMinSessionTtlS,
       .max = kMaxSessionTtlS,
       .doc = "Seconds until the session expires (also the cookie's Max-Age)"});
  }
};

struct ConsoleSession {
  std::string user_id;
  std::string access_key;
  std::string role;
  std::vector<std::string> projects;
  std::string csrf_token;
  int64_t expires_ms = 0;
  static constexpr std::string_view kName = "ConsoleSession";
  static constexpr std::string_view kDoc =
      "A console session: the key it acts as (exactly what that key may do) and the token every "
      "request but GET and HEAD must carry in X-CSRF-Token.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("user_id", s.user_id);
    v("access_key", s.access_key, {.doc = "The key that logged in; revoking it ends the session"});
    v("role", s.role, {.one_of = kRoles});
    v("projects", s.projects);
    v("csrf_token", s.csrf_token, {.doc = "Send it as X-CSRF-Token on every non-GET request"});
    v("expires_ms", s.expires_ms);
  }
};

struct SessionDeleted {
  bool deleted = true;
  static constexpr std::string_view kName = "SessionDeleted";
  static constexpr std::string_view kDoc = "The console session ended (logout).";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("deleted", s.deleted);
  }
};

}  // namespace gpupool::proto
