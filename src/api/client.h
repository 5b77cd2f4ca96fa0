// A synchronous, signed HTTP client for the REST API over one keep-alive connection (reconnected
// once when the server closed it while idle). Used by the CLI, the agent, integration tests and
// benchmarks. Not thread-safe: one Client per thread. Beside it, the client side of long-lived
// connections as Duplexes (duplex.h) on an IoLoop: a signed WebSocket (the agent's tunnel, the
// CLI's streams), a TCP connection dialed (the agent's port streams) or accepted (port-forward).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

#include "api/duplex.h"
#include "core/result.h"

namespace gpupool::api {

// The typed resources over a Client (resources.h).
class TasksApi;
class FilesApi;
class NodesApi;
class SnapshotsApi;
class VolumesApi;
class DatasetsApi;
class AgentApi;
class AccountsApi;
class BillingApi;

struct ClientOptions {
  std::chrono::milliseconds timeout{60'000};  // connect, and each request's write + read
  size_t max_response_bytes = 64 << 20;
  // https: the PEM certificates the server's is verified against; empty: the system's store
  // (which honours SSL_CERT_FILE). The server's name must match the endpoint's host either way.
  std::string ca_file{};
  // A request the server turned away for now with when to retry (429 past the key's rate, 503
  // for full connection or nonce limits: both with Retry-After, nothing done) is sent again after
  // that wait, while the waits for it add up to at most this: what bulk transfers (dataset
  // pushes and mounts, snapshots) need, whose thousands of requests outrun a key's burst. 0: the
  // refusal is the answer.
  std::chrono::milliseconds throttled_wait{0};
};

struct ClientResponse {
  int status = 0;
  std::string content_type;
  std::string body;
  int64_t retry_after_ms = 0;  // Retry-After (seconds, as the API sends it); 0: none
};

class Client {
 public:
  // `endpoint`: "http://host:port" or "https://host:port" (no path; https verifies the server,
  // ClientOptions::ca_file). Without an access key requests go unsigned
  // (for /healthz and /metrics). A malformed endpoint makes every call fail with its reason.
  Client(std::string endpoint, std::string access_key, std::string secret_key,
         ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Another client of the same server, key and options, with a connection of its own: for
  // requests made at once from other threads (a Client serves one thread at a time).
  std::unique_ptr<Client> Sibling() const;

  // Sends one request and returns the response whatever its status (a throttled one sent again
  // as ClientOptions::throttled_wait allows, signed anew). Errors are transport
  // problems only: kUnavailable (cannot connect, the server's certificate not trusted,
  // connection lost, timeout) or kInvalidArgument (a malformed path or endpoint, a CA file that
  // cannot be read).
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
  SnapshotsApi Snapshots();
  VolumesApi Volumes();
  DatasetsApi Datasets();
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
// the status stands for when the body has none; its Retry-After as Error::retry_after_ms.
Error ResponseError(const ClientResponse& response);

// Threads that run the Duplexes dialed or accepted below (their handlers run on them).
class IoLoop {
 public:
  explicit IoLoop(int threads = 1);
  ~IoLoop();  // stops the threads: it must outlive the duplexes on it (they hear nothing more)
  IoLoop(const IoLoop&) = delete;
  IoLoop& operator=(const IoLoop&) = delete;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

using Dialed = std::function<void(Result<std::shared_ptr<Duplex>>)>;

struct WebSocketDial {
  std::string endpoint;      // "http://host:port" or "https://host:port"
  std::string access_key{};  // empty: unsigned
  std::string secret_key{};
  std::string path_with_query;                // "/v1/agent/tunnel?node=n1"
  std::chrono::milliseconds timeout{30'000};  // connect and each handshake (TLS, WebSocket)
  bool text = false;      // send text messages (a browser's protocol, JSON), not binary
  std::string ca_file{};  // https: as ClientOptions::ca_file
};

// Opens a WebSocket (binary messages), its handshake signed as Client::Call signs a GET. `done`
// runs on a loop thread: the Duplex, or the server's refusal (a non-101 answer, as
// ResponseError), or kUnavailable (cannot connect, timeout).
void DialWebSocket(IoLoop& loop, WebSocketDial dial, Dialed done);
// The same, waiting for the answer (never on a loop thread).
Result<std::shared_ptr<Duplex>> DialWebSocket(IoLoop& loop, WebSocketDial dial);

// Connects to host:port; the connection's bytes as a Duplex. kUnavailable when it cannot.
void DialTcp(IoLoop& loop, std::string host, uint16_t port, std::chrono::milliseconds timeout,
             Dialed done);

// A TCP listener whose connections become Duplexes.
class TcpListener {
 public:
  // Listens on host:port (port 0: an ephemeral one); `on_accept` gets each connection (on a loop
  // thread). kUnavailable when it cannot bind.
  static Result<std::unique_ptr<TcpListener>> Listen(
      IoLoop& loop, const std::string& host, uint16_t port,
      std::function<void(std::shared_ptr<Duplex>)> on_accept);
  ~TcpListener();  // stops accepting
  uint16_t port() const;

  struct Impl;
  explicit TcpListener(std::shared_ptr<Impl> impl);

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpupool::api
