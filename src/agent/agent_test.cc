// Unit tests of the agent's protocol pieces: parsing assignments, the registration body, launch
// plans (GPU uuids, shares, MIG, loads), MIG instance creation, exit reports and Start's checks.
// The threads and reconciliation run against a real server in tests/agent_e2e_test.cc.
#include "agent/agent.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "agent/gpu/simulated_probe.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

using nlohmann::json;

// A task as the server renders it (api ToJson(Task)), bound to GPU 1 with a share.
// The server's answer as the agent reads it: decoded as its typed client does, then acted on.
Result<Assignments> ParseAssignments(const json& body) {
  if (!body.is_object()) return InvalidArgument("assignments: not a JSON object");
  auto answer = proto::Decode<proto::Assignments>(body, proto::UnknownFields::kIgnore);
  if (!answer) return tl::unexpected(answer.error());
  return DesiredState(*answer);
}

json SharedTaskJson() {
  return json::parse(R"({
    "id":"t-4","seq":4,"project":"p-1","user":"u-alice","name":"ft","state":"scheduled",
    "reason":"bound to n1","cpu_milli":2000,"memory_mib":512,"gpu_count":0,"gpu_milli":500,
    "gpu_mem_mib":1024,"mig_profile":"","gpu_models":[],"priority":0,
    "image":"","command":["python","ft.py"],"disk_gib":0,"max_runtime_ms":0,
    "stop_when":"","restartable":false,
    "placement":{"node":"n1","gpus":[1],"milli_per_gpu":500,"gpu_mem_mib":1024,
                 "mig_profile":null,"mig_start":null},
    "created_ms":1700000000000,"updated_ms":1700000000000,"bound_ms":1700000000100,
    "started_ms":0,"finished_ms":0,"billed_until_ms":0,"exit_code":0,"preemptions":0})");
}

std::unique_ptr<SimulatedProbe> Probe(const std::string& spec) {
  auto p = SimulatedProbe::Parse(spec, "n1");
  EXPECT_TRUE(p) << p.error().message;
  return std::move(*p);
}

TEST(FindCudashim, TheGivenLibraryElseTheOneBesideTheBinary) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "gpupool-shim-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path base = tmpl;
  fs::create_directories(base / "bin");
  const std::string exe = (base / "bin" / "gpupool").string();
  // Nothing beside the binary: none, and no error (the agent says shares are refused).
  auto none = FindCudashim("", exe);
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, "");
  // The build tree's place, then the installed layout's, which comes first.
  fs::create_directories(base / "cudashim");
  std::ofstream(base / "cudashim" / kCudashimName) << "x";
  EXPECT_EQ(FindCudashim("", exe).value_or("?"), (base / "cudashim" / kCudashimName).string());
  fs::create_directories(base / "lib" / "gpupool");
  std::ofstream(base / "lib" / "gpupool" / kCudashimName) << "x";
  EXPECT_EQ(FindCudashim("", exe).value_or("?"),
            (base / "lib" / "gpupool" / kCudashimName).string());
  // A library given must be there.
  const std::string given = (base / "cudashim" / kCudashimName).string();
  EXPECT_EQ(FindCudashim(given, exe).value_or("?"), given);
  const auto missing = FindCudashim((base / "nope.so").string(), exe);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("--cudashim"), std::string::npos);
  fs::remove_all(base);
}

