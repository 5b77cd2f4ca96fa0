// `gpupool submit`: flags → the POST /v1/tasks body, checked before any request (see submit.h).
#include "cli/submit.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

#include "cli/copy_paths.h"
#include "cli/format.h"
#include "core/dataset.h"
#include "core/gpu_catalog.h"
#include "core/gpu_names.h"
#include "core/snapshot.h"
#include "core/stop_condition.h"
#include "core/task.h"
#include "core/task_array.h"
#include "core/task_path.h"
#include "core/task_ports.h"
#include "core/volume.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

bool IsIdentifier(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

tl::unexpected<Error> Flag(std::string_view flag, const Error& e) {
  return InvalidArgument(std::string(flag) + ": " + e.message);
}

// "a and b", "a, b and c".
std::string AndList(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? " and " : ", ";
    out += items[i];
  }
  return out;
}

}  // namespace

Result<proto::TaskSubmit> BuildSubmitBody(const SubmitFlags& f) {
  proto::TaskSubmit body;
  TaskRequest request;  // for the final check with core's rules

  // The GPU form first: two at once is the most likely mistake.
  std::vector<std::string> forms;
  if (f.gpus) forms.push_back("--gpus");
  if (f.gpu_share) forms.push_back("--gpu-share");
  if (f.mig) forms.push_back("--mig");
  if (forms.size() > 1) {
    return InvalidArgument(AndList(forms) +
                           " are mutually exclusive: a task asks for whole GPUs (--gpus), a "
                           "share of one GPU (--gpu-share) or a MIG instance (--mig)");
  }

  if (f.name) {
    if (f.name->empty() || f.name->size() > 256) {
      return InvalidArgument("--name must be 1..256 bytes, got '" + *f.name + "'");
    }
    body.name = *f.name;
  }
  if (f.project) {
    if (!IsIdentifier(*f.project)) {
      return InvalidArgument("--project must be a project id (A-Z a-z 0-9 - _ .), got '" +
                             *f.project + "'");
    }
    body.project = *f.project;
  }
  if (f.gpus) {
    Result<int64_t> n = ParseInteger("--gpus", *f.gpus, 1, kMaxGpusPerTask);
    if (!n) {
      // "--gpus 0.5": a share of one GPU is its own flag, in milli-GPU.
      Result<int64_t> milli = ParseMilli(*f.gpus);
      if (milli && *milli > 0 && *milli < kMilliPerGpu) {
        return InvalidArgument(n.error().message + ": for a share of one GPU use --gpu-share " +
                               std::to_string(*milli));
      }
      return tl::unexpected(n.error());
    }
    body.gpu_count = static_cast<int32_t>(*n);
    request.gpu_count = body.gpu_count;
  }
  if (f.gpu_share) {
    Result<int64_t> milli =
        ParseInteger("--gpu-share (milli-GPU)", *f.gpu_share, 1, kMilliPerGpu - 1);
    if (!milli) return tl::unexpected(milli.error());
    body.gpu_milli = static_cast<int32_t>(*milli);
    request.gpu_milli = body.gpu_milli;
  }
  if (f.gpu_mem) {
    if (!f.gpu_share) {
      return InvalidArgument(
          "--gpu-mem needs --gpu-share: GPU memory is reserved with a share of one GPU");
    }
    Result<int64_t> mib = ParseMib(*f.gpu_mem);
    if (!mib) return Flag("--gpu-mem", mib.error());
    body.gpu_mem_mib = *mib;
    request.gpu_mem_mib = *mib;
  }
  if (f.gpu_model) {
    std::vector<std::string> models = SplitList(*f.gpu_model);
    if (std::any_of(models.begin(), models.end(), [](const std::string& m) { return m.empty(); })) {
      return InvalidArgument("--gpu-model has an empty model name in '" + *f.gpu_model + "'");
    }
    body.gpu_models = models;
    request.gpu_models = ExpandGpuModelNames(models);  // as the server reads them
  }
  if (f.mig) {
    if (f.mig->empty()) return InvalidArgument("--mig must name a MIG profile, like 3g.40gb");
    TaskRequest mig_only;
    mig_only.mig_profile = *f.mig;
    mig_only.gpu_models = request.gpu_models;
    if (!Validate(mig_only)) {
      return InvalidArgument(
          "--mig '" + *f.mig + "' is not a MIG profile of " +
          (f.gpu_model ? "--gpu-model " + *f.gpu_model : std::string("any known GPU model")));
    }
    body.mig_profile = *f.mig;
    request.mig_profile = *f.mig;
  }
  if (f.cpu) {
    Result<int64_t> milli = ParseInteger("--cpu (milli-CPU)", *f.cpu, 0, kMax);
    if (!milli) return tl::unexpected(milli.error());
    body.cpu_milli = *milli;
    request.cpu_milli = *milli;
  }
  if (f.mem) {
    Result<int64_t> mib = ParseMib(*f.mem);
    if (!mib) return Flag("--mem", mib.error());
    body.memory_mib = *mib;
    request.memory_mib = *mib;
  }
  if (f.disk) {
    Result<int64_t> gib = ParseGib(*f.disk);
    if (!gib) return Flag("--disk", gib.error());
    body.disk_gib = *gib;
  }
  if (f.image) {
    if (f.image->empty()) return InvalidArgument("--image must not be empty");
    body.image = *f.image;
  }
  if (f.max_runtime) {
    Result<int64_t> ms = ParseDurationMs(*f.max_runtime);
    if (!ms) return Flag("--max-runtime", ms.error());
    if (*ms <= 0) return InvalidArgument("--max-runtime must be longer than 0");
    body.max_runtime_ms = *ms;
  }
  for (const std::string& text : f.ports) {
    int32_t port = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535) {
      return InvalidArgument("--port '" + text + "' is not a TCP port (1..65535)");
    }
    body.ports.push_back(port);
  }
  if (Status valid = ValidateTaskPorts(body.ports); !valid) {
    return InvalidArgument("--port: " +
                           valid.error().message.substr(std::string("ports: ").size()));
  }
  for (const std::string& text : f.volumes) {
    Result<VolumeMount> m = ParseVolumeMount(text);
    if (!m) return InvalidArgument("--volume: " + m.error().message);
    body.volumes.push_back({m->name, m->path, m->read_only, "", false});
  }
  for (const std::string& text : f.datasets) {
    Result<DatasetMount> m = ParseDatasetMount(text);
    if (!m) return InvalidArgument("--dataset: " + m.error().message);
    body.datasets.push_back({m->name, m->version, m->path, "", "", ""});
  }
  if (f.stop_when && f.stop_when->empty()) {
    return InvalidArgument("--stop-when must be a condition, like 'val_acc > 0.95'");
  }
  if (f.stop_when_idle) {
    Result<int64_t> ms = ParseDurationMs(*f.stop_when_idle);
    if (!ms) return Flag("--stop-when-idle", ms.error());
    if (*ms < 1000) return InvalidArgument("--stop-when-idle must be at least 1s");
    Result<std::string> condition = StopWhenOrIdle(f.stop_when.value_or(""), *ms);
    if (!condition) return Flag("--stop-when", condition.error());
    body.stop_when = *condition;
  } else if (f.stop_when) {
    Result<StopCondition> condition = ParseStopCondition(*f.stop_when);
    if (!condition) return Flag("--stop-when", condition.error());
    body.stop_when = condition->ToString();
  }
  if (f.priority) {
    Result<int64_t> p = ParseInteger("--priority", *f.priority, kMinPriority, kMaxPriority);
    if (!p) return tl::unexpected(p.error());
    body.priority = static_cast<int32_t>(*p);
    request.priority = body.priority;
  }
  body.restartable = f.restartable;
  if (f.snapshot_every) {
    Result<int64_t> ms = ParseDurationMs(*f.snapshot_every);
    if (!ms) return Flag("--snapshot-every", ms.error());
    if (*ms < kMinSnapshotEveryMs) return InvalidArgument("--snapshot-every must be at least 10s");
    body.snapshot_every_ms = *ms;
  }
  if (f.checkpoint_signal) {
    std::string name = *f.checkpoint_signal;
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!name.starts_with("SIG")) name = "SIG" + name;
    const auto& known = proto::kCheckpointSignals;
    if (name == "SIG" || std::find(std::begin(known), std::end(known), name) == std::end(known)) {
      std::string names;
      for (std::string_view k : known) {
        if (!k.empty()) names += (names.empty() ? "" : ", ") + std::string(k);
      }
      return InvalidArgument("--checkpoint-signal '" + *f.checkpoint_signal + "' is not one of " +
                             names);
    }
    body.checkpoint_signal = name;
  }
  if (f.checkpoint_timeout) {
    Result<int64_t> ms = ParseDurationMs(*f.checkpoint_timeout);
    if (!ms) return Flag("--checkpoint-timeout", ms.error());
    if (*ms <= 0 || *ms > 3'600'000) {
      return InvalidArgument("--checkpoint-timeout must be longer than 0 and at most 1h");
    }
    body.checkpoint_timeout_ms = *ms;
  }
  if (f.from_snapshot) body.from_snapshot = *f.from_snapshot;
  body.hold = f.hold || !f.inputs.empty();
  body.command = f.command;
  if (f.jupyter) {
    if (!f.command.empty()) {
      return InvalidArgument("--jupyter runs Jupyter itself: give no command after --");
    }
    if (body.ports.empty()) body.ports.push_back(8888);
    body.command = JupyterCommand(body.ports.front(), f.image.has_value());
  }
  if (body.command.empty() && !f.image) {
    return InvalidArgument(
        "nothing to run: give a command after -- (gpupool submit --gpus 1 -- python train.py) "
        "or an --image");
  }
  // Core's own rules, as the server applies them; everything above should have caught it.
  if (Status valid = Validate(request); !valid) {
    return InvalidArgument("invalid task request: " + valid.error().message);
  }
  return body;
}

