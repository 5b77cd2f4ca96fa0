// Result<T> and Error: how every module reports failure without exceptions.
// Error codes are a small canonical set; api/ maps them to HTTP statuses in one place.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace gpupool {

enum class ErrorCode {
  kInvalidArgument,      // the caller sent something malformed or out of range
  kNotFound,             // the named thing does not exist (or is not visible to the caller)
  kAlreadyExists,        // creating something whose key is taken
  kFailedPrecondition,   // the request is well formed but the current state forbids it
  kResourceExhausted,    // a quota, balance or capacity limit stops it
  kUnauthenticated,      // no valid identity
  kPermissionDenied,     // identity known, action not allowed
  kUnavailable,          // try again later
  kInsufficientStorage,  // the server's disk is (nearly) full: writes wait until space is freed
  kInternal,             // a bug or an unexpected environment failure
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // lower case, names the offending field and value
  // A refusal that passes by itself (a rate limit, a full cache): how long to wait before the
  // same request may succeed, in milliseconds; 0 when not known. HTTP carries it as Retry-After.
  int64_t retry_after_ms = 0;

  friend bool operator==(const Error&, const Error&) = default;
};

// Result<T> is tl::expected<T, Error> made [[nodiscard]]: a call whose Result is dropped does not
// compile under -Werror, so every failure is handled, propagated or ignored with a comment saying
// why. It is a class rather than an alias only because an alias cannot carry the attribute; it
// adds nothing else. The base's constructors are inherited, so a function returning Result<T>
// still returns a T, `tl::unexpected<Error>` (MakeError and friends) or `{}`, and .value(), *r,
// r->, .error() and `if (!r)` are the base's.
template <typename T>
class [[nodiscard]] Result : public tl::expected<T, Error> {
 public:
  using tl::expected<T, Error>::expected;
};

// Compares as the base does (equal values, or equal errors). Without it `a == b` would pick
// tl::expected's value comparison (`*a == b`), which needs no derived-to-base conversion for b.
template <typename T>
bool operator==(const Result<T>& a, const Result<T>& b) {
  return static_cast<const tl::expected<T, Error>&>(a) ==
         static_cast<const tl::expected<T, Error>&>(b);
}

// Status is a Result that carries no value.
using Status = Result<void>;

inline tl::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return tl::unexpected<Error>(Error{code, std::move(message)});
}
inline tl::unexpected<Error> InvalidArgument(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}
inline tl::unexpected<Error> NotFound(std::string message) {
  return MakeError(ErrorCode::kNotFound, std::move(message));
}

}  // namespace gpupool
