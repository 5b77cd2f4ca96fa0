// Tests for agent/tunnel_agent against the real pieces: a Beast HttpServer whose tunnel route
// hands the WebSocket to a TunnelHub, the agent's TunnelClient dialing it, the `port` handler
// connecting to a real TCP echo server. Streams carry bytes both ways (8 MiB through the credit
// windows), refusals name their reason, a task's end resets its streams, and a dropped tunnel
// resets its streams and is dialed again.
#include "agent/tunnel_agent.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/http_server.h"
#include "api/tunnel_hub.h"

namespace gpupool::agent {
namespace {

using namespace std::chrono_literals;

// What a stream delivered, awaited by the test.
// Shared: the stream may call its handlers after the test let go of the reader (the hub resets
// the stream when the tunnel drops at the test's end), so they hold it.
struct Reader : std::enable_shared_from_this<Reader> {
  std::mutex mu;
  std::condition_variable cv;
  std::string data;
  bool ended = false;
  std::optional<std::string> reset;

  api::tunnel::StreamHandlers Handlers(std::shared_ptr<api::tunnel::Stream> stream) {
    api::tunnel::StreamHandlers h;
    h.on_data = [self = shared_from_this(), stream](std::string bytes) {
      const size_t n = bytes.size();
      {
        std::lock_guard lock(self->mu);
        self->data += bytes;
        self->cv.notify_all();
      }
      stream->Consumed(n);
    };
    h.on_end = [self = shared_from_this()] {
      std::lock_guard lock(self->mu);
      self->ended = true;
      self->cv.notify_all();
    };
    h.on_reset = [self = shared_from_this()](std::string why) {
      std::lock_guard lock(self->mu);
      self->reset = std::move(why);
      self->cv.notify_all();
    };
    return h;
  }
  bool AwaitBytes(size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return data.size() >= n || reset; });
  }
  bool AwaitReset() {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return reset.has_value(); });
  }
};

class TunnelAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api::HttpServerOptions options;
    options.threads = 2;
    server_ = std::make_unique<api::HttpServer>(
        options, [this](api::HttpRequest request, api::Responder respond) {
          if (request.Path() != "/v1/agent/nodes/n1/tunnel") {
            return respond(api::ErrorResponse(ErrorCode::kNotFound, "no such route"));
          }
          std::shared_ptr<api::Duplex> websocket = respond.AcceptWebSocket();
          ASSERT_TRUE(websocket);
          hub_.Attach("n1", websocket);
          std::lock_guard lock(mu_);
          last_tunnel_ = websocket;
          ++tunnels_;
          cv_.notify_all();
        });
    ASSERT_TRUE(server_->Start());

    // The handlers hold the duplex weakly: it holds them, and a strong cycle leaks it when the
    // test ends before the connection does (LeakSanitizer).
    auto echo = api::TcpListener::Listen(loop_, "127.0.0.1", 0, [](std::shared_ptr<api::Duplex> d) {
      api::DuplexHandlers h;
      std::weak_ptr<api::Duplex> weak = d;
      h.on_data = [weak](std::string bytes) {
        auto duplex = weak.lock();
        return duplex && duplex->Send(std::move(bytes));
      };
      h.on_end = [weak] {
        if (auto duplex = weak.lock()) duplex->End();
      };
      d->Start(std::move(h));
    });
    ASSERT_TRUE(echo) << echo.error().message;
    echo_ = std::move(*echo);

    dispatcher_ = std::make_shared<TunnelDispatcher>();
    dispatcher_->Register(
        "port",
        PortHandler(loop_, [this](const std::string& task, int32_t port) -> Result<PortTarget> {
          if (task != "t-1") return NotFound("task " + task + " does not run on node n1");
          if (port != 8888) {
            return NotFound("task t-1 declares no port " + std::to_string(port));
          }
          return PortTarget{"127.0.0.1", echo_->port()};
        }));
    TunnelClientOptions client_options;
    client_options.endpoint = "http://127.0.0.1:" + std::to_string(server_->port());
    client_options.node = "n1";
    client_ = std::make_unique<TunnelClient>(client_options, loop_, dispatcher_);
    ASSERT_TRUE(AwaitTunnels(1));
  }

  void TearDown() override {
    client_.reset();
    server_->Stop();
  }

  bool AwaitTunnels(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 20s, [&] { return tunnels_ >= n; }) && hub_.AwaitConnected("n1", 20s);
  }

  Result<std::shared_ptr<api::tunnel::Stream>> Open(proto::TunnelOpen target) {
    std::promise<Result<std::shared_ptr<api::tunnel::Stream>>> answer;
    hub_.Open("n1", target, [&](Result<std::shared_ptr<api::tunnel::Stream>> r) {
      answer.set_value(std::move(r));
    });
    auto future = answer.get_future();
    if (future.wait_for(20s) != std::future_status::ready) {
      return MakeError(ErrorCode::kUnavailable, "no answer to the open");
    }
    return future.get();
  }

  api::IoLoop loop_{2};
  api::TunnelHub hub_;
  std::unique_ptr<api::HttpServer> server_;
  std::unique_ptr<api::TcpListener> echo_;
  std::shared_ptr<TunnelDispatcher> dispatcher_;
  std::unique_ptr<TunnelClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<api::Duplex> last_tunnel_;
  int tunnels_ = 0;
};