Result<proto::TaskArraySubmit> BuildArrayBody(const SubmitFlags& f) {
  Result<ArraySpec> spec = ParseArraySpec(f.array.value_or(""));
  if (!spec) return InvalidArgument("--array " + spec.error().message);
  if (!f.inputs.empty()) {
    return InvalidArgument(
        "--input cannot be used with --array: give the elements their files in the image or "
        "read them by GPUPOOL_ARRAY_INDEX from shared storage");
  }
  if (f.nodes) {
    return InvalidArgument(
        "--nodes cannot be used with --array: an array's elements are "
        "independent tasks, a job's members one distributed run");
  }
  Result<proto::TaskSubmit> task = BuildSubmitBody(f);
  if (!task) return tl::unexpected(task.error());
  proto::TaskArraySubmit body;
  static_cast<proto::TaskSubmit&>(body) = std::move(*task);
  body.array = ArraySpecText(*spec);
  return body;
}

Result<proto::JobSubmit> BuildJobBody(const SubmitFlags& f) {
  if (!f.nodes) {
    for (const auto& [flag, value] :
         {std::pair{"--members-per-node", &f.members_per_node},
          std::pair{"--topology-label", &f.topology_label}, std::pair{"--topology", &f.topology}}) {
      if (*value) return InvalidArgument(std::string(flag) + " needs --nodes (a distributed job)");
    }
    return InvalidArgument("--nodes is missing");
  }
  Result<int64_t> nodes = ParseInteger("--nodes", *f.nodes, 2, kMaxGangSize);
  if (!nodes) {
    if (*f.nodes == "1") {
      return InvalidArgument(
          "--nodes 1 is a task on one node: leave --nodes out (and use "
          "torchrun --standalone inside it)");
    }
    return tl::unexpected(nodes.error());
  }
  if (f.gpu_share) {
    return InvalidArgument(
        "--gpu-share cannot be used with --nodes: a distributed job's members "
        "use whole GPUs (--gpus) or a MIG instance (--mig)");
  }
  if (!f.inputs.empty()) {
    return InvalidArgument(
        "--input cannot be used with --nodes: give the members their files in "
        "the image or on shared storage");
  }
  Result<proto::TaskSubmit> task = BuildSubmitBody(f);
  if (!task) return tl::unexpected(task.error());
  proto::JobSubmit body;
  static_cast<proto::TaskSubmit&>(body) = std::move(*task);
  body.nodes = static_cast<int32_t>(*nodes);
  if (f.members_per_node) {
    Result<int64_t> per = ParseInteger("--members-per-node", *f.members_per_node, 1, kMaxGangSize);
    if (!per) return tl::unexpected(per.error());
    body.members_per_node = static_cast<int32_t>(*per);
  }
  if (f.topology_label) {
    if (f.topology_label->empty() || f.topology_label->size() > 256) {
      return InvalidArgument("--topology-label must be a node label's name of 1..256 bytes");
    }
    body.topology_label = *f.topology_label;
  }
  if (f.topology) {
    if (!ParseTopology(*f.topology)) {
      return InvalidArgument("--topology must be required or preferred, got '" + *f.topology + "'");
    }
    if (!f.topology_label) {
      return InvalidArgument("--topology needs --topology-label (the node label, e.g. rack)");
    }
    body.topology = *f.topology;
  }
  return body;
}