TEST(TaskLease, EndsTheTaskAHeartbeatIntervalBeforeTheServerGivesUpOnTheNode) {
  using std::chrono::milliseconds;
  EXPECT_EQ(TaskLease(milliseconds(10'000), milliseconds(2'000)), milliseconds(5'000));
  EXPECT_EQ(TaskLease(milliseconds(3'000), milliseconds(500)), milliseconds(1'500));
  EXPECT_EQ(TaskLease(milliseconds(10'000), milliseconds(4'000)), milliseconds(2'000));
  EXPECT_EQ(TaskLease(milliseconds(3'000), milliseconds(2'000)), milliseconds(1));
}

TEST(ParseAssignments, ReadsTheTaskFieldsTheAgentUses) {
  json body = {{"node", "n1"}, {"version", 17}, {"tasks", {SharedTaskJson()}}};
  auto a = ParseAssignments(body);
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->node, "n1");
  EXPECT_EQ(a->version, 17);
  ASSERT_EQ(a->tasks.size(), 1u);
  const DesiredTask& t = a->tasks[0];
  EXPECT_EQ(t.id, "t-4");
  EXPECT_EQ(t.state, TaskState::kScheduled);
  EXPECT_EQ(t.command, (std::vector<std::string>{"python", "ft.py"}));
  EXPECT_EQ(t.cpu_milli, 2000);
  EXPECT_EQ(t.memory_mib, 512);
  EXPECT_EQ(t.bound_ms, 1700000000100);
  EXPECT_TRUE(t.has_placement);
  EXPECT_EQ(t.gpus, std::vector<int>{1});
  EXPECT_EQ(t.milli_per_gpu, 500);
  EXPECT_EQ(t.gpu_mem_mib, 1024);
  EXPECT_EQ(t.mig_profile, "");
  EXPECT_EQ(t.mig_start, -1);
}

TEST(ParseAssignments, ReadsAMigPlacementAndAnEmptyList) {
  json task = SharedTaskJson();
  task["placement"] = {{"node", "n1"},
                       {"gpus", {0}},
                       {"milli_per_gpu", 0},
                       {"gpu_mem_mib", 0},
                       {"mig_profile", "3g.40gb"},
                       {"mig_start", 4}};
  auto a = ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->tasks[0].mig_profile, "3g.40gb");
  EXPECT_EQ(a->tasks[0].mig_start, 4);
  auto empty = ParseAssignments({{"node", "n1"}, {"version", 0}, {"tasks", json::array()}});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->tasks.empty());
}

TEST(ParseAssignments, ReadsATasksVolumesWithTheirSizesAndTheVolumesToRemove) {
  json task = SharedTaskJson();
  task["volumes"] = {{{"volume", "data"}, {"path", "/root/data"}, {"volume_id", "v-1"}},
                     {{"volume", "common"},
                      {"path", "/root/c"},
                      {"read_only", true},
                      {"volume_id", "v-2"},
                      {"shared", true}}};
  json body = {{"node", "n1"},
               {"version", 3},
               {"tasks", {task}},
               {"volumes", {{"v-1", {{"id", "v-1"}, {"size_bytes", 1 << 30}}}}},
               {"remove_volumes", {"v-7"}}};
  auto a = ParseAssignments(body);
  ASSERT_TRUE(a) << a.error().message;
  const std::vector<DesiredVolume>& v = a->tasks[0].volumes;
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].id, "v-1");
  EXPECT_EQ(v[0].name, "data");
  EXPECT_EQ(v[0].path, "/root/data");
  EXPECT_FALSE(v[0].read_only);
  EXPECT_EQ(v[0].size_bytes, 1 << 30);
  EXPECT_TRUE(v[1].read_only && v[1].shared);
  EXPECT_EQ(v[1].size_bytes, 0);  // not listed: not watched
  EXPECT_EQ(a->remove_volumes, std::vector<std::string>{"v-7"});
  // A mount without its volume's id, or a removal of something that is no volume id: refused.
  task["volumes"][0].erase("volume_id");
  EXPECT_FALSE(ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}}));
  EXPECT_FALSE(ParseAssignments(
      {{"node", "n1"}, {"version", 3}, {"tasks", json::array()}, {"remove_volumes", {"../etc"}}}));
}

