// The agent's end of `gpupool exec` (see exec_session.h).
#include "agent/exec_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "agent/stream_worker.h"
#include "proto/exec.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

using proto::ExecChannel;

constexpr size_t kReadChunk = 32 * 1024;
// How long a stream may stay without its `start` frame.
constexpr auto kStartWait = std::chrono::seconds(30);
// After the command ended, how long its output may stay silent before the session ends (a
// process it left in the background may hold its output open for ever).
constexpr int kDrainQuietMs = 100;

void SetNonBlocking(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// The exit frame's code for a command that did not start.
int StartFailureCode(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNotFound:
      return 127;  // as a shell says "command not found"
    case ErrorCode::kPermissionDenied:
      return 126;  // found, not executable
    default:
      return 125;  // the exec machinery failed (as docker exec and env(1) say it)
  }
}

class Session : public StreamWorker {
 public:
  Session(std::shared_ptr<api::tunnel::Stream> stream, std::string task, ExecStarter start)
      : StreamWorker(std::move(stream)), task_(std::move(task)), start_(std::move(start)) {}

 private:
  void OnEnd() override { Break("the client closed the session"); }

  // The client's frames (the stream's thread; must not block).
  void OnData(std::string bytes) override {
    size_t consumed = 0;
    {
      std::lock_guard lock(mu_);
      reader_.Feed(bytes);
      while (true) {
        std::optional<Result<proto::ExecFrame>> frame = reader_.Next();
        if (!frame) break;
        if (!*frame) {
          if (!broken_) broken_ = (*frame).error().message;
          break;
        }
        proto::ExecFrame& f = **frame;
        consumed += proto::kExecFrameHeader;
        switch (f.channel) {
          case ExecChannel::kStart: {
            consumed += f.payload.size();
            Result<proto::ExecStart> start = proto::DecodeBody<proto::ExecStart>(f.payload, true);
            if (started_) {
              if (!broken_) broken_ = "a second start frame";
            } else if (!start) {
              start_error_ = "start frame: " + start.error().message;
            } else {
              request_ = std::move(*start);
            }
            started_ = true;
            break;
          }
          case ExecChannel::kStdin:
            // Its credit returns once it is written to the command (Run).
            if (f.payload.empty()) {
              stdin_eof_ = true;
            } else {
              stdin_.push_back(std::move(f.payload));
            }
            break;
          case ExecChannel::kResize: {
            consumed += f.payload.size();
            Result<proto::ExecResize> size = proto::DecodeBody<proto::ExecResize>(f.payload, true);
            if (size) resize_ = *size;  // a bad one is dropped: the session goes on
            break;
          }
          default:
            consumed += f.payload.size();
            if (!broken_) broken_ = "the client sent a frame of the task's channels";
        }
      }
    }
    cv_.notify_all();
    stream_->Consumed(consumed);
    Wake();
  }

  void SendExit(const proto::ExecExit& exit) {
    stream_->Write(proto::EncodeExecFrame(ExecChannel::kExit, proto::Dump(proto::Encode(exit))));
    stream_->End();
  }

