// How the agent retries a call to the server: which failures are worth repeating, the one
// exponential backoff every retrying loop and task runner waits by, and the log of a recurring
// problem that does not repeat itself on every attempt.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "core/result.h"

namespace gpupool::agent {

// Whether a failed call is worth repeating as it is: the server could not be reached or failed
// (5xx, its full disk's 507 included), or it said when to retry (Retry-After: a 429 for a key
// past its request rate); another refusal (4xx) would be refused again.
bool RetryLater(const Error& error);

// A refusal as the log shows it: "HTTP 401: <the server's message>".
std::string Refusal(const Error& e);

// The wait before each next attempt after a failure: `first`, then doubling up to `max`, back to
// `first` after Reset (a success).
class Backoff {
 public:
  static constexpr std::chrono::milliseconds kFirst{250};
  static constexpr std::chrono::milliseconds kMax{5'000};

  explicit Backoff(std::chrono::milliseconds first = kFirst, std::chrono::milliseconds max = kMax)
      : first_(first), max_(max) {}

  std::chrono::milliseconds Next();
  void Reset() { current_ = std::chrono::milliseconds(0); }

 private:
  std::chrono::milliseconds first_, max_;
  std::chrono::milliseconds current_{0};
};

// A recurring problem of one loop, logged once through `log`: again only when its kind changes
// ("transport" errors differ in detail from one attempt to the next), and a line when it is over.
class ProblemLog {
 public:
  explicit ProblemLog(std::function<void(const std::string&)> log) : log_(std::move(log)) {}
  void Fail(const std::string& kind, const std::string& message);
  void Recover(const std::string& message);

 private:
  std::function<void(const std::string&)> log_;
  std::string kind_;
};

}  // namespace gpupool::agent