TEST(ParseAssignments, ReadsATasksDatasetsWithTheirVersionsManifests) {
  json task = SharedTaskJson();
  const std::string manifest(64, 'a');
  task["datasets"] = {{{"dataset", "imagenet"},
                       {"version", 2},
                       {"path", "/root/data"},
                       {"dataset_id", "d-4"},
                       {"project", "p-1"},
                       {"manifest", manifest}}};
  auto a = ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->tasks[0].datasets, (std::vector<DatasetMount>{{.dataset_id = "d-4",
                                                              .name = "imagenet",
                                                              .version = 2,
                                                              .path = "/root/data",
                                                              .project_id = "p-1",
                                                              .manifest = manifest}}));
  // Without the version's manifest (or one that is no SHA-256: it names a directory) the node
  // cannot mount it: refused.
  task["datasets"][0]["path"] = "/root";  // not below it: refused
  EXPECT_FALSE(ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}}));
  task["datasets"][0]["path"] = "/root/data";
  task["datasets"][0]["manifest"] = "../../etc";
  EXPECT_FALSE(ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}}));
  task["datasets"][0].erase("manifest");
  EXPECT_FALSE(ParseAssignments({{"node", "n1"}, {"version", 3}, {"tasks", {task}}}));
}

TEST(ParseAssignments, RefusesMalformedAnswersWithoutThrowing) {
  const std::vector<json> bad = {
      json::array(),
      {{"node", "n1"}, {"version", "1"}, {"tasks", json::array()}},
      {{"node", "n1"}, {"version", 1}, {"tasks", {{"id", "t-1"}}}},
      {{"node", "n1"}, {"version", 1}, {"tasks", {{{"id", "t-1"}, {"state", "napping"}}}}},
      {{"node", "n1"}, {"version", 1}, {"tasks", {{{"state", "running"}}}}},
      {{"node", "n1"},
       {"version", 1},
       {"tasks", {{{"id", "t-1"}, {"state", "running"}, {"command", "ls"}}}}},
      {{"node", "n1"},
       {"version", 1},
       {"tasks", {{{"id", "t-1"}, {"state", "running"}, {"placement", {{"gpus", {"a"}}}}}}}},
  };
  for (const json& b : bad) {
    auto a = ParseAssignments(b);
    EXPECT_FALSE(a) << b.dump();
    if (!a) {
      EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(ParseAssignments, AnAnswerWithoutTasksHoldsNone) {
  // Answers are read leniently (absent fields keep their defaults, as unknown ones are
  // ignored), so an older or newer server's answer still parses.
  auto a = ParseAssignments({{"node", "n1"}, {"version", 1}});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->tasks.empty());
}

TEST(Registration, ListsGpusWithMigInstancesByProfileName) {
  auto probe = Probe("A100-80GB:1:mig=3g.40gb,T4:1");
  auto gpus = probe->Discover();
  ASSERT_TRUE(gpus);
  const json body = proto::Encode(Registration("n1", 16000, 65536, 900, *gpus));
  EXPECT_EQ(body["name"], "n1");
  EXPECT_EQ(body["cpu_milli"], 16000);
  EXPECT_EQ(body["memory_mib"], 65536);
  EXPECT_EQ(body["disk_gib"], 900);
  ASSERT_EQ(body["gpus"].size(), 2u);
  EXPECT_EQ(body["gpus"][0]["model"], "A100-80GB");
  EXPECT_EQ(body["gpus"][0]["uuid"], "GPU-sim-n1-0");
  EXPECT_EQ(body["gpus"][0]["mig_enabled"], true);
  EXPECT_EQ(body["gpus"][0]["mig_instances"], json::parse(R"([{"profile":"3g.40gb","start":0}])"));
  EXPECT_EQ(body["gpus"][1]["model"], "T4");
  EXPECT_EQ(body["gpus"][1]["mig_enabled"], false);
  EXPECT_TRUE(body["gpus"][1]["mig_instances"].empty());
  EXPECT_TRUE(body["labels"].is_object());
}

TEST(PlanLaunch, WholeGpusGetTheirUuidsAndFullLoad) {
  auto probe = Probe("A100-80GB:2");
  auto gpus = probe->Discover();
  DesiredTask t;
  t.id = "t-1";
  t.command = {"/bin/true"};
  t.cpu_milli = 1000;
  t.memory_mib = 256;
  t.has_placement = true;
  t.gpus = {0, 1};
  t.milli_per_gpu = 1000;
  auto plan = PlanLaunch(t, *probe, *gpus);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->spec.task_id, "t-1");
  EXPECT_EQ(plan->spec.command, t.command);
  EXPECT_EQ(plan->spec.cpu_milli, 1000);
  EXPECT_EQ(plan->spec.memory_mib, 256);
  EXPECT_EQ(plan->spec.gpu_uuids, (std::vector<std::string>{"GPU-sim-n1-0", "GPU-sim-n1-1"}));
  EXPECT_EQ(plan->spec.gpu_milli_per_gpu, 0);
  ASSERT_EQ(plan->loads.size(), 2u);
  EXPECT_EQ(plan->loads[1].uuid, "GPU-sim-n1-1");
  EXPECT_EQ(plan->loads[1].util_pct, 100);
  EXPECT_EQ(plan->loads[1].mem_mib, (*gpus)[1].mem_mib);
}

TEST(PlanLaunch, AShareGetsMpsLimitsAndAPartialLoad) {
  auto probe = Probe("A100-80GB:2");
  auto gpus = probe->Discover();
  auto a = ParseAssignments({{"node", "n1"}, {"version", 1}, {"tasks", {SharedTaskJson()}}});
  ASSERT_TRUE(a);
  auto plan = PlanLaunch(a->tasks[0], *probe, *gpus);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->spec.gpu_uuids, std::vector<std::string>{"GPU-sim-n1-1"});
  EXPECT_EQ(plan->spec.gpu_milli_per_gpu, 500);
  EXPECT_EQ(plan->spec.gpu_mem_mib, 1024);
  ASSERT_EQ(plan->loads.size(), 1u);
  EXPECT_EQ(plan->loads[0].util_pct, 50);
  EXPECT_EQ(plan->loads[0].mem_mib, 1024);
  const auto env = TaskEnvironment(plan->spec, "/ws", "/ws/metrics");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "GPU-sim-n1-1");
  EXPECT_EQ(env.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "50");
  EXPECT_EQ(env.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=1024M");
}

