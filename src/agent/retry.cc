// Implementation of retry.h.
#include "agent/retry.h"

#include <algorithm>

#include "api/http_message.h"

namespace gpupool::agent {

bool RetryLater(const Error& error) {
  return error.code == ErrorCode::kUnavailable || error.code == ErrorCode::kInsufficientStorage ||
         error.code == ErrorCode::kInternal || error.retry_after_ms > 0;
}

std::string Refusal(const Error& e) {
  return "HTTP " + std::to_string(api::HttpStatusOf(e.code)) + ": " + e.message;
}

std::chrono::milliseconds Backoff::Next() {
  current_ = current_.count() == 0 ? first_ : std::min(2 * current_, max_);
  return current_;
}

void ProblemLog::Fail(const std::string& kind, const std::string& message) {
  if (kind != kind_) log_(message);
  kind_ = kind;
}

void ProblemLog::Recover(const std::string& message) {
  if (!kind_.empty()) log_(message);
  kind_.clear();
}

}  // namespace gpupool::agent
