// Join (see duplex.h): two duplexes relaying to each other with a bound on what is in flight.
#include "api/duplex.h"

#include <atomic>
#include <utility>

namespace gpupool::api {
namespace {

constexpr int64_t kMaxInFlight = 1 << 20;

// Bytes one duplex handed the other to send that it has not written yet.
struct Flow {
  std::atomic<int64_t> in_flight{0};
};

DuplexHandlers Relay(const std::shared_ptr<Duplex>& to, const std::shared_ptr<Flow>& out,
                     const std::shared_ptr<Duplex>& from_other, const std::shared_ptr<Flow>& in) {
  DuplexHandlers h;
  h.on_data = [to, out](std::string data) {
    const auto n = static_cast<int64_t>(data.size());
    if (!to->Send(std::move(data))) return false;  // over: its on_closed closes this one
    return out->in_flight.fetch_add(n) + n < kMaxInFlight;
  };
  // What the other one handed this one is written: the other may read again.
  h.on_sent = [from_other, in](size_t bytes) {
    const auto n = static_cast<int64_t>(bytes);
    const int64_t before = in->in_flight.fetch_sub(n);
    if (before >= kMaxInFlight && before - n < kMaxInFlight) from_other->Resume();
  };
  h.on_end = [to] { to->End(); };
  h.on_closed = [to](std::string why) {
    if (!why.empty()) to->Close(std::move(why));
  };
  return h;
}

}  // namespace

void Join(std::shared_ptr<Duplex> a, std::shared_ptr<Duplex> b) {
  auto a_to_b = std::make_shared<Flow>();
  auto b_to_a = std::make_shared<Flow>();
  a->Start(Relay(b, a_to_b, b, b_to_a));
  b->Start(Relay(a, b_to_a, a, a_to_b));
}

}  // namespace gpupool::api