TEST(PlanLaunch, AnArrayElementKnowsItsArrayAndIndex) {
  auto probe = Probe("A100-80GB:2");
  auto gpus = probe->Discover();
  json task = SharedTaskJson();
  task["array_id"] = "a-4";
  task["array_index"] = 17;
  task["array_limit"] = 2;
  auto a = ParseAssignments({{"node", "n1"}, {"version", 1}, {"tasks", {task}}});
  ASSERT_TRUE(a) << a.error().message;
  auto plan = PlanLaunch(a->tasks[0], *probe, *gpus);
  ASSERT_TRUE(plan) << plan.error().message;
  const auto env = TaskEnvironment(plan->spec, "/w", "/w/metrics.jsonl");
  EXPECT_EQ(env.at("GPUPOOL_ARRAY_ID"), "a-4");
  EXPECT_EQ(env.at("GPUPOOL_ARRAY_INDEX"), "17");

  auto plain = ParseAssignments({{"node", "n1"}, {"version", 1}, {"tasks", {SharedTaskJson()}}});
  ASSERT_TRUE(plain);
  auto plain_plan = PlanLaunch(plain->tasks[0], *probe, *gpus);
  ASSERT_TRUE(plain_plan);
  EXPECT_EQ(TaskEnvironment(plain_plan->spec, "/w", "/w/m").count("GPUPOOL_ARRAY_INDEX"), 0u)
      << "a task outside an array has no index";
}

