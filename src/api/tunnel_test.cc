// Tests for api/tunnel: two Sessions wired back to back through queues the test delivers by hand
// (so every step is deterministic): opening, refusal, data both ways, half-close, credit windows
// (a reader that does not consume stops its writer and only it), reset, the tunnel's loss, and
// protocol violations.
#include "api/tunnel.h"

#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/tunnel_frame.h"

namespace gpupool::api::tunnel {
namespace {

// What one stream's handlers saw.
struct Seen {
  std::string data;
  bool ended = false;
  std::optional<std::string> reset;
  int writable = 0;
};

StreamHandlers Record(std::shared_ptr<Seen> seen, std::shared_ptr<Stream> consume_into = nullptr) {
  StreamHandlers h;
  h.on_data = [seen, consume_into](std::string bytes) {
    seen->data += bytes;
    if (consume_into) consume_into->Consumed(bytes.size());
  };
  h.on_end = [seen] { seen->ended = true; };
  h.on_reset = [seen](std::string reason) { seen->reset = std::move(reason); };
  h.on_writable = [seen] { ++seen->writable; };
  return h;
}

class TunnelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = Session::Create([this](std::string m) { to_agent_.push_back(std::move(m)); },
                              /*odd_ids=*/true);
    agent_ = Session::Create([this](std::string m) { to_server_.push_back(std::move(m)); },
                             /*odd_ids=*/false,
                             [this](std::shared_ptr<Stream> stream, std::string payload) {
                               accepted_.push_back(stream);
                               payloads_.push_back(payload);
                               if (payload == "refuse") {
                                 stream->Refuse("no such port");
                               } else if (auto_accept_) {
                                 stream->Accept();
                               }
                             });
  }

  // Delivers queued messages both ways until none is left.
  void Flush() {
    while (!to_agent_.empty() || !to_server_.empty()) {
      while (!to_agent_.empty()) {
        std::string m = std::move(to_agent_.front());
        to_agent_.pop_front();
        ASSERT_TRUE(agent_->OnMessage(m));
      }
      while (!to_server_.empty()) {
        std::string m = std::move(to_server_.front());
        to_server_.pop_front();
        ASSERT_TRUE(server_->OnMessage(m));
      }
    }
  }

  // Opens a stream from the server and returns both ends.
  std::pair<std::shared_ptr<Stream>, std::shared_ptr<Stream>> OpenPair(std::string payload = "p") {
    std::shared_ptr<Stream> opened;
    server_->Open(payload, [&](Result<std::shared_ptr<Stream>> r) {
      ASSERT_TRUE(r) << r.error().message;
      opened = *r;
    });
    Flush();
    EXPECT_TRUE(opened);
    return {opened, accepted_.back()};
  }

  std::deque<std::string> to_agent_, to_server_;
  std::shared_ptr<Session> server_, agent_;
  std::vector<std::shared_ptr<Stream>> accepted_;
  std::vector<std::string> payloads_;
  bool auto_accept_ = true;
};

