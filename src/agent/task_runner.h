// The owner of one task on this node (Nomad's alloc runner): a state machine on a thread of its
// own that fetches the task's inputs and the datasets it mounts, launches it, waits while it runs,
// saves its outputs and reports how it ended, retrying each call to the server with the agent's
// backoff. The agent's control loop only decides (launch, stop, the task's end and its report) and
// hears back through events, so a slow step of one task (an input fetch, an image pull, an output
// upload, a server that is down) never holds up the control loop or another task's launch or
// report.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/retry.h"
#include "agent/runtime/task_runtime.h"
#include "agent/snapshotter.h"
#include "agent/workspace_sync.h"
#include "core/dataset.h"
#include "core/result.h"
#include "core/snapshot.h"
#include "proto/snapshots.h"
#include "proto/tasks.h"

namespace gpupool::agent {

constexpr int kLaunchFailedCode = 126;  // shell conventions: cannot execute …
constexpr int kNotFoundCode = 127;      // … command not found

// The report of a task that runs since `started_ms`, for binding `bound_ms`.
proto::TaskReport RunningReport(int64_t started_ms, int64_t bound_ms);
// A task that could not be launched, or that the agent lost: failed at `now_ms`, for this binding.
proto::TaskReport FailedReport(int exit_code, std::string reason, int64_t now_ms, int64_t bound_ms);

// A snapshot to take of a running task (docs/snapshots.md).
struct SnapshotJob {
  int32_t run = 0;  // the task's run (the server refuses a snapshot of another)
  SnapshotTrigger trigger = SnapshotTrigger::kPeriodic;
  int64_t request = 0;                // a user's request it answers; 0: none
  std::string checkpoint_signal{};    // "" : SIGUSR1
  int64_t checkpoint_timeout_ms = 0;  // 0: kDefaultCheckpointTimeoutMs
  std::string image{};                // the task's image (docker); empty: a process task
  bool save_image = false;            // save its container as an image over `image` too
};

// The snapshot a launch restores the workspace from.
struct RestoreJob {
  proto::SnapshotRef snapshot;
  // The task's own input files are fetched too, and win over the snapshot's (a new task started
  // from a snapshot, whose inputs were uploaded for it); false: the snapshot alone (a resumed
  // task, whose files the snapshot holds).
  bool with_inputs = false;
};

// The slow steps, as the agent does them (a signed client to the server, the runtime). Called
// from runner threads, several at once: implementations are thread-safe.
class TaskSteps {
 public:
  using Cancelled = std::function<bool()>;
  virtual ~TaskSteps() = default;
  // The task's input files, staged for the runtime (workspace_sync.h FetchTaskInputs).
  virtual Result<FetchedInputs> FetchInputs(const std::string& task_id,
                                            const Cancelled& cancelled) = 0;
  // The snapshot restored below `into` (files already there stay), or, `into` empty, into a
  // fresh staging directory of the task (FetchedInputs::dir), and its saved image made present
  // when the run runs in it (ref.image); `state` gets what was written and that image.
  virtual Result<FetchedInputs> Restore(const std::string& task_id, const proto::SnapshotRef& ref,
                                        const std::string& into, CaptureState& state,
                                        const Cancelled& cancelled) = 0;
  // The dataset version `mount` names present on this node (dataset_cache.h): the directory of
  // its files, which the task's launch binds read-only at mount.path.
  virtual Result<std::string> MountDataset(const std::string& task_id, const DatasetMount& mount,
                                           const Cancelled& cancelled) = 0;
  virtual Result<RunningTask> Launch(const LaunchSpec& spec) = 0;
  // Checkpoints (when the task handles it), captures (saving the container as an image when the
  // job says so), uploads and records a snapshot of the running task; `state` is the last
  // capture's and becomes this one's.
  virtual Result<proto::Snapshot> Snapshot(const std::string& task_id, const SnapshotJob& job,
                                           CaptureState& state, const Cancelled& cancelled) = 0;
  // Tells the server why a snapshot it asked for was not taken.
  virtual Status FailSnapshot(const std::string& task_id, const SnapshotJob& job,
                              const std::string& error) = 0;
  // The workspace's new and changed files onto the server (SaveTaskOutputs).
  virtual Result<SavedOutputs> SaveOutputs(const std::string& task_id, const std::string& workspace,
                                           const Cancelled& cancelled) = 0;
  virtual Status Report(const std::string& task_id, const proto::TaskReport& report) = 0;
  virtual void Log(const std::string& line) = 0;
};

// Where a runner is. A launched runner goes kFetchingInputs → kLaunching → kRunning; an adopted
// one starts in kRunning; End moves it on to kSavingOutputs → kReporting → kDone. A launch that
// fails goes to kReporting (its failed report), then kDone.
enum class RunnerPhase {
  kIdle,  // created, nothing asked yet
  kFetchingInputs,
  kLaunching,
  kRunning,
  kSavingOutputs,
  kReporting,
  kDone,
};
const char* RunnerPhaseName(RunnerPhase phase);

// What a runner tells the control loop, in the order it happened.
struct RunnerEvent {
  enum class Kind {
    kLaunched,       // `running`: in the runtime now (its running report is on its way)
    kLaunchFailed,   // `message`: why; its failed report is on its way
    kAlreadyExists,  // the runtime has a record of the task already: adopt it, do not launch
    kSnapshotted,    // a snapshot (`trigger`) was taken or failed (`message`)
    kDone,           // nothing left to do: the final report (if any) was delivered or refused
  };
  Kind kind;
  RunningTask running;
  std::string message;
  SnapshotTrigger trigger = SnapshotTrigger::kManual;  // kSnapshotted: which snapshot
};

class TaskRunner {
 public:
  // `on_event` is called (from the runner's thread, no lock held) after each event was queued;
  // TakeEvents collects them. `backoff` is the retry schedule of the runner's calls.
  TaskRunner(std::string task_id, int64_t bound_ms, std::shared_ptr<TaskSteps> steps,
             std::function<void()> on_event, Backoff backoff = Backoff());
  // Cancels what is left and waits for the thread (see Cancel and Release).
  ~TaskRunner();
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  // From kIdle: fetch the inputs into spec.workspace_from, make `datasets` present and bind each
  // read-only at its path (spec.volumes), launch, report running. A fetch the server cannot
  // answer is retried; any other failure fails the launch with its message (exit code
  // kLaunchFailedCode, or kNotFoundCode for a command the runtime cannot find); a dataset's names
  // it ("cannot mount dataset imagenet@2: …").
  void Launch(LaunchSpec spec, std::optional<RestoreJob> restore = std::nullopt,
              std::vector<DatasetMount> datasets = {});
  // Takes a snapshot of the running task (in turn with the other steps); kSnapshotted follows.
  // A user's or a periodic one is retried while the server cannot be reached; one before a stop
  // (stop, preempt, drain) for at most its checkpoint timeout and a minute, as the server waits.
  void Snapshot(SnapshotJob job);
  // While it runs, a periodic snapshot every `every_ms` (0: none) of `job`'s run and checkpoint
  // settings. Calling it again with the same values changes nothing.
  void SetPeriodic(int64_t every_ms, SnapshotJob job);
  // From kIdle: the task runs already (adopted); kRunning.
  void Adopt();
  // A report that is not the last (an adopted task's running report), sent in turn.
  void Report(proto::TaskReport report);
  // The task ended (or will never run): save the files of `workspace` (none when empty), add
  // what could not be saved to `report`'s reason, send `report` (none: outputs only), then done.
  void End(std::optional<proto::TaskReport> report, std::string workspace);
  // Stops at the next step or wait: a fetch is abandoned, a launch not begun is not begun, a
  // retry is not repeated. Ends in kDone (the kDone event follows).
  void Cancel();
  // Waits up to `grace` for the thread; one still inside a step is detached (it holds only
  // shared state, the steps included) and ends on its own. After it, the runner is inert.
  void Release(std::chrono::milliseconds grace);

  const std::string& task_id() const { return task_id_; }
  int64_t bound_ms() const { return bound_ms_; }
  RunnerPhase phase() const;
  // Whether an ordered report was not yet delivered (or refused).
  bool reports_pending() const;
  std::vector<RunnerEvent> TakeEvents();

 private:
  struct Work {
    enum class Kind { kLaunch, kReport, kEnd, kSnapshot } kind;
    LaunchSpec spec;
    std::optional<proto::TaskReport> report;
    std::string workspace;
    std::optional<RestoreJob> restore;
    SnapshotJob snapshot;
    std::vector<DatasetMount> datasets{};
  };
  struct Core;

  static void Run(std::shared_ptr<Core> core);

  const std::string task_id_;
  const int64_t bound_ms_;
  std::shared_ptr<Core> core_;
  std::thread thread_;
};

}  // namespace gpupool::agent
