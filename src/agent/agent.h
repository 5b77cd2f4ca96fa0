// The node agent's main loop: registers the node, heartbeats, long-polls the server for the
// tasks bound to it and reconciles them with its runtimes — a task with an image in docker, one
// without as a process — by starting and stopping task runners (task_runner.h: each owns one
// task's input fetch, launch, output upload and reports) — and ships telemetry (usage at 1 Hz,
// task output). Agent-initiated, so nodes behind NAT work.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/disk_watch.h"
#include "agent/gpu/gpu_probe.h"
#include "agent/live_files.h"
#include "agent/runtime/runtime_router.h"
#include "agent/telemetry.h"
#include "agent/tunnel_agent.h"
#include "core/dataset.h"
#include "core/node.h"
#include "core/records.h"
#include "core/result.h"
#include "proto/nodes.h"
#include "proto/tasks.h"

namespace gpupool::agent {

struct AgentOptions {
  std::string endpoint;  // "http://host:port" or "https://host:port" of the server
  // https: the PEM CA file the server's certificate is verified against (its text also goes to
  // tasks as GPUPOOL_CA_PEM, for the SDK inside them); empty: the system's store.
  std::string ca_file;
  std::string access_key;  // an admin's key; empty: the node's own credentials (identity.h)
  std::string secret_key;
  std::string join_token;  // without an admin's key: joins with it unless the data dir has joined
  std::string node_name;   // default: the host name
  std::string data_dir;    // default: ~/.local/share/gpupool-agent; runtime in data_dir/runtime
  std::string simulate_gpus;  // SimulatedProbe spec ("A100-80GB:4,T4:2"); empty: NVML or none
  int64_t cpu_milli = 0;      // 0: online cores × 1000
  int64_t memory_mib = 0;     // 0: MemTotal of /proc/meminfo
  int64_t disk_gib = 0;       // 0: what is free on the file system of the data dir
  // The chunk cache of snapshots (data_dir/chunks) is trimmed to this after every snapshot and
  // restore, the least recently used chunks first.
  int64_t chunk_cache_bytes = int64_t{20} << 30;
  // The dataset versions tasks mount (data_dir/datasets, dataset_cache.h) are kept within this,
  // the least recently used that no task mounts removed first.
  int64_t dataset_cache_bytes = int64_t{100} << 30;
  // How often the workspaces of tasks with a disk_gib are measured (disk_watch.h).
  std::chrono::milliseconds disk_check_interval{10'000};
  std::chrono::milliseconds heartbeat_interval{2000};
  int64_t wait_ms = 25000;                         // long-poll wait, 100..30000
  bool runtime_own_uid = true;                     // as root: each task under its own uid
  std::string nvml_library = "libnvidia-ml.so.1";  // for tests
  // The Docker Engine API's socket, for tasks with an image (runtime in data_dir/docker). An
  // unreachable daemon leaves the agent with the process runtime only (the banner says why).
  std::string docker_socket = "/var/run/docker.sock";
  std::string docker_network = "bridge";  // the containers' network mode
  // The GPU-memory interposer (src/cudashim) for tasks holding a share of real GPUs; empty: the
  // one beside the agent's binary (FindCudashim).
  std::string cudashim;
  // Where other nodes reach this one (an IP address or host name): distributed jobs' MASTER_ADDR
  // and member hosts. Empty: the local address of the route toward the server.
  std::string advertise_addr;
  // The shared storage (docs/volumes.md): a directory of a file system every such node mounts
  // (NFS, CephFS, Lustre), where shared volumes live (DIR/volumes/<id>). Empty: none, and tasks
  // with shared volumes are not placed here. Node-local volumes live in data_dir/volumes/<id>.
  std::string shared_storage;
};

// A volume a task mounts (proto::VolumeMount with its volume's size).
struct DesiredVolume {
  std::string id;
  std::string name;
  std::string path;  // where the task sees it: below its workspace /root
  bool read_only = false;
  bool shared = false;
  int64_t size_bytes = 0;  // 0: not known (not watched)
};

// ---- the pieces of the protocol, pure enough to unit-test ----

// A task the server wants on this node: the fields of the task JSON (ToJson(Task)) the agent
// uses.
struct DesiredTask {
  std::string id;
  TaskState state = TaskState::kScheduled;
  std::string image;
  std::vector<std::string> command;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  int64_t disk_gib = 0;  // > 0: stopped once its workspace holds more
  int64_t bound_ms = 0;  // identifies this binding: a re-queued task bound again differs
  bool has_placement = false;
  std::vector<int> gpus;  // GPU indexes on this node
  int32_t milli_per_gpu = 0;
  int64_t gpu_mem_mib = 0;
  std::string mig_profile;  // empty: not MIG
  int mig_start = -1;
  // Variables the server's view of the task gives it: a job array's element gets
  // GPUPOOL_ARRAY_ID and GPUPOOL_ARRAY_INDEX.
  std::map<std::string, std::string> env;
  std::vector<int32_t> ports;  // served through the gateway
  bool restartable = false;    // re-queued elsewhere when the server loses this node
  // A distributed job's member: env has its rendezvous (MASTER_ADDR, RANK, …; RendezvousEnv),
  // and its container shares the node's network so that the other members reach it.
  bool job_member = false;
  // The server's --gateway-domain as an origin (proto::Assignments); empty: ports by path.
  std::string gateway_origin;
  // Snapshots (docs/snapshots.md): its run, the snapshot its launch restores the workspace from
  // (proto::Assignments::restores), and its settings.
  int32_t run = 0;
  std::optional<proto::SnapshotRef> restore;
  int64_t snapshot_every_ms = 0;
  std::string checkpoint_signal;
  int64_t checkpoint_timeout_ms = 0;
  std::vector<DesiredVolume> volumes;
  // Datasets it mounts read-only, each with its version's manifest (proto::DatasetMountSpec).
  std::vector<DatasetMount> datasets;
};

// The server's assignments (GET /v1/agent/nodes/{name}/assignments) as the agent acts on them.
struct Assignments {
  std::string node;
  int64_t version = 0;
  std::vector<DesiredTask> tasks;
  // Snapshots the server asks for, by task id (proto::Assignments::snapshots).
  std::map<std::string, proto::SnapshotOrder> snapshots;
  // Deleted volumes whose files this node removes (proto::Assignments::remove_volumes).
  std::vector<std::string> remove_volumes;
};
// kInvalidArgument naming the task for an answer the agent cannot act on (no id, a state that
// is not a task state, a dataset without its id or manifest, or not below /root).
Result<Assignments> DesiredState(const proto::Assignments& answer);

// A distributed job member's variables, as torchrun and torch.distributed read them: each member
// is one torchrun node (NODE_RANK = RANK = its index, WORLD_SIZE = the members, LOCAL_RANK 0 and
// LOCAL_WORLD_SIZE 1: it sees only its own GPUs), the same for torchrun's PET_* defaults
// (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, PET_NPROC_PER_NODE: its GPUs),
// and gpupool's own (GPUPOOL_JOB_ID, GPUPOOL_MEMBER_INDEX, GPUPOOL_MEMBER_HOSTS).
std::map<std::string, std::string> RendezvousEnv(const proto::Rendezvous& r, int gpus);

// The registration of POST /v1/agent/nodes: MIG instances by profile name.
proto::NodeRegistration Registration(const std::string& name, int64_t cpu_milli, int64_t memory_mib,
                                     int64_t disk_gib, const std::vector<Gpu>& gpus);

// Simulated utilisation one task puts on one GPU or MIG instance.
struct GpuLoad {
  std::string uuid;
  int util_pct = 0;
  int64_t mem_mib = 0;
};

struct LaunchPlan {
  LaunchSpec spec;
  std::vector<GpuLoad> loads;
};

// What to launch for `task` given the node's GPUs (as the probe discovered them): the command,
// CPU and memory limits from the request, the GPU or MIG uuids of its placement, the share, and
// the loads for simulated GPUs (util: the share's milli / 10, or 100; memory: the reserved GPU
// memory, the MIG instance's, or the whole GPU's). A task with an image gets it in the spec (and
// may have no command: the image's default). kFailedPrecondition for a placement this node
// cannot honour.
// Each declared port gets GPUPOOL_BASE_PATH_<port> (where the app must serve: the gateway's
// /t/<task>/<port>/, or "/" at the port's own origin when the task's gateway_origin is set) and
// GPUPOOL_URL_<port> (`server_url` and that path, or that origin).
Result<LaunchPlan> PlanLaunch(const DesiredTask& task, GpuProbe& probe,
                              const std::vector<Gpu>& gpus, const std::string& server_url = "");

// Makes sure GPU `gpu_index` has a MIG instance of `profile` at slot `start`, re-partitioning it
// (MIG mode on, overlapping instances replaced) when it does not. Refused when an instance to
// replace is in `busy_uuids` (tasks run in it) or the probe cannot re-partition (NVML: done by
// the operator). Sets *changed when the layout changed.
Status EnsureMigInstance(GpuProbe& probe, int gpu_index, const std::string& profile, int start,
                         const std::set<std::string>& busy_uuids, bool* changed);

// The report (POST /v1/agent/tasks/{id}/status) of a task's end: succeeded for exit code 0,
// failed otherwise (exit_code, the runtime's reason; a task the runtime lost track of gets
// "lost by the agent: …"), stopped for a stop, time_ms the true end, bound_ms the binding.
proto::TaskReport EndReport(const ExitReport& report, int64_t bound_ms);

// CPU cores × 1000 online, and MemTotal of /proc/meminfo in MiB (0 when unreadable).
int64_t DetectCpuMilli();
int64_t DetectMemoryMib();
// What is free (for unprivileged users) on the file system holding `dir`, in GiB (0 when statvfs
// fails): the disk the node offers task workspaces.
int64_t DetectDiskGib(const std::string& dir);

// The GPU-memory interposer: `given` when set (kNotFound when it is no readable file), else the
// first of <dir of exe>/../lib/gpupool/ (an installed layout) and <dir of exe>/../cudashim/ (the
// build tree) that holds kCudashimName, `exe` being the agent binary's path; empty when neither
// does.
Result<std::string> FindCudashim(const std::string& given, const std::string& exe);

// The lease of the tasks' supervisors (process_runtime.h) for the server's node timeout: half of
// it, and less where heartbeats are rare, so that a task is killed at least a heartbeat interval
// before the server, whose last heartbeat from a dead agent is at most an interval old, can
// declare the node lost and start the task elsewhere. At least 1 ms.
std::chrono::milliseconds TaskLease(std::chrono::milliseconds node_timeout,
                                    std::chrono::milliseconds heartbeat_interval);

// ---- the agent ----

class Agent {
 public:
  // Opens the GPU probe and the runtime (data_dir/runtime), adopts the tasks a previous agent
  // left running, registers the node (a server that cannot be reached yet is retried in the
  // background; a refusal is an error) and starts the threads: heartbeat, long-poll, control
  // (reconciliation) and telemetry; each task then gets a runner of its own. `banner` (when given)
  // gets lines describing the node, each starting "gpupool agent: ", without a final newline.
  static Result<std::unique_ptr<Agent>> Start(AgentOptions options, std::string* banner);