std::vector<std::string> JupyterCommand(int32_t port, bool in_container) {
  const std::string p = std::to_string(port);
  const std::string common = " --no-browser --port=" + p +
                             " --ip=" + (in_container ? "0.0.0.0" : "127.0.0.1") +
                             " --port-retries=0";
  // Lab's options are ServerApp's, Notebook's NotebookApp's; the shell expands the variables.
  const std::string lab = "exec jupyter-lab" + common +
                          " --ServerApp.base_url=\"$GPUPOOL_BASE_PATH_" + p +
                          "\" --ServerApp.token= --ServerApp.password= "
                          "--ServerApp.allow_remote_access=True "
                          "--ServerApp.root_dir=\"$GPUPOOL_WORKSPACE\"";
  const std::string notebook = "exec jupyter-notebook" + common +
                               " --NotebookApp.base_url=\"$GPUPOOL_BASE_PATH_" + p +
                               "\" --NotebookApp.token= --NotebookApp.password= "
                               "--NotebookApp.allow_remote_access=True "
                               "--NotebookApp.notebook_dir=\"$GPUPOOL_WORKSPACE\"";
  return {"/bin/sh", "-c",
          "if command -v jupyter-lab >/dev/null 2>&1; then " + lab + "; else " + notebook + "; fi"};
}

