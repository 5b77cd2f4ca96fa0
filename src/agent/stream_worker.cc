// Implementation of stream_worker.h.
#include "agent/stream_worker.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <thread>
#include <utility>

namespace gpupool::agent {

StreamWorker::StreamWorker(std::shared_ptr<api::tunnel::Stream> stream)
    : stream_(std::move(stream)), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void StreamWorker::Begin() {
  api::tunnel::StreamHandlers h;
  std::weak_ptr<StreamWorker> weak = shared_from_this();
  h.on_data = [weak](std::string bytes) {
    if (auto s = weak.lock()) s->OnData(std::move(bytes));
  };
  h.on_end = [weak] {
    if (auto s = weak.lock()) s->OnEnd();
  };
  h.on_reset = [weak](std::string why) {
    if (auto s = weak.lock()) s->Break(std::move(why));
  };
  h.on_writable = [weak] {
    if (auto s = weak.lock()) s->Wake();
  };
  stream_->SetHandlers(std::move(h));
  std::thread([self = shared_from_this()] { self->Run(); }).detach();
}

void StreamWorker::Wake() {
  const uint64_t one = 1;
  ssize_t ignored = write(wake_.get(), &one, sizeof one);
  (void)ignored;
}

void StreamWorker::Drain() {
  uint64_t count = 0;
  ssize_t ignored = read(wake_.get(), &count, sizeof count);
  (void)ignored;
}

void StreamWorker::Break(std::string why) {
  {
    std::lock_guard lock(mu_);
    if (!broken_) broken_ = std::move(why);
  }
  cv_.notify_all();
  Wake();
}

}  // namespace gpupool::agent