  // Stops the agent's threads and its runners; the tasks keep running and a restarted agent
  // re-adopts them. A heartbeat, a runner's report or launch in flight get a short grace; the
  // long-poll and what is still in flight after it are not waited for: their threads are
  // detached and end with their requests (they only touch state they share ownership of).
  // Reports not yet delivered are not lost: the task's runtime record stays until its final
  // report is delivered, so the next agent on this data dir reports it again.
  ~Agent();
  void Stop();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  std::string node_name() const { return options_.node_name; }

 private:
  struct Shared;
  struct Owned;
  class Steps;

  Agent(AgentOptions options, std::unique_ptr<GpuProbe> probe, std::vector<Gpu> gpus,
        std::shared_ptr<Shared> shared);

  void ControlLoop();
  // A new runner for the task, owned by owned_.
  Owned& Own(const std::string& task_id, int64_t bound_ms);
  void TakeAdopted(const AdoptResult& adopted);
  // What the runners did since the last call: launched tasks go on the probe and into the
  // telemetry, done runners leave owned_ (and their tasks' records go, see RetireTask).
  void TakeRunnerEvents();
  void OnLaunched(const std::string& task_id, Owned& owned, const RunningTask& running);
  void StopTask(const std::string& task_id, const Owned& owned, const std::string& why);
  void HandleExit(const ExitReport& report);
  void Reconcile();
  // Plans the launch here (MIG layout, GPUs; a failure is reported by a runner) and hands it to
  // a new runner.
  void LaunchTask(const DesiredTask& task);
  // A task that will not run here (its launch failed, or the agent lost it): a runner reports it
  // failed for its binding.
  void ReportFailed(const DesiredTask& task, int exit_code, const std::string& reason);
  void RemoveTask(const std::string& task_id);
  // Watches the disk of the running tasks with a disk_gib and of the volumes they write, and
  // stops those past a limit.
  void EnforceDisk();
  // Where volume `id` lives on this node: data_dir/volumes/<id>, or a shared one's
  // shared_storage/volumes/<id> ("" when the node has no shared storage).
  std::string VolumeDir(const std::string& id, bool shared) const;
  // Removes the files of the deleted volumes the server lists, on a thread of its own (one at a
  // time, at most every 10 s), and tells the server of each once its files are gone.
  void RemoveVolumes();
  // Removes the task's runtime record once its output is all on the server (at once if it is).
  void RetireTask(const std::string& task_id);
  // Samples usage at 1 Hz, takes the server's answer to the last telemetry batch and hands the
  // telemetry thread the next one.
  void TelemetryStep();
  std::set<std::string> BusyUuids() const;
  std::string BindingPath(const std::string& task_id) const;
  void Log(const std::string& line) const;