TEST(PlanLaunch, ACpuTaskSeesNoGpu) {
  auto probe = Probe("T4:1");
  auto gpus = probe->Discover();
  DesiredTask t;
  t.id = "t-2";
  t.command = {"true"};
  t.has_placement = true;
  auto plan = PlanLaunch(t, *probe, *gpus);
  ASSERT_TRUE(plan);
  EXPECT_TRUE(plan->spec.gpu_uuids.empty());
  EXPECT_TRUE(plan->loads.empty());
}

TEST(PlanLaunch, AnImageTaskCarriesItsImageAndMayRunItsDefaultCommand) {
  auto probe = Probe("T4:2");
  auto gpus = probe->Discover();
  DesiredTask t;
  t.id = "t-img";
  t.image = "pytorch/pytorch:2.3";
  t.memory_mib = 2048;
  t.has_placement = true;
  t.gpus = {1};
  auto plan = PlanLaunch(t, *probe, *gpus);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->spec.image, "pytorch/pytorch:2.3");
  EXPECT_TRUE(plan->spec.command.empty());  // the image's default
  EXPECT_EQ(plan->spec.memory_mib, 2048);
  EXPECT_EQ(plan->spec.gpu_uuids, std::vector<std::string>{(*gpus)[1].uuid});

  t.command = {"python", "train.py"};
  plan = PlanLaunch(t, *probe, *gpus);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->spec.command, t.command);
}

TEST(PlanLaunch, RefusesWhatThisNodeCannotRun) {
  auto probe = Probe("A100-80GB:1:mig");
  auto gpus = probe->Discover();
  DesiredTask nothing;
  nothing.id = "t-3";
  auto plan = PlanLaunch(nothing, *probe, *gpus);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(plan.error().message, "task t-3 has no command");

  DesiredTask far;
  far.id = "t-4";
  far.command = {"true"};
  far.gpus = {3};
  plan = PlanLaunch(far, *probe, *gpus);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("GPU 3"), std::string::npos) << plan.error().message;

  DesiredTask whole_on_mig = far;
  whole_on_mig.gpus = {0};
  plan = PlanLaunch(whole_on_mig, *probe, *gpus);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("MIG mode"), std::string::npos) << plan.error().message;

  DesiredTask missing_instance = whole_on_mig;
  missing_instance.mig_profile = "3g.40gb";
  missing_instance.mig_start = 4;
  plan = PlanLaunch(missing_instance, *probe, *gpus);
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("no MIG instance"), std::string::npos);
}

TEST(EnsureMigInstance, CreatesAMissingInstanceThenFindsIt) {
  auto probe = Probe("A100-80GB:1:mig=1g.10gb");
  bool changed = true;
  ASSERT_TRUE(EnsureMigInstance(*probe, 0, "1g.10gb", 0, {}, &changed));
  EXPECT_FALSE(changed);  // exists already

  ASSERT_TRUE(EnsureMigInstance(*probe, 0, "3g.40gb", 4, {}, &changed));
  EXPECT_TRUE(changed);
  auto gpus = probe->Discover();
  ASSERT_TRUE(gpus);
  ASSERT_EQ((*gpus)[0].mig_instances.size(), 2u);  // 1g.10gb at 0 kept, 3g.40gb at 4 added

  DesiredTask t;
  t.id = "t-5";
  t.command = {"true"};
  t.gpus = {0};
  t.mig_profile = "3g.40gb";
  t.mig_start = 4;
  auto plan = PlanLaunch(t, *probe, *gpus);
  ASSERT_TRUE(plan) << plan.error().message;
  ASSERT_EQ(plan->spec.gpu_uuids.size(), 1u);
  EXPECT_EQ(plan->spec.gpu_uuids[0].rfind("MIG-sim-n1-0-4", 0), 0u) << plan->spec.gpu_uuids[0];
  ASSERT_EQ(plan->loads.size(), 1u);
  EXPECT_EQ(plan->loads[0].util_pct, 100);
  EXPECT_GT(plan->loads[0].mem_mib, 0);
}

