// Wire types of `gpupool exec` (docs/api.md "Exec"): a command run inside a running task, its
// input, output and exit status carried as frames over GET /v1/tasks/{id}/exec's WebSocket and,
// unchanged, over the node's tunnel to the agent, which reads and writes them. A frame is one
// channel byte, the payload's length as 4 bytes big-endian, and the payload; frames may be split
// across WebSocket messages or share one. The client sends `start` first, then `stdin` (an empty
// one: end of input) and `resize`; the agent answers `stdout`/`stderr` and ends with `exit`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "proto/describe.h"

namespace gpupool::proto {

enum class ExecChannel : uint8_t {
  kStdin = 0,   // client → task: bytes; an empty payload ends the input
  kStdout = 1,  // task → client: bytes (a tty's whole output)
  kStderr = 2,  // task → client: bytes (none with a tty)
  kExit = 3,    // task → client: ExecExit, last
  kResize = 4,  // client → task: ExecResize (a tty's window)
  kStart = 5,   // client → task: ExecStart, first and once
};

// The largest payload a frame may carry; a reader refuses a longer one.
inline constexpr uint32_t kMaxExecPayload = 256 * 1024;  // well under a tunnel stream's window
inline constexpr size_t kExecFrameHeader = 5;

// The command, first frame of a session.
struct ExecStart {
  std::vector<std::string> command;
  bool tty = false;
  int32_t cols = 0;
  int32_t rows = 0;
  std::string term;

  static constexpr std::string_view kName = "ExecStart";
  static constexpr std::string_view kDoc =
      "What to run in the task: its argv, run in the task's environment, user, cgroup and view "
      "(its workspace at /root), with a terminal or with pipes.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("command", s.command,
      {.required = true, .max_bytes = 64 * 1024, .max_items = 4096, .doc = "argv"});
    v("tty", s.tty, {.doc = "A terminal (stdout and stderr merged), as ssh -t or docker exec -t"});
    v("cols", s.cols, {.min = 0, .max = 10000, .doc = "tty: the window's columns"});
    v("rows", s.rows, {.min = 0, .max = 10000, .doc = "tty: the window's rows"});
    v("term", s.term, {.max_bytes = 64, .format = Format::kText, .doc = "tty: TERM"});
  }
};

// A tty's new window size.
struct ExecResize {
  int32_t cols = 0;
  int32_t rows = 0;

  static constexpr std::string_view kName = "ExecResize";
  static constexpr std::string_view kDoc = "The client's terminal window changed size.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("cols", s.cols, {.required = true, .min = 1, .max = 10000, .doc = "Columns"});
    v("rows", s.rows, {.required = true, .min = 1, .max = 10000, .doc = "Rows"});
  }
};

// How the command ended (or why it did not start), the last frame.
struct ExecExit {
  int32_t exit_code = 0;
  int32_t signal = 0;
  std::string reason;

  static constexpr std::string_view kName = "ExecExit";
  static constexpr std::string_view kDoc =
      "How the command ended: its exit code, or the signal that killed it (exit_code is then "
      "128 + signal, as a shell reports it); a command that could not start has exit_code 127 "
      "(not found), 126 (not executable) or 125 (it could not be started) and says why.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("exit_code", s.exit_code, {.required = true, .min = 0, .max = 255, .doc = "0..255"});
    v("signal", s.signal, {.min = 0, .max = 64, .doc = "The signal that killed it; 0: none"});
    v("reason", s.reason, {.max_bytes = 4096, .doc = "In words"});
  }
};

// The answer of GET /v1/tasks/{id}/exec: a WebSocket carrying the frames above.
struct ExecStream {};

struct ExecFrame {
  ExecChannel channel = ExecChannel::kStdin;
  std::string payload;
};

std::string EncodeExecFrame(ExecChannel channel, std::string_view payload);

// Frames from bytes that arrive in pieces.
class ExecFrameReader {
 public:
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next whole frame; nullopt until one has arrived; kInvalidArgument for an unknown
  // channel or a payload over kMaxExecPayload (the stream is then unusable).
  std::optional<Result<ExecFrame>> Next();

 private:
  std::string buffer_;
  size_t offset_ = 0;
};

}  // namespace gpupool::proto
