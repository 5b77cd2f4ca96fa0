// A synchronous, signed HTTP client for the REST API over one keep-alive connection (reconnected
// once when the server closed it while idle). Used by the CLI, the agent, integration tests and
// benchmarks. Not thread-safe: one Client per thread.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpupool::api {

// The typed resources over a Client (resources.h).
class TasksApi;
class FilesApi;
class NodesApi;
class AgentApi;
class AccountsApi;
class BillingApi;

struct ClientOptions {
  std::chrono::milliseconds timeout{60'000};  // connect, and each request's write + read
  size_t max_response_bytes = 64 << 20;
};

struct ClientResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

class Client {
 public:
  // `endpoint`: "http://host:port" (no path). Without an access key requests go unsigned
  // (for /healthz and /metrics). A malformed endpoint makes every call fail with its reason.
  Client(std::string endpoint, std::string access_key, std::string secret_key,
         ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one request and returns the response whatever its status. Errors are transport
  // problems only: kUnavailable (cannot connect, connection lost, timeout) or kInvalidArgument
  // (a malformed path or endpoint).
  Result<ClientResponse> Call(std::string_view method, std::string_view path_with_query,
                              std::string_view body = {});

  // Call, then the body as JSON for a 2xx status (null for an empty body). A non-2xx status
  // becomes an Error with the server's code and message (or the code the status stands for).
  Result<nlohmann::json> CallJson(std::string_view method, std::string_view path_with_query,
                                  std::string_view body = {});

  // The typed calls of each resource (resources.h): client.Tasks().Submit(submit).
  TasksApi Tasks();
  FilesApi Files();
  NodesApi Nodes();
  AgentApi Agent();
  AccountsApi Accounts();
  BillingApi Billing();

  // Whether the last Call reused an open connection (keep-alive), for tests and benchmarks.
  bool last_call_reused_connection() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The error a non-2xx response stands for: the code and message of its error body, or the code
// the status stands for when the body has none.
Error ResponseError(const ClientResponse& response);

}  // namespace gpupool::api