  void Run() override {
    std::optional<proto::ExecStart> request;
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, kStartWait, [&] { return started_ || broken_; });
      if (broken_) return stream_->Reset(*broken_);
      if (!started_) {
        lock.unlock();
        return SendExit({125, 0, "no start frame within 30 s"});
      }
      if (!start_error_.empty()) {
        const std::string why = start_error_;
        lock.unlock();
        return SendExit({125, 0, why});
      }
      request = std::move(request_);
    }
    ExecSpec spec;
    spec.command = request->command;
    spec.tty = request->tty;
    spec.cols = static_cast<uint16_t>(request->cols);
    spec.rows = static_cast<uint16_t>(request->rows);
    spec.term = request->term;
    Result<ExecProcess> process = start_(task_, spec);
    if (!process) {
      return SendExit({StartFailureCode(process.error().code), 0, process.error().message});
    }
    Pump(*process, spec.tty);
  }

  // Carries the command's input and output until it ended and its output is sent (or the
  // session broke: then the command is killed).
  void Pump(ExecProcess& p, bool tty) {
    UniqueFd& out = p.output.ok() ? p.output : p.input;
    SetNonBlocking(p.input.get());
    SetNonBlocking(p.output.get());
    SetNonBlocking(p.error.get());
    bool out_open = true;
    bool err_open = p.error.ok();
    bool in_open = true;
    bool exited = false;
    proto::ExecExit result;
    std::string pending_in;  // the front stdin chunk, partly written
    std::string buffer(kReadChunk, '\0');

    // Reads what `fd` has into `channel`'s frames; false at its end (EOF, or EIO: a terminal
    // whose every other holder closed it).
    const auto forward = [&](int fd, ExecChannel channel) -> bool {
      const ssize_t n = read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        stream_->Write(proto::EncodeExecFrame(channel, std::string_view(buffer.data(), size_t(n))));
        return true;
      }
      return n < 0 && (errno == EAGAIN || errno == EINTR);
    };

    while (true) {
      std::optional<proto::ExecResize> resize;
      std::optional<std::string> broken;
      bool eof = false;
      {
        std::lock_guard lock(mu_);
        broken = broken_;
        resize = std::exchange(resize_, std::nullopt);
        if (pending_in.empty() && !stdin_.empty()) {
          pending_in = std::move(stdin_.front());
          stdin_.pop_front();
        }
        eof = stdin_eof_ && stdin_.empty();
      }
      if (broken) {
        p.kill();
        if (!exited) p.wait();
        return stream_->Reset(*broken);
      }
      if (resize && tty && p.resize) {
        p.resize(static_cast<uint16_t>(resize->cols), static_cast<uint16_t>(resize->rows));
      }
      if (in_open && pending_in.empty() && eof) {
        if (tty) {
          // A terminal has no end of input of its own: its EOF character, as a keyboard sends.
          termios t{};
          const char veof = tcgetattr(p.input.get(), &t) == 0 ? char(t.c_cc[VEOF]) : '\x04';
          ssize_t ignored = write(p.input.get(), &veof, 1);
          (void)ignored;
        } else {
          p.input = UniqueFd();
        }
        in_open = false;
      }
      const bool saturated = stream_->Saturated();
      pollfd fds[5];
      nfds_t n = 0;
      fds[n++] = {wake(), POLLIN, 0};
      const int out_at = out_open && !saturated ? static_cast<int>(n++) : -1;
      if (out_at >= 0) fds[out_at] = {out.get(), POLLIN, 0};
      const int err_at = err_open && !saturated ? static_cast<int>(n++) : -1;
      if (err_at >= 0) fds[err_at] = {p.error.get(), POLLIN, 0};
      const int in_at = in_open && !pending_in.empty() ? static_cast<int>(n++) : -1;
      if (in_at >= 0) fds[in_at] = {p.input.get(), POLLOUT, 0};
      const int exit_at = !exited ? static_cast<int>(n++) : -1;
      if (exit_at >= 0) fds[exit_at] = {p.done.get(), POLLIN, 0};
      const int ready = poll(fds, n, exited && !saturated ? kDrainQuietMs : -1);
      if (ready < 0 && errno != EINTR) {
        p.kill();
        if (!exited) p.wait();
        return stream_->Reset("poll: " + std::string(strerror(errno)));
      }
      if (ready == 0) break;  // it ended and its output has gone quiet
      if (fds[0].revents != 0) Drain();
      if (out_at >= 0 && fds[out_at].revents != 0) {
        out_open = forward(out.get(), ExecChannel::kStdout);
      }
      if (err_at >= 0 && fds[err_at].revents != 0) {
        err_open = forward(p.error.get(), ExecChannel::kStderr);
      }
      if (in_at >= 0 && (fds[in_at].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
        const ssize_t w = write(p.input.get(), pending_in.data(), pending_in.size());
        if (w > 0) {
          stream_->Consumed(static_cast<size_t>(w));
          pending_in.erase(0, static_cast<size_t>(w));
        } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
          // It closed its input: what the client still sends is dropped (credit returned).
          in_open = false;
          stream_->Consumed(pending_in.size());
          pending_in.clear();
        }
      }
      if (exit_at >= 0 && fds[exit_at].revents != 0) {
        exited = true;
        const ExecStatus status = p.wait();
        result = {status.exit_code, status.signal,
                  status.signal != 0 ? "killed by signal " + std::to_string(status.signal)
                                     : "exited with code " + std::to_string(status.exit_code)};
      }
      if (exited && !out_open && !err_open) break;
    }
    SendExit(result);
  }

  const std::string task_;
  const ExecStarter start_;

  // Under mu_ (StreamWorker's), with broken_:
  proto::ExecFrameReader reader_;
  bool started_ = false;
  std::optional<proto::ExecStart> request_;
  std::string start_error_;
  std::deque<std::string> stdin_;
  bool stdin_eof_ = false;
  std::optional<proto::ExecResize> resize_;
};

}  // namespace

TunnelHandler ExecHandler(TaskCheck runs_here, ExecStarter start) {
  return [runs_here = std::move(runs_here), start = std::move(start)](
             const proto::TunnelOpen& open, std::shared_ptr<api::tunnel::Stream> stream) {
    if (Status st = runs_here(open.task); !st) return stream->Refuse(st.error().message);
    stream->Accept();
    std::make_shared<Session>(std::move(stream), open.task, start)->Begin();
  };
}

}  // namespace gpupool::agent
