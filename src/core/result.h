// Result<T> and Error: how every module reports failure without exceptions.
// Error codes are a small canonical set; api/ maps them to HTTP statuses in one place.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace gpupool {

enum class ErrorCode {
  kInvalidArgument,     // the caller sent something malformed or out of range
  kNotFound,            // the named thing does not exist (or is not visible to the caller)
  kAlreadyExists,       // creating something whose key is taken
  kFailedPrecondition,  // the request is well formed but the current state forbids it
  kResourceExhausted,   // a quota, balance or capacity limit stops it
  kUnauthenticated,     // no valid identity
  kPermissionDenied,    // identity known, action not allowed
  kUnavailable,         // try again later
  kInternal,            // a bug or an unexpected environment failure
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // lower case, names the offending field and value

  friend bool operator==(const Error&, const Error&) = default;
};

template <typename T>
using Result = tl::expected<T, Error>;

// Status is a Result that carries no value.
using Status = tl::expected<void, Error>;

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
