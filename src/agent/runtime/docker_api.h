// The pure parts of the Docker Engine API as the docker runtime uses it: the pinned API version,
// the container-create body built from a launch spec, the frames of a multiplexed log stream,
// Docker's timestamps, the query of an image pull, a container's state from inspect and how it
// ended, and Docker's error answers. No I/O here, so that all of it is unit-tested.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/runtime/task_runtime.h"
#include "agent/runtime/unix_http.h"
#include "core/result.h"

namespace gpupool::agent::docker {

// Docker 20.10 (Debian 12's docker.io) speaks 1.41; newer daemons still accept it.
inline constexpr std::string_view kApi = "/v1.41";
inline constexpr const char* kTaskLabel = "gpupool.task";    // the task's id
inline constexpr const char* kAgentLabel = "gpupool.agent";  // the runtime instance that owns it
// Where a container sees its task's files: the workspace is its home (kTaskHome, /root).
inline constexpr const char* kWorkspace = kTaskHome;
inline constexpr const char* kMetricsFile = "/gpupool/metrics.jsonl";
inline constexpr const char* kCheckpointDir = "/gpupool/checkpoint";  // beside it (TaskVariables)

// What the create body needs beyond the spec.
struct ContainerSetup {
  std::string host_workspace;  // bind-mounted at kWorkspace, the working directory
  std::string host_metrics;    // bind-mounted at kMetricsFile
  std::string host_checkpoint;  // bind-mounted at kCheckpointDir
  std::string network_mode;    // HostConfig.NetworkMode: "bridge", "host", "none", a network
  std::string instance;        // the owning runtime's id (kAgentLabel)
  // Whether the spec's GPUs are devices for Docker to give the container (real GPUs, through the
  // NVIDIA container runtime); false for simulated GPUs, which get the environment alone.
  bool gpu_devices = true;
  // Non-empty: the GPU-memory interposer on the host, bind-mounted read-only at
  // kTaskFilesDir/kCudashimName and preloaded (TaskVariables), for a task that holds a share.
  std::string host_cudashim;
};

// The body of POST /containers/create: Image; Cmd only when the spec has a command (otherwise
// the image's default); Env = TaskVariables with the container's paths, HOME=/root (unless the
// spec sets it), plus NVIDIA_VISIBLE_DEVICES (the GPU uuids, or "void" for a CPU task, so that an
// image asking for all GPUs gets none); WorkingDir /root; labels; HostConfig with the two bind
// mounts (three with the interposer), Memory (and MemorySwap: no swap beyond it), NanoCpus, PidsLimit (each only when
// limited), an init process (signals forwarded, zombies reaped, as a process task's session), the
// network mode, json-file logs, and DeviceRequests (driver nvidia, the uuids, capabilities
// [["gpu"]]) only with GPUs that are devices (setup.gpu_devices).
nlohmann::json CreateBody(const LaunchSpec& spec, const ContainerSetup& setup);

// "gpupool-<instance>-<task id>": unique per runtime instance, so that a second launch of the
// same task (after a crash between create and the state file) is refused by Docker itself.
std::string ContainerName(const std::string& instance, const std::string& task_id);

// The frames of a multiplexed stream (logs of a container without a TTY): an 8-byte header
// (stream: 0 stdin, 1 stdout, 2 stderr, 3 the daemon's own error; three zero bytes; the
// payload's size, 32 bits big-endian), then the payload. Bytes may come in any pieces.
class FrameDecoder {
 public:
  struct Frame {
    int stream = 0;
    std::string payload;
  };
  // Appends the frames `bytes` completes to *out. An error for bytes that are not a frame
  // header (a TTY container's raw stream, a corrupt one); the decoder is then unusable.
  Status Feed(std::string_view bytes, std::vector<Frame>* out);
  // Bytes of an incomplete frame held back (0 when the stream ended cleanly).
  size_t pending() const { return buffer_.size(); }

 private:
  std::string buffer_;
};

// RFC 3339 as Docker writes it ("2024-05-01T12:00:00.123456789Z", any fraction up to 9 digits,
// 'Z' or ±hh:mm) to nanoseconds since the epoch. Docker's zero time ("0001-01-01T00:00:00Z":
// never started, not finished) and anything else before 1970 give 0.
Result<int64_t> ParseTimeNs(std::string_view text);
// The `since` of GET /containers/{id}/logs that skips what was written at or before `ns`:
// "<seconds>.<9 digits>" one nanosecond later.
std::string SinceAfter(int64_t ns);

// A log entry as the logs endpoint sends it with timestamps=1: "<RFC 3339 time> <text>".
struct LogEntry {
  int64_t time_ns = 0;
  std::string_view text;
};
Result<LogEntry> SplitTimestamp(std::string_view payload);

// The query of POST /images/create for `image`: fromImage, and tag=latest when the reference
// names neither a tag nor a digest (without one Docker would pull every tag).
std::string PullQuery(const std::string& image);
// The error a progress stream (of a pull or a build) ends with ({"error": …} on a line), if any.
std::optional<std::string> ProgressError(std::string_view progress);

// What the runtime reads of GET /containers/{id}/json.
struct ContainerState {
  std::string status;  // created, running, paused, restarting, removing, exited, dead
  bool running = false;
  int pid = 0;
  int exit_code = 0;
  bool oom_killed = false;
  std::string error;  // the daemon's, e.g. why it could not start
  int64_t started_ns = 0;
  int64_t finished_ns = 0;
  int64_t memory_bytes = 0;  // HostConfig.Memory
  std::string ip_address;    // NetworkSettings: the container's address ("" on host/none)
};
Result<ContainerState> ParseInspect(const nlohmann::json& body);
// The same from the answer's text (not JSON: kInternal).
Result<ContainerState> ParseInspect(std::string_view body);
// Whether the container still holds the task: running, paused or restarting.
bool IsRunning(const ContainerState& state);

// How the container ended, with its exact start and end: stopped when Stop was called, oom-killed
// when the kernel killed it over its memory limit, exited with its code otherwise; a container
// created but never started is lost. `now_ms` stands in for an end Docker did not record.
ExitReport ExitFromState(const std::string& task_id, const ContainerState& state,
                         bool stop_requested, int64_t now_ms);

// A non-2xx answer as an Error naming `what` ("creating the container of task t-1"), Docker's
// message and the status: 400 invalid argument, 404 not found, 409 already exists, 5xx internal.
Error ResponseError(const std::string& what, const HttpResponse& response);

}  // namespace gpupool::agent::docker
