// The agent's end of the tunnel (see tunnel_agent.h).
#include "agent/tunnel_agent.h"

#include <algorithm>
#include <utility>

#include "agent/retry.h"
#include "proto/json_codec.h"

namespace gpupool::agent {

void TunnelDispatcher::Register(const std::string& kind, TunnelHandler handler) {
  std::lock_guard lock(mu_);
  handlers_[kind] = std::move(handler);
}

void TunnelDispatcher::Dispatch(std::shared_ptr<api::tunnel::Stream> stream,
                                const std::string& payload) {
  Result<proto::TunnelOpen> open = proto::DecodeBody<proto::TunnelOpen>(payload, true);
  if (!open) return stream->Refuse("malformed OPEN: " + open.error().message);
  std::unique_lock lock(mu_);
  const auto it = handlers_.find(open->kind);
  if (it == handlers_.end()) {
    std::string kinds;
    for (const auto& [kind, h] : handlers_) kinds += (kinds.empty() ? "" : ", ") + kind;
    lock.unlock();
    return stream->Refuse("this agent has no handler for kind '" + open->kind +
                          "' (it has: " + kinds + ")");
  }
  TunnelHandler handler = it->second;
  auto& streams = by_task_[open->task];
  std::erase_if(streams, [](const auto& weak) {
    const auto live = weak.lock();
    return !live || !live->Live();
  });
  streams.push_back(stream);
  lock.unlock();
  handler(*open, std::move(stream));
}

void TunnelDispatcher::TaskEnded(const std::string& task) {
  std::vector<std::weak_ptr<api::tunnel::Stream>> streams;
  {
    std::lock_guard lock(mu_);
    const auto it = by_task_.find(task);
    if (it == by_task_.end()) return;
    streams = std::move(it->second);
    by_task_.erase(it);
  }
  for (const auto& weak : streams) {
    if (auto stream = weak.lock()) stream->Reset("task " + task + " ended");
  }
}

size_t TunnelDispatcher::stream_count(const std::string& task) {
  std::lock_guard lock(mu_);
  const auto it = by_task_.find(task);
  if (it == by_task_.end()) return 0;
  return static_cast<size_t>(std::count_if(it->second.begin(), it->second.end(),
                                           [](const auto& weak) {
                                             const auto live = weak.lock();
                                             return live && live->Live();
                                           }));
}

TunnelHandler PortHandler(api::IoLoop& loop, PortResolver resolve) {
  return [&loop, resolve = std::move(resolve)](const proto::TunnelOpen& open,
                                               std::shared_ptr<api::tunnel::Stream> stream) {
    if (open.port < 1 || open.port > 65535) {
      return stream->Refuse("port " + std::to_string(open.port) + " is not 1..65535");
    }
    Result<PortTarget> target = resolve(open.task, open.port);
    if (!target) return stream->Refuse(target.error().message);
    const std::string where = "task " + open.task + "'s port " + std::to_string(open.port);
    api::DialTcp(
        loop, target->host, target->port, std::chrono::seconds(10),
        [stream, where](Result<std::shared_ptr<api::Duplex>> connection) {
          if (!connection) {
            return stream->Refuse(where + " does not answer: " + connection.error().message);
          }
          stream->Accept();
          api::tunnel::Pipe(stream, std::move(*connection));
        });
  };
}

TunnelClient::TunnelClient(TunnelClientOptions options, api::IoLoop& loop,
                           std::shared_ptr<TunnelDispatcher> dispatcher)
    : options_(std::move(options)), loop_(loop), dispatcher_(std::move(dispatcher)) {
  thread_ = std::thread([this] { Run(); });
}

TunnelClient::~TunnelClient() { Stop(); }

void TunnelClient::Stop() {
  std::shared_ptr<api::Duplex> websocket;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    websocket = websocket_;
    wake_.notify_all();
  }
  if (websocket) websocket->Close("the agent stops");
  if (thread_.joinable()) thread_.join();
}

bool TunnelClient::connected() const {
  std::lock_guard lock(mu_);
  return connected_;
}

int TunnelClient::connections() const {
  std::lock_guard lock(mu_);
  return connections_;
}

void TunnelClient::Run() {
  const auto log = [this](const std::string& line) {
    if (options_.log) options_.log(line);
  };
  ProblemLog problems(log);
  Backoff backoff;
  const std::string path = "/v1/agent/nodes/" + options_.node + "/tunnel";
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    Result<std::shared_ptr<api::Duplex>> dialed =
        api::DialWebSocket(loop_, {.endpoint = options_.endpoint,
                                   .access_key = options_.access_key,
                                   .secret_key = options_.secret_key,
                                   .path_with_query = path,
                                   .timeout = options_.dial_timeout,
                                   .ca_file = options_.ca_file});
    if (!dialed) {
      const Error& e = dialed.error();
      problems.Fail(
          RetryLater(e) ? "transport" : "refused",
          "tunnel: " + (RetryLater(e) ? e.message : Refusal(e)) + "; dialing again with backoff");
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, backoff.Next(), [this] { return stopping_; });
      continue;
    }
    backoff.Reset();
    problems.Recover("tunnel: connected to " + options_.endpoint);
    std::shared_ptr<api::Duplex> websocket = std::move(*dialed);
    std::shared_ptr<TunnelDispatcher> dispatcher = dispatcher_;
    auto session = api::tunnel::Session::Create(
        [websocket](std::string message) { websocket->Send(std::move(message)); },
        /*odd_ids=*/false,
        [dispatcher](std::shared_ptr<api::tunnel::Stream> stream, std::string payload) {
          dispatcher->Dispatch(std::move(stream), payload);
        });
    auto closed = std::make_shared<std::string>();
    bool done = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        websocket->Close("the agent stops");
        return;
      }
      websocket_ = websocket;
      connected_ = true;
      ++connections_;
    }
    api::DuplexHandlers handlers;
    handlers.on_data = [session, websocket](std::string message) {
      if (Status ok = session->OnMessage(message); !ok) {
        websocket->Close("the server broke the tunnel protocol: " + ok.error().message);
        return false;
      }
      return true;
    };
    handlers.on_end = [websocket] { websocket->End(); };
    handlers.on_closed = [this, closed, &done](std::string why) {
      std::lock_guard lock(mu_);
      *closed = why.empty() ? "closed by the server" : why;
      done = true;
      wake_.notify_all();
    };
    websocket->Start(std::move(handlers));
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return done; });
      websocket_.reset();
      connected_ = false;
    }
    session->Close("the tunnel dropped: " + *closed);
    log("tunnel: lost (" + *closed + "); dialing again");
  }
}

}  // namespace gpupool::agent
