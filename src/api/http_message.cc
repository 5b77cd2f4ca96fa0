// The ErrorCode ↔ HTTP status mapping and the JSON error body every 4xx/5xx carries.
#include "api/http_message.h"

#include <algorithm>
#include <array>
#include <string>

#include "proto/common.h"
#include "proto/json_codec.h"

namespace gpupool::api {

std::string_view HttpRequest::Path() const {
  const size_t q = target.find('?');
  return q == std::string::npos ? std::string_view(target) : std::string_view(target).substr(0, q);
}

std::string_view HttpRequest::RawQuery() const {
  const size_t q = target.find('?');
  return q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1);
}

int HttpStatusOf(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return 400;
    case ErrorCode::kUnauthenticated:
      return 401;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kFailedPrecondition:
      return 409;
    case ErrorCode::kResourceExhausted:
      return 429;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kInsufficientStorage:
      return 507;
    case ErrorCode::kInternal:
      return 500;
  }
  return 500;
}

std::optional<ErrorCode> ErrorCodeOfHttpStatus(int status) {
  if (status >= 200 && status < 300) return std::nullopt;
  switch (status) {
    case 400:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return ErrorCode::kFailedPrecondition;
    case 429:
      return ErrorCode::kResourceExhausted;
    case 502:
    case 503:
    case 504:
      return ErrorCode::kUnavailable;
    case 507:
      return ErrorCode::kInsufficientStorage;
    default:
      break;
  }
  if (status >= 400 && status < 500) return ErrorCode::kInvalidArgument;
  return ErrorCode::kInternal;
}

std::optional<ErrorCode> ParseErrorCodeName(std::string_view name) {
  constexpr std::array kAll = {ErrorCode::kInvalidArgument,     ErrorCode::kNotFound,
                               ErrorCode::kAlreadyExists,       ErrorCode::kFailedPrecondition,
                               ErrorCode::kResourceExhausted,   ErrorCode::kUnauthenticated,
                               ErrorCode::kPermissionDenied,    ErrorCode::kUnavailable,
                               ErrorCode::kInsufficientStorage, ErrorCode::kInternal};
  for (ErrorCode c : kAll) {
    if (ErrorCodeName(c) == name) return c;
  }
  return std::nullopt;
}

HttpResponse ErrorResponse(int status, std::string_view code_name, std::string_view message) {
  HttpResponse r;
  r.status = status;
  // Messages may quote what the client sent; Dump replaces invalid UTF-8 rather than fail.
  r.body =
      proto::Dump(proto::Encode(proto::ErrorBody{{std::string(code_name), std::string(message)}}));
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "GPUPOOL-HMAC-SHA256");
  return r;
}

HttpResponse ErrorResponse(ErrorCode code, std::string_view message) {
  return ErrorResponse(HttpStatusOf(code), ErrorCodeName(code), message);
}

std::string RetryAfterSeconds(int64_t retry_after_ms) {
  return std::to_string(std::max<int64_t>(1, (retry_after_ms + 999) / 1000));
}

HttpResponse ErrorResponse(const Error& error) {
  HttpResponse r = ErrorResponse(error.code, error.message);
  if (error.retry_after_ms > 0) {
    r.headers.emplace_back("Retry-After", RetryAfterSeconds(error.retry_after_ms));
  }
  return r;
}

}  // namespace gpupool::api