TEST_F(TunnelAgentTest, AStreamReachesTheTasksPortAndCarriesBytesBothWays) {
  auto stream = Open({"t-1", "port", 8888, {}});
  ASSERT_TRUE(stream) << stream.error().message;
  auto reader = std::make_shared<Reader>();
  (*stream)->SetHandlers(reader->Handlers(*stream));
  ASSERT_TRUE((*stream)->Write("hello"));
  ASSERT_TRUE(reader->AwaitBytes(5));
  EXPECT_EQ(reader->data, "hello");

  // 8 MiB, far past the windows: it all comes back, in order.
  std::string big(8 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE((*stream)->Write(big));
  ASSERT_TRUE(reader->AwaitBytes(5 + big.size()));
  ASSERT_FALSE(reader->reset) << *reader->reset;
  EXPECT_TRUE(reader->data.substr(5) == big);

  // A half-close reaches the echo server, whose own end comes back.
  (*stream)->End();
  {
    std::unique_lock lock(reader->mu);
    ASSERT_TRUE(reader->cv.wait_for(lock, 20s, [&] { return reader->ended; }));
  }
  EXPECT_EQ(dispatcher_->stream_count("t-1"), 0u);
}

TEST_F(TunnelAgentTest, RefusalsNameTheirReason) {
  auto undeclared = Open({"t-1", "port", 9999, {}});
  ASSERT_FALSE(undeclared);
  EXPECT_EQ(undeclared.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(undeclared.error().message, "task t-1 declares no port 9999");

  auto elsewhere = Open({"t-2", "port", 8888, {}});
  ASSERT_FALSE(elsewhere);
  EXPECT_EQ(elsewhere.error().message, "task t-2 does not run on node n1");

  auto kind = Open({"t-1", "teleport", 8888, {}});
  ASSERT_FALSE(kind);
  EXPECT_EQ(kind.error().message, "this agent has no handler for kind 'teleport' (it has: port)");

  auto bad = Open({"t-1", "port", 0, {}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "port 0 is not 1..65535");
}

TEST_F(TunnelAgentTest, ATasksEndResetsItsStreams) {
  auto stream = Open({"t-1", "port", 8888, {}});
  ASSERT_TRUE(stream) << stream.error().message;
  auto reader = std::make_shared<Reader>();
  (*stream)->SetHandlers(reader->Handlers(*stream));
  EXPECT_EQ(dispatcher_->stream_count("t-1"), 1u);
  dispatcher_->TaskEnded("t-1");
  ASSERT_TRUE(reader->AwaitReset());
  EXPECT_EQ(*reader->reset, "task t-1 ended");
  EXPECT_FALSE((*stream)->Write("late"));
}

TEST_F(TunnelAgentTest, ADroppedTunnelResetsItsStreamsAndIsDialedAgain) {
  auto stream = Open({"t-1", "port", 8888, {}});
  ASSERT_TRUE(stream) << stream.error().message;
  auto reader = std::make_shared<Reader>();
  (*stream)->SetHandlers(reader->Handlers(*stream));
  std::shared_ptr<api::Duplex> tunnel;
  {
    std::lock_guard lock(mu_);
    tunnel = last_tunnel_;
  }
  tunnel->Close("the test drops the tunnel");
  ASSERT_TRUE(reader->AwaitReset());
  // The stream goes with its tunnel: by the close itself, or — when the agent, told of the close,
  // has dialed again before the server's end of the old WebSocket finished closing — by the new
  // tunnel replacing the old one. Either way it is reset, never left open.
  EXPECT_TRUE(reader->reset->find("the test drops the tunnel") != std::string::npos ||
              reader->reset->find("node n1's agent opened a new tunnel") != std::string::npos)
      << *reader->reset;

  ASSERT_TRUE(AwaitTunnels(2)) << "the agent dials again";
  auto again = Open({"t-1", "port", 8888, {}});
  ASSERT_TRUE(again) << again.error().message;
  auto reader2 = std::make_shared<Reader>();
  (*again)->SetHandlers(reader2->Handlers(*again));
  ASSERT_TRUE((*again)->Write("back"));
  ASSERT_TRUE(reader2->AwaitBytes(4));
  EXPECT_EQ(reader2->data, "back");
  EXPECT_EQ(client_->connections(), 2);
}

}  // namespace
}  // namespace gpupool::agent