TEST_F(TunnelTest, OpensCarriesBothWaysAndClosesCleanly) {
  auto [s, a] = OpenPair("{\"kind\":\"port\"}");
  EXPECT_EQ(payloads_.back(), "{\"kind\":\"port\"}");
  EXPECT_EQ(s->id() % 2, 1u);
  auto seen_s = std::make_shared<Seen>();
  auto seen_a = std::make_shared<Seen>();
  s->SetHandlers(Record(seen_s, s));
  a->SetHandlers(Record(seen_a, a));
  ASSERT_TRUE(s->Write("GET / HTTP/1.1\r\n\r\n"));
  ASSERT_TRUE(a->Write("HTTP/1.1 200 OK\r\n"));
  Flush();
  EXPECT_EQ(seen_a->data, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(seen_s->data, "HTTP/1.1 200 OK\r\n");
  s->End();
  Flush();
  EXPECT_TRUE(seen_a->ended);
  EXPECT_FALSE(s->Write("more")) << "writes after End are refused";
  ASSERT_TRUE(a->Write("body")) << "the other direction still works after a half-close";
  a->End();
  Flush();
  EXPECT_EQ(seen_s->data, "HTTP/1.1 200 OK\r\nbody");
  EXPECT_TRUE(seen_s->ended);
  EXPECT_FALSE(seen_s->reset);
  EXPECT_FALSE(seen_a->reset);
  EXPECT_EQ(server_->stream_count(), 0u);
  EXPECT_EQ(agent_->stream_count(), 0u);
}

TEST_F(TunnelTest, DataArrivingBeforeHandlersIsDeliveredInOrder) {
  auto [s, a] = OpenPair();
  ASSERT_TRUE(s->Write("one "));
  ASSERT_TRUE(s->Write("two"));
  s->End();
  Flush();
  auto seen = std::make_shared<Seen>();
  a->SetHandlers(Record(seen, a));
  EXPECT_EQ(seen->data, "one two");
  EXPECT_TRUE(seen->ended);
}

TEST_F(TunnelTest, RefusalReachesTheOpener) {
  std::optional<Error> error;
  server_->Open("refuse", [&](Result<std::shared_ptr<Stream>> r) {
    ASSERT_FALSE(r);
    error = r.error();
  });
  Flush();
  ASSERT_TRUE(error);
  EXPECT_EQ(error->code, ErrorCode::kUnavailable);
  EXPECT_EQ(error->message, "no such port");
  EXPECT_EQ(server_->stream_count(), 0u);
  EXPECT_EQ(agent_->stream_count(), 0u);
}

TEST_F(TunnelTest, AnAcceptLaterLetsDataWrittenMeanwhileGo) {
  auto_accept_ = false;
  std::shared_ptr<Stream> s;
  server_->Open("p", [&](Result<std::shared_ptr<Stream>> r) { s = *r; });
  Flush();
  EXPECT_FALSE(s) << "not open before the agent accepts";
  std::shared_ptr<Stream> a = accepted_.back();
  ASSERT_TRUE(a->Write("hello"));  // queued until accepted
  auto seen = std::make_shared<Seen>();
  a->Accept();
  Flush();
  ASSERT_TRUE(s);
  s->SetHandlers(Record(seen, s));
  EXPECT_EQ(seen->data, "hello");
}

TEST_F(TunnelTest, AReaderThatDoesNotConsumeStopsOnlyItsOwnWriter) {
  auto [slow_s, slow_a] = OpenPair();
  auto [fast_s, fast_a] = OpenPair();
  auto slow_seen = std::make_shared<Seen>();
  auto fast_seen = std::make_shared<Seen>();
  slow_a->SetHandlers(Record(slow_seen));  // never consumes
  fast_a->SetHandlers(Record(fast_seen, fast_a));
  auto writer_seen = std::make_shared<Seen>();
  slow_s->SetHandlers(Record(writer_seen, slow_s));

  const size_t total = 3 * kInitialWindow;
  ASSERT_TRUE(slow_s->Write(std::string(total, 's')));
  Flush();
  EXPECT_EQ(slow_seen->data.size(), kInitialWindow) << "the window bounds what is in flight";
  EXPECT_EQ(slow_s->Backlog(), total - kInitialWindow);
  EXPECT_TRUE(slow_s->Saturated());

  // The other stream is not held up by the first one's full window.
  ASSERT_TRUE(fast_s->Write(std::string(2 * kInitialWindow, 'f')));
  Flush();
  EXPECT_EQ(fast_seen->data.size(), 2 * kInitialWindow);

  // Consuming grants more, and the writer hears it may write again once its backlog is low.
  slow_a->Consumed(slow_seen->data.size());
  Flush();
  EXPECT_EQ(slow_seen->data.size(), 2 * kInitialWindow);
  EXPECT_EQ(writer_seen->writable, 0) << "backlog still high";
  slow_a->Consumed(kInitialWindow);
  Flush();
  EXPECT_EQ(slow_seen->data.size(), total);
  EXPECT_EQ(slow_s->Backlog(), 0u);
  EXPECT_EQ(writer_seen->writable, 1);
}

TEST_F(TunnelTest, ResetReachesThePeerOnly) {
  auto [s, a] = OpenPair();
  auto seen_s = std::make_shared<Seen>();
  auto seen_a = std::make_shared<Seen>();
  s->SetHandlers(Record(seen_s, s));
  a->SetHandlers(Record(seen_a, a));
  a->Reset("task ended");
  Flush();
  EXPECT_EQ(seen_s->reset, "task ended");
  EXPECT_FALSE(seen_a->reset) << "the side that resets is not told";
  EXPECT_FALSE(s->Write("x"));
  EXPECT_EQ(server_->stream_count(), 0u);
  EXPECT_EQ(agent_->stream_count(), 0u);
}

TEST_F(TunnelTest, ClosingTheTunnelResetsEveryStreamAndFailsOpens) {
  auto [s1, a1] = OpenPair();
  auto [s2, a2] = OpenPair();
  auto seen1 = std::make_shared<Seen>();
  auto seen2 = std::make_shared<Seen>();
  s1->SetHandlers(Record(seen1, s1));
  s2->SetHandlers(Record(seen2, s2));
  std::optional<Error> pending;
  server_->Open("p", [&](Result<std::shared_ptr<Stream>> r) { pending = r.error(); });
  server_->Close("the agent's connection dropped");
  EXPECT_EQ(seen1->reset, "the agent's connection dropped");
  EXPECT_EQ(seen2->reset, "the agent's connection dropped");
  ASSERT_TRUE(pending);
  EXPECT_NE(pending->message.find("the agent's connection dropped"), std::string::npos);
  std::optional<Error> late;
  server_->Open("p", [&](Result<std::shared_ptr<Stream>> r) { late = r.error(); });
  ASSERT_TRUE(late);
  EXPECT_EQ(late->code, ErrorCode::kUnavailable);
}

TEST_F(TunnelTest, APeerSendingPastItsWindowIsReset) {
  auto [s, a] = OpenPair();
  auto seen = std::make_shared<Seen>();
  a->SetHandlers(Record(seen));
  // Data the credit does not cover, sent by hand.
  for (size_t sent = 0; sent <= kInitialWindow; sent += kMaxDataPayload) {
    ASSERT_TRUE(agent_->OnMessage(
        EncodeFrame(FrameType::kData, s->id(), std::string(kMaxDataPayload, 'x'))));
  }
  EXPECT_EQ(seen->reset, "the peer sent past its window");
  Flush();
  EXPECT_EQ(server_->stream_count(), 0u);
}

TEST_F(TunnelTest, ProtocolViolationsAreErrors) {
  EXPECT_FALSE(agent_->OnMessage("xx"));
  // The server's ids are odd: an OPEN of an odd id from the server's peer is a violation.
  EXPECT_FALSE(server_->OnMessage(EncodeFrame(FrameType::kOpen, 1, "p")));
  auto [s, a] = OpenPair();
  EXPECT_FALSE(agent_->OnMessage(EncodeFrame(FrameType::kOpen, s->id(), "p")));
  // Frames of streams that are gone are ignored (in flight when a reset crossed them).
  EXPECT_TRUE(server_->OnMessage(EncodeFrame(FrameType::kData, 999, "late")));
  // An end that does not take streams refuses OPENs.
  EXPECT_TRUE(server_->OnMessage(EncodeFrame(FrameType::kOpen, 2, "p")));
  ASSERT_FALSE(to_agent_.empty());
  Result<Frame> refused = DecodeFrame(to_agent_.back());
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->type, FrameType::kRefused);
}

}  // namespace
}  // namespace gpupool::api::tunnel
