// What the agent's tunnel handlers that give each stream a thread of its own share (exec_session,
// ssh_session): the stream's handlers wired to the worker's (data, end; a reset breaks it), an
// eventfd that wakes the thread's poll when something arrives or the stream may take more, and
// the first reason the stream broke.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api/tunnel.h"
#include "core/unique_fd.h"

namespace gpupool::agent {

class StreamWorker : public std::enable_shared_from_this<StreamWorker> {
 public:
  virtual ~StreamWorker() = default;
  StreamWorker(const StreamWorker&) = delete;
  StreamWorker& operator=(const StreamWorker&) = delete;

  // Sets the stream's handlers and starts Run on a thread of its own, which holds the worker.
  void Begin();

 protected:
  explicit StreamWorker(std::shared_ptr<api::tunnel::Stream> stream);

  // The client's bytes, and the end of them (the stream's thread: must not block).
  virtual void OnData(std::string bytes) = 0;
  virtual void OnEnd() = 0;
  // The worker's thread.
  virtual void Run() = 0;

  // Makes `wake()` readable.
  void Wake();
  // Empties it (after poll said it is readable).
  void Drain();
  int wake() const { return wake_.get(); }
  // Keeps the first reason, wakes whoever waits on cv_ and the thread's poll.
  void Break(std::string why);

  const std::shared_ptr<api::tunnel::Stream> stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> broken_;  // under mu_

 private:
  const UniqueFd wake_;
};

}  // namespace gpupool::agent
