// The server's tunnels (see tunnel_hub.h): one Session per node over its agent's WebSocket.
#include "api/tunnel_hub.h"

#include <utility>
#include <vector>

#include "proto/json_codec.h"

namespace gpupool::api {

struct TunnelHub::Core {
  struct Tunnel {
    std::shared_ptr<Duplex> websocket;
    std::shared_ptr<tunnel::Session> session;
  };

  mutable std::mutex mu;
  mutable std::condition_variable changed;
  std::unordered_map<std::string, std::shared_ptr<Tunnel>> nodes;

  std::shared_ptr<Tunnel> Find(const std::string& node) const {
    std::lock_guard lock(mu);
    const auto it = nodes.find(node);
    return it == nodes.end() ? nullptr : it->second;
  }

  // The tunnel is over: its streams are reset, and it leaves the map unless replaced already.
  void Dropped(const std::string& node, const std::shared_ptr<Tunnel>& t, const std::string& why) {
    t->session->Close("the tunnel of node " + node + " closed: " + why);
    std::lock_guard lock(mu);
    const auto it = nodes.find(node);
    if (it != nodes.end() && it->second == t) nodes.erase(it);
    changed.notify_all();
  }
};

TunnelHub::TunnelHub() : core_(std::make_shared<Core>()) {}

TunnelHub::~TunnelHub() {
  std::unordered_map<std::string, std::shared_ptr<Core::Tunnel>> nodes;
  {
    std::lock_guard lock(core_->mu);
    nodes.swap(core_->nodes);
  }
  for (auto& [node, t] : nodes) {
    t->session->Close("the server stops");
    t->websocket->Close("the server stops");
  }
}

void TunnelHub::Attach(const std::string& node, std::shared_ptr<Duplex> websocket) {
  auto t = std::make_shared<Core::Tunnel>();
  t->websocket = websocket;
  t->session = tunnel::Session::Create(
      [websocket](std::string message) { websocket->Send(std::move(message)); },
      /*odd_ids=*/true);
  std::shared_ptr<Core::Tunnel> old;
  {
    std::lock_guard lock(core_->mu);
    old = std::exchange(core_->nodes[node], t);
    core_->changed.notify_all();
  }
  if (old) {
    old->session->Close("node " + node + "'s agent opened a new tunnel");
    old->websocket->Close("replaced by a newer tunnel of the node");
  }
  std::weak_ptr<Core> weak_core = core_;
  std::weak_ptr<Core::Tunnel> weak_t = t;
  DuplexHandlers handlers;
  handlers.on_data = [session = t->session, websocket, node](std::string message) {
    if (Status ok = session->OnMessage(message); !ok) {
      websocket->Close("node " + node +
                       "'s agent broke the tunnel protocol: " + ok.error().message);
      return false;
    }
    return true;
  };
  handlers.on_end = [websocket] { websocket->End(); };
  handlers.on_closed = [weak_core, t, node](std::string why) {
    if (std::shared_ptr<Core> core = weak_core.lock()) {
      core->Dropped(node, t, why.empty() ? "closed by the agent" : why);
    } else {
      t->session->Close("the server stops");
    }
  };
  websocket->Start(std::move(handlers));
}

void TunnelHub::Open(const std::string& node, const proto::TunnelOpen& target,
                     tunnel::Session::Opened done) {
  std::shared_ptr<Core::Tunnel> t = core_->Find(node);
  if (!t) {
    return done(MakeError(ErrorCode::kUnavailable,
                          "node " + node + " has no tunnel: its agent is not connected"));
  }
  t->session->Open(proto::Dump(proto::Encode(target)), std::move(done));
}

bool TunnelHub::Connected(const std::string& node) const { return core_->Find(node) != nullptr; }

bool TunnelHub::AwaitConnected(const std::string& node, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(core_->mu);
  return core_->changed.wait_for(lock, timeout, [&] { return core_->nodes.count(node) > 0; });
}

size_t TunnelHub::stream_count() const {
  std::vector<std::shared_ptr<Core::Tunnel>> tunnels;
  {
    std::lock_guard lock(core_->mu);
    for (const auto& [node, t] : core_->nodes) tunnels.push_back(t);
  }
  size_t n = 0;
  for (const auto& t : tunnels) n += t->session->stream_count();
  return n;
}

}  // namespace gpupool::api