TEST(EnsureMigInstance, RefusesToReplaceABusyInstanceOrPartitionAGpuInUse) {
  auto probe = Probe("A100-80GB:1:mig=7g.80gb,A100-80GB:1");
  auto busy_mig = probe->MigInstanceUuid(0, 0);
  ASSERT_TRUE(busy_mig);
  bool changed = false;
  auto st = EnsureMigInstance(*probe, 0, "3g.40gb", 4, {*busy_mig}, &changed);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_FALSE(changed);
  st = EnsureMigInstance(*probe, 1, "3g.40gb", 4, {"GPU-sim-n1-1"}, &changed);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().code, ErrorCode::kFailedPrecondition);
  // Not busy: the 7g.80gb instance is replaced.
  ASSERT_TRUE(EnsureMigInstance(*probe, 0, "3g.40gb", 4, {}, &changed));
  EXPECT_TRUE(changed);
}

TEST(EndReport, MapsHowATaskEndedToItsReport) {
  ExitReport r;
  r.task_id = "t-1";
  r.finished_ms = 1700000000500;
  r.kind = ExitKind::kExited;
  r.exit_code = 0;
  r.reason = "exited with code 0";
  json b = proto::Encode(EndReport(r, 1700000000100));
  EXPECT_EQ(b["bound_ms"], 1700000000100);
  EXPECT_EQ(b["state"], "succeeded");
  EXPECT_EQ(b["time_ms"], 1700000000500);
  EXPECT_EQ(b["exit_code"], 0);

  r.exit_code = 3;
  r.reason = "exited with code 3";
  b = proto::Encode(EndReport(r, 0));
  EXPECT_EQ(b["state"], "failed");
  EXPECT_EQ(b["exit_code"], 3);
  EXPECT_EQ(b["reason"], "exited with code 3");

  r.kind = ExitKind::kOomKilled;
  r.exit_code = -1;
  r.signal = 9;
  r.reason = "oom-killed: memory limit 512 MiB";
  b = proto::Encode(EndReport(r, 0));
  EXPECT_EQ(b["state"], "failed");
  EXPECT_EQ(b["exit_code"], 137);
  EXPECT_EQ(b["reason"], "oom-killed: memory limit 512 MiB");

  r.kind = ExitKind::kSignaled;
  r.signal = 11;
  r.reason = "killed by signal 11";
  b = proto::Encode(EndReport(r, 0));
  EXPECT_EQ(b["exit_code"], 139);

  r.kind = ExitKind::kLost;
  r.signal = 0;
  r.reason = "lost: process 42 ended while the agent was not running";
  b = proto::Encode(EndReport(r, 0));
  EXPECT_EQ(b["state"], "failed");
  EXPECT_EQ(b["reason"], "lost by the agent: process 42 ended while the agent was not running");

  r.kind = ExitKind::kStopped;
  r.reason = "stopped";
  b = proto::Encode(EndReport(r, 0));
  EXPECT_EQ(b["state"], "stopped");
}

TEST(Detect, ReadsCpuAndMemoryOfThisMachine) {
  EXPECT_GE(DetectCpuMilli(), 1000);
  EXPECT_EQ(DetectCpuMilli() % 1000, 0);
  EXPECT_GT(DetectMemoryMib(), 0);
}

TEST(AgentStart, RefusesBadOptionsBeforeTouchingAnything) {
  AgentOptions o;
  o.endpoint = "http://127.0.0.1:1";
  o.access_key = "AK";
  o.secret_key = "SK";
  o.node_name = "bad name";
  o.data_dir = ::testing::TempDir() + "/agent_test_never_created";
  auto a = Agent::Start(o, nullptr);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(a.error().message.find("bad name"), std::string::npos);

  o.node_name = "n1";
  o.secret_key.clear();
  a = Agent::Start(o, nullptr);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);

  o.secret_key = "SK";
  o.simulate_gpus = "NoSuchGpu:2";
  a = Agent::Start(o, nullptr);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpupool::agent
