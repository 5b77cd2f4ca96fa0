// `gpupool exec` and `gpupool shell`: a command inside a running task, through the server (GET
// /v1/tasks/{id}/exec, a WebSocket carrying proto/exec.h's frames), like kubectl exec and docker
// exec. With a terminal (-t, and `shell`) the local one is put in raw mode, so that keys such as
// Ctrl-C reach the task's terminal, and its window size follows the local one; the exit status is
// the command's.
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "proto/exec.h"
#include "proto/json_codec.h"

namespace gpupool::cli {
namespace {

using proto::ExecChannel;

// Keys as they are typed, no local echo, while it lives (stdin a terminal only).
class RawTerminal {
 public:
  RawTerminal() {
    if (isatty(STDIN_FILENO) == 0 || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

// The local terminal's window (stdout's, else stdin's); nullopt when neither is a terminal.
std::optional<proto::ExecResize> WindowSize() {
  winsize w{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) != 0 && ioctl(STDIN_FILENO, TIOCGWINSZ, &w) != 0) {
    return std::nullopt;
  }
  if (w.ws_col == 0 || w.ws_row == 0) return std::nullopt;
  return proto::ExecResize{w.ws_col, w.ws_row};
}

void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away: the rest is dropped, as a pipe's writer's is
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// What the session's reader saw, for the command's thread.
struct Outcome {
  std::mutex mu;
  std::condition_variable cv;
  proto::ExecFrameReader reader;
  std::optional<proto::ExecExit> exit;
  std::optional<std::string> closed;  // set once the WebSocket is over: why ("" cleanly)
};

int RunExec(const CommonFlags& common, const std::string& id_text,
            const std::vector<std::string>& command, bool interactive, bool tty) {
  Result<std::string> id = ParseTaskId(id_text);
  if (!id) return UsageError(id.error().message);
  if (command.empty()) return UsageError("give the command to run after --");
  return WithSession(common, [&](Session& s) {
    // Signals are taken by the thread below, not by the loop's.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGWINCH);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    api::IoLoop loop(1);
    Result<std::shared_ptr<api::Duplex>> ws =
        api::DialWebSocket(loop, s.Dial("/v1/tasks/" + *id + "/exec"));
    if (!ws) return ApiFailure(ws.error());
    const std::shared_ptr<api::Duplex> session = *ws;

    auto outcome = std::make_shared<Outcome>();
    api::DuplexHandlers h;
    h.on_data = [outcome](std::string bytes) {
      std::lock_guard lock(outcome->mu);
      outcome->reader.Feed(bytes);
      while (auto frame = outcome->reader.Next()) {
        if (!*frame) {
          outcome->closed = (*frame).error().message;
          break;
        }
        if ((*frame)->channel == ExecChannel::kStdout) WriteAll(STDOUT_FILENO, (*frame)->payload);
        if ((*frame)->channel == ExecChannel::kStderr) WriteAll(STDERR_FILENO, (*frame)->payload);
        if ((*frame)->channel == ExecChannel::kExit) {
          Result<proto::ExecExit> exit =
              proto::DecodeBody<proto::ExecExit>((*frame)->payload, true);
          if (exit) outcome->exit = *exit;
        }
      }
      outcome->cv.notify_all();
      return true;
    };
    h.on_closed = [outcome](std::string why) {
      std::lock_guard lock(outcome->mu);
      if (!outcome->closed) outcome->closed = std::move(why);
      outcome->cv.notify_all();
    };
    session->Start(std::move(h));

    std::optional<RawTerminal> raw;
    proto::ExecStart start;
    start.command = command;
    start.tty = tty;
    if (tty) {
      if (auto size = WindowSize()) {
        start.cols = size->cols;
        start.rows = size->rows;
      }
      if (const char* term = std::getenv("TERM"); term != nullptr) start.term = term;
      if (isatty(STDIN_FILENO) == 0 && interactive) {
        std::cerr << "gpupool: note: stdin is not a terminal; its bytes go to the task's as "
                     "they are\n";
      }
      raw.emplace();
    }
    session->Send(proto::EncodeExecFrame(ExecChannel::kStart, proto::Dump(proto::Encode(start))));
    if (interactive) {
      // Ends with stdin (or with the process): a read cannot be interrupted portably.
      std::thread([session] {
        std::string buffer(32 * 1024, '\0');
        while (true) {
          const ssize_t n = read(STDIN_FILENO, buffer.data(), buffer.size());
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) break;
          if (!session->Send(proto::EncodeExecFrame(ExecChannel::kStdin,
                                                    std::string_view(buffer.data(), size_t(n))))) {
            return;
          }
        }
        session->Send(proto::EncodeExecFrame(ExecChannel::kStdin, ""));
      }).detach();
    } else {
      session->Send(proto::EncodeExecFrame(ExecChannel::kStdin, ""));  // no input: at its end
    }
    std::atomic<bool> interrupted{false};
    std::thread watcher([&] {
      const timespec tick{0, 200 * 1000 * 1000};
      while (true) {
        {
          std::lock_guard lock(outcome->mu);
          if (outcome->closed) return;
        }
        const int sig = sigtimedwait(&signals, nullptr, &tick);
        if (sig == SIGWINCH && tty) {
          if (auto size = WindowSize()) {
            session->Send(
                proto::EncodeExecFrame(ExecChannel::kResize, proto::Dump(proto::Encode(*size))));
          }
        } else if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
          interrupted = true;
          session->Close("interrupted");
        }
      }
    });
    {
      std::unique_lock lock(outcome->mu);
      outcome->cv.wait(lock, [&] { return outcome->closed.has_value(); });
    }
    watcher.join();
    raw.reset();
    std::lock_guard lock(outcome->mu);
    if (outcome->exit) {
      const proto::ExecExit& e = *outcome->exit;
      if (e.signal == 0 && !e.reason.starts_with("exited with code")) {
        std::cerr << "gpupool: " << e.reason << "\n";  // it did not start
      }
      return static_cast<int>(e.exit_code);
    }
    if (interrupted) return 130;
    return Failure("the session with task " + *id + " ended before its command did" +
                   (outcome->closed->empty() ? std::string() : ": " + *outcome->closed));
  });
}

struct ExecState {
  CommonFlags common;
  std::string id;
  std::vector<std::string> command;
  bool interactive = false;
  bool tty = false;
};

}  // namespace

void AddExecCommands(CLI::App& app, int& exit_code) {
  auto exec = std::make_shared<ExecState>();
  CLI::App* cmd = app.add_subcommand(
      "exec",
      "Run a command inside a running task (its environment, user, cgroup and /root), like "
      "kubectl exec; the exit status is the command's");
  cmd->add_option("id", exec->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  cmd->add_option("command", exec->command, "The command and its arguments, after --")
      ->type_name("COMMAND ARGS...");
  cmd->add_flag("-i,--stdin", exec->interactive, "Pass this terminal's input to the command");
  cmd->add_flag("-t,--tty", exec->tty,
                "Give the command a terminal (raw keys, window size; stdout and stderr merged)");
  AddCommonFlags(cmd, &exec->common);
  OnRun(cmd, exit_code, [exec] {
    return RunExec(exec->common, exec->id, exec->command, exec->interactive, exec->tty);
  });

  auto shell = std::make_shared<ExecState>();
  cmd = app.add_subcommand(
      "shell", "An interactive shell inside a running task (bash where it has one, else sh)");
  cmd->add_option("id", shell->id, "Task id (t-42, or 42)")->required()->type_name("ID");
  AddCommonFlags(cmd, &shell->common);
  OnRun(cmd, exit_code, [shell] {
    return RunExec(shell->common, shell->id,
                   {"/bin/sh", "-c",
                    "if command -v bash >/dev/null 2>&1; then exec bash -i; else exec sh -i; fi"},
                   /*interactive=*/true, /*tty=*/true);
  });
}

}  // namespace gpupool::cli