  const AgentOptions options_;
  std::string ca_pem_;  // the text of options_.ca_file, for the tasks (set by Start)
  // The interface that holds the node's address (NCCL_SOCKET_IFNAME of job members); "": unknown.
  std::string interface_;
  std::unique_ptr<GpuProbe> probe_;
  std::vector<Gpu> gpus_;
  std::shared_ptr<RuntimeRouter> runtime_;  // shared with the runners' steps
  const std::shared_ptr<Shared> shared_;
  std::shared_ptr<Steps> steps_;
  std::unique_ptr<TelemetryCollector> telemetry_;  // control thread only
  std::unique_ptr<DiskWatch> disk_watch_;
  std::set<std::string> disk_watched_;  // control thread only
  // "<task>/<volume>" → the size it is watched against (control thread only).
  std::map<std::string, int64_t> volume_watched_;
  // The thread removing deleted volumes' files (RemoveVolumes), whether it still runs, and when
  // it last started.
  std::thread remover_;
  std::shared_ptr<std::atomic<bool>> removing_ = std::make_shared<std::atomic<bool>>(false);
  std::chrono::steady_clock::time_point removed_at_{};
  // The node's tunnel (tunnel_agent.h): its I/O threads, the streams' handlers, the dialer.
  std::unique_ptr<api::IoLoop> tunnel_io_;
  std::shared_ptr<TunnelDispatcher> tunnels_;
  std::shared_ptr<LiveFiles> live_files_;  // running tasks' files (the tunnel's `files` streams)
  // The volumes of the tasks running here, by task, as live_files_ serves them: set at every
  // reconciliation (adopted tasks too), gone when a task ends.
  struct LiveMounts {
    std::mutex mu;
    std::map<std::string, std::vector<LiveMount>> of;
  };
  std::shared_ptr<LiveMounts> live_mounts_ = std::make_shared<LiveMounts>();
  std::unique_ptr<TunnelClient> tunnel_;

  // Owned by the control thread (and Start, before it runs).
  Assignments desired_;
  bool have_desired_ = false;
  bool in_sync_ = false;                                 // logged the first reconciliation
  std::map<std::string, std::unique_ptr<Owned>> owned_;  // every task with a runner
  std::map<std::string, int64_t> finished_;  // ended or failed, still in desired_: its bound_ms
  std::vector<ExitReport> adopted_exits_;    // ended while the agent was away: for the first D
  std::set<std::string> retiring_;  // done with, removed once their output is on the server
  int64_t last_sample_mono_ms_ = 0;

  std::thread control_;
  std::vector<std::thread> network_;  // heartbeat, long-poll, telemetry
  bool stopped_ = false;
};

}  // namespace gpupool::agent
