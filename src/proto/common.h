// Wire types every part of the API shares: the error body, the closed sets of names (task states,
// roles, …) the API speaks, and the small answers (health, deletion, heartbeat).
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include "proto/describe.h"

namespace gpupool::proto {

// Self's constness on Base: a derived wire type describes its base's fields through it.
template <typename Self, typename Base>
using Like = std::conditional_t<std::is_const_v<Self>, const Base, Base>;

// The lower-case names the API uses, in the order of core's enums (tests check they agree;
// kErrorCodes is the set of ErrorCodeName's values).
inline constexpr std::string_view kTaskStates[] = {"pending", "scheduled", "starting",
                                                   "running", "succeeded", "failed",
                                                   "stopped", "preempted", "lost"};
inline constexpr std::string_view kTopologies[] = {"preferred", "required"};
inline constexpr std::string_view kRoles[] = {"admin", "member"};
inline constexpr std::string_view kNodeStatuses[] = {"ready", "lost"};
inline constexpr std::string_view kLedgerKinds[] = {"credit", "usage"};
inline constexpr std::string_view kOutputStreams[] = {"stdout", "stderr", "metrics"};
inline constexpr std::string_view kResolutions[] = {"raw", "1m"};
inline constexpr std::string_view kSnapshotTriggers[] = {"manual",  "periodic", "stop",
                                                         "preempt", "drain",    "move"};
inline constexpr std::string_view kConsistencies[] = {"crash", "application"};
// The signals a task may ask to be sent when a snapshot wants it to checkpoint ("": SIGUSR1).
inline constexpr std::string_view kCheckpointSignals[] = {"",       "SIGUSR1", "SIGUSR2", "SIGHUP",
                                                          "SIGINT", "SIGQUIT", "SIGALRM", "SIGTERM",
                                                          "SIGURG", "SIGWINCH"};
inline constexpr std::string_view kErrorCodes[] = {"invalid_argument",     "unauthenticated",
                                                   "permission_denied",    "not_found",
                                                   "already_exists",       "failed_precondition",
                                                   "resource_exhausted",   "unavailable",
                                                   "insufficient_storage", "internal"};

struct ErrorDetail {
  std::string code;
  std::string message;
  static constexpr std::string_view kName = "ErrorDetail";
  static constexpr std::string_view kDoc = "What went wrong.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("code", s.code, {.one_of = kErrorCodes, .doc = "For programs"});
    v("message", s.message, {.doc = "For people: names the field or value at fault"});
  }
};

// Every 4xx and 5xx answer.
struct ErrorBody {
  ErrorDetail error;
  static constexpr std::string_view kName = "Error";
  static constexpr std::string_view kDoc = "The body of every 4xx and 5xx answer.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("error", s.error);
  }
};

struct Health {
  std::string status;
  static constexpr std::string_view kName = "Health";
  static constexpr std::string_view kDoc = "200 with ok while the server serves, 503 otherwise.";
  static constexpr bool kResponse = true;
  static constexpr std::string_view kStatuses[] = {"ok", "unhealthy"};
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("status", s.status, {.one_of = kStatuses});
  }
};

// Prometheus text exposition (text/plain), not JSON.
struct MetricsText {
  std::string text;
};

// A JSON document the types do not describe (the OpenAPI document itself).
struct JsonDocument {
  std::string text;
};

// Raw bytes (application/octet-stream), not JSON: file chunks.
struct Bytes {
  std::string data;
};

}  // namespace gpupool::proto