Result<std::vector<SubmitInput>> ParseSubmitInputs(const std::vector<std::string>& inputs) {
  std::vector<SubmitInput> out;
  for (const std::string& flag : inputs) {
    const std::string named = "--input '" + flag + "'";
    SubmitInput input{.flag = flag, .local = flag, .path = ""};
    if (const size_t colon = flag.rfind(':'); colon != std::string::npos) {
      input.local = flag.substr(0, colon);
      input.path = flag.substr(colon + 1);
    }
    if (input.local.empty()) {
      return InvalidArgument(named + ": LOCAL is empty (--input LOCAL[:PATH])");
    }
    Result<std::string> path = TaskPathFromUser(input.path, "path");  // "/root/data": data
    if (!path) return Flag(named, path.error());
    input.path = std::move(*path);
    if (input.path.empty()) {
      Result<std::string> name = LocalName(input.local);
      if (!name) return Flag(named, name.error());
      input.path = std::move(*name);
    }
    for (const SubmitInput& earlier : out) {
      if (earlier.path == input.path) {
        return InvalidArgument(named + " and --input '" + earlier.flag + "' would both become '" +
                               input.path + "' in the workspace; give one of them another PATH");
      }
    }
    out.push_back(std::move(input));
  }
  return out;
}

}  // namespace gpupool::cli
