// Tests of the docker runtime's pure parts: the container-create body built from a launch spec,
// the multiplexed log stream's frames, Docker's timestamps and `since`, pull queries and errors,
// a container's state from inspect and how it ended, and Docker's error answers.
#include "agent/runtime/docker_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace gpupool::agent::docker {
namespace {

using nlohmann::json;

std::vector<std::string> EnvOf(const json& body) {
  std::vector<std::string> env;
  for (const json& e : body["Env"]) env.push_back(e.get<std::string>());
  return env;
}

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(CreateBody, CpuTaskGetsLimitsMountsLabelsAndNoGpu) {
  LaunchSpec spec;
  spec.task_id = "t-1";
  spec.image = "busybox:1.36";
  spec.env = {{"EPOCHS", "3"}};
  spec.cpu_milli = 1500;
  spec.memory_mib = 512;
  spec.pids_max = 64;
  const json b = CreateBody(spec, {"/data/tasks/t-1/workspace", "/data/tasks/t-1/metrics.jsonl",
                                   "/data/tasks/t-1/checkpoint", "none", "0123abcd", true, ""});
  EXPECT_EQ(b["Image"], "busybox:1.36");
  EXPECT_FALSE(b.contains("Cmd")) << "no command: the image's default runs";
  EXPECT_EQ(b["WorkingDir"], "/root");
  EXPECT_EQ(b["Tty"], false);
  EXPECT_EQ(b["Labels"], json({{"gpupool.task", "t-1"}, {"gpupool.agent", "0123abcd"}}));
  const auto env = EnvOf(b);
  for (const char* want :
       {"EPOCHS=3", "GPUPOOL_TASK_ID=t-1", "GPUPOOL_WORKSPACE=/root", "HOME=/root",
        "GPUPOOL_METRICS_FILE=/gpupool/metrics.jsonl", "GPUPOOL_CHECKPOINT_DIR=/gpupool/checkpoint",
        "GPUPOOL_CHECKPOINT_SIGNAL=SIGUSR1",
        "CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void"}) {
    EXPECT_TRUE(Has(env, want)) << want;
  }
  for (const std::string& e : env) {
    EXPECT_NE(e.rfind("PATH=", 0), 0u) << "the image's PATH must stay: " << e;
  }
  const json& h = b["HostConfig"];
  EXPECT_EQ(h["Memory"], int64_t{512} << 20);
  EXPECT_EQ(h["MemorySwap"], int64_t{512} << 20);
  EXPECT_EQ(h["NanoCpus"], int64_t{1'500'000'000});
  EXPECT_EQ(h["PidsLimit"], 64);
  EXPECT_EQ(h["NetworkMode"], "none");
  EXPECT_EQ(h["Init"], true);
  EXPECT_FALSE(h.contains("DeviceRequests"));
  EXPECT_EQ(h["Mounts"], json::parse(R"([
      {"Type":"bind","Source":"/data/tasks/t-1/workspace","Target":"/root"},
      {"Type":"bind","Source":"/data/tasks/t-1/metrics.jsonl","Target":"/gpupool/metrics.jsonl"},
      {"Type":"bind","Source":"/data/tasks/t-1/checkpoint","Target":"/gpupool/checkpoint"}
  ])"));
}

TEST(CreateBody, GpuTaskRequestsItsDevicesAndKeepsItsCommand) {
  LaunchSpec spec;
  spec.task_id = "t-2";
  spec.image = "nvcr.io/nvidia/pytorch:24.01-py3";
  spec.command = {"python", "train.py", "--lr", "0.1"};
  spec.pids_max = 0;
  spec.gpu_uuids = {"GPU-aaa", "GPU-bbb"};
  spec.gpu_milli_per_gpu = 250;
  const json b = CreateBody(spec, {"/w", "/m", "/c", "bridge", "x", true, ""});
  EXPECT_EQ(b["Cmd"], json({"python", "train.py", "--lr", "0.1"}));
  const auto env = EnvOf(b);
  EXPECT_TRUE(Has(env, "CUDA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"));
  EXPECT_TRUE(Has(env, "NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"));
  EXPECT_TRUE(Has(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25"));
  const json& h = b["HostConfig"];
  EXPECT_EQ(h["DeviceRequests"], json::parse(R"([
      {"Driver":"nvidia","DeviceIDs":["GPU-aaa","GPU-bbb"],"Capabilities":[["gpu"]]}])"));
  // Unlimited: no limit fields at all (Docker's 0 would mean the same, but say nothing).
  EXPECT_FALSE(h.contains("Memory"));
  EXPECT_FALSE(h.contains("MemorySwap"));
  EXPECT_FALSE(h.contains("NanoCpus"));
  EXPECT_FALSE(h.contains("PidsLimit"));
  EXPECT_EQ(ContainerName("x", "t-2"), "gpupool-x-t-2");
  // Simulated GPUs are no devices: the environment alone (Docker would refuse the request with
  // `could not select device driver "nvidia"`).
  const ContainerSetup simulated{"/w", "/m", "/c", "bridge", "x", false, ""};
  const json sim = CreateBody(spec, simulated);
  EXPECT_FALSE(sim["HostConfig"].contains("DeviceRequests"));
  EXPECT_TRUE(Has(EnvOf(sim), "CUDA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"));
  EXPECT_TRUE(Has(EnvOf(sim), "NVIDIA_VISIBLE_DEVICES=GPU-aaa,GPU-bbb"));
  // A HOME the task sets is its own.
  spec.env = {{"HOME", "/home/me"}};
  EXPECT_TRUE(Has(EnvOf(CreateBody(spec, simulated)), "HOME=/home/me"));
}

TEST(CreateBody, AGpuMemoryShareGetsTheInterposerReadOnlyAndPreloaded) {
  LaunchSpec spec;
  spec.task_id = "t-3";
  spec.image = "pytorch";
  spec.gpu_uuids = {"GPU-aaa"};
  spec.gpu_milli_per_gpu = 500;
  spec.gpu_mem_mib = 2048;
  spec.env = {{"LD_PRELOAD", "/opt/mine.so"}};
  ContainerSetup setup{"/w", "/m", "/c", "bridge", "x", true, ""};
  setup.host_cudashim = "/usr/lib/gpupool/libgpupool_cudashim.so";
  const json b = CreateBody(spec, setup);
  const auto env = EnvOf(b);
  EXPECT_TRUE(Has(env, "GPUPOOL_GPU_MEM_LIMIT_BYTES=" + std::to_string(2048LL << 20)));
  EXPECT_TRUE(Has(env, "LD_PRELOAD=/run/gpupool/libgpupool_cudashim.so:/opt/mine.so"));
  const json& mounts = b["HostConfig"]["Mounts"];
  ASSERT_EQ(mounts.size(), 4u) << mounts.dump();
  EXPECT_EQ(mounts[3], json::parse(R"({"Type":"bind","ReadOnly":true,
      "Source":"/usr/lib/gpupool/libgpupool_cudashim.so",
      "Target":"/run/gpupool/libgpupool_cudashim.so"})"));
  // Not given one (simulated GPUs, or a whole GPU): three mounts, its own preload alone.
  setup.host_cudashim.clear();
  const json plain = CreateBody(spec, setup);
  EXPECT_EQ(plain["HostConfig"]["Mounts"].size(), 3u);
  EXPECT_TRUE(Has(EnvOf(plain), "LD_PRELOAD=/opt/mine.so"));
  EXPECT_FALSE(Has(EnvOf(plain), "GPUPOOL_GPU_MEM_LIMIT_BYTES=" + std::to_string(2048LL << 20)));
}

std::string Frame(int stream, const std::string& payload) {
  std::string f = {static_cast<char>(stream), 0, 0, 0};
  const uint32_t n = static_cast<uint32_t>(payload.size());
  f += static_cast<char>(n >> 24);
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  return f + payload;
}

TEST(FrameDecoder, SplitsFramesWhateverPiecesTheyComeIn) {
  const std::string big(70000, 'z');  // a size using three bytes of the header
  const std::string stream =
      Frame(1, "out 1\n") + Frame(2, "err 1\n") + Frame(1, "") + Frame(1, big) + Frame(2, "err 2");
  for (size_t piece : {size_t{1}, size_t{3}, size_t{8}, size_t{13}, stream.size()}) {
    SCOPED_TRACE("pieces of " + std::to_string(piece));
    FrameDecoder d;
    std::vector<FrameDecoder::Frame> frames;
    for (size_t at = 0; at < stream.size(); at += piece) {
      ASSERT_TRUE(d.Feed(std::string_view(stream).substr(at, piece), &frames));
    }
    EXPECT_EQ(d.pending(), 0u);
    ASSERT_EQ(frames.size(), 5u);
    EXPECT_EQ(frames[0].stream, 1);
    EXPECT_EQ(frames[0].payload, "out 1\n");
    EXPECT_EQ(frames[1].stream, 2);
    EXPECT_EQ(frames[1].payload, "err 1\n");
    EXPECT_EQ(frames[2].payload, "");
    EXPECT_EQ(frames[3].payload, big);
    EXPECT_EQ(frames[4].stream, 2);
    EXPECT_EQ(frames[4].payload, "err 2");
  }
}

TEST(FrameDecoder, KeepsAnIncompleteFrameAndRefusesARawStream) {
  FrameDecoder d;
  std::vector<FrameDecoder::Frame> frames;
  ASSERT_TRUE(d.Feed(Frame(1, "abcdef").substr(0, 10), &frames));
  EXPECT_TRUE(frames.empty());
  EXPECT_EQ(d.pending(), 10u);

  FrameDecoder raw;
  const auto st = raw.Feed("hello from a tty\n", &frames);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("68 65 6c 6c 6f 20 66 72"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("not a frame header"), std::string::npos);
}

TEST(ParseTimeNs, ReadsDockersTimesToTheNanosecond) {
  struct Case {
    std::string text;
    int64_t ns;
  };
  const std::vector<Case> cases = {
      {"1970-01-01T00:00:00Z", 0},
      {"1970-01-01T00:00:01.5Z", 1'500'000'000},
      {"2024-05-01T12:00:00Z", 1714564800LL * 1'000'000'000},
      {"2026-11-29T22:27:10.483512753Z", 1795991230LL * 1'000'000'000 + 483512753},
      {"2026-11-29T22:27:10.4835127Z", 1795991230LL * 1'000'000'000 + 483512700},  // 7 digits
      {"2026-11-29T22:27:10.4835127531Z", 1795991230LL * 1'000'000'000 + 483512753},
      {"2000-02-29T23:59:59Z", 951868799LL * 1'000'000'000},  // leap day
      {"2024-05-01T14:00:00+02:00", 1714564800LL * 1'000'000'000},
      {"2024-05-01T11:30:00-00:30", 1714564800LL * 1'000'000'000},
      {"0001-01-01T00:00:00Z", 0},  // Docker's zero time: not set
  };
  for (const Case& c : cases) {
    auto ns = ParseTimeNs(c.text);
    ASSERT_TRUE(ns) << c.text << ": " << ns.error().message;
    EXPECT_EQ(*ns, c.ns) << c.text;
  }
  for (const char* bad :
       {"", "2024-05-01", "2024-05-01 12:00:00Z", "2024-13-01T12:00:00Z", "2024-05-01T12:00:00",
        "2024-05-01T12:00:00.Z", "2024-05-01T12:00:00Zjunk", "2024-05-01T12:00:00+2:00"}) {
    auto ns = ParseTimeNs(bad);
    ASSERT_FALSE(ns) << bad;
    EXPECT_NE(ns.error().message.find(std::string("'") + bad + "'"), std::string::npos)
        << ns.error().message;
  }
}

TEST(SinceAfter, StartsOneNanosecondAfterTheLastEntry) {
  EXPECT_EQ(SinceAfter(1714564800LL * 1'000'000'000 + 123456789), "1714564800.123456790");
  EXPECT_EQ(SinceAfter(999'999'999), "1.000000000");
  auto e = SplitTimestamp("2024-05-01T12:00:00.000000001Z step 3 loss=0.1\n");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->time_ns, 1714564800LL * 1'000'000'000 + 1);
  EXPECT_EQ(e->text, "step 3 loss=0.1\n");
  EXPECT_FALSE(SplitTimestamp("no-timestamp-here"));
}

TEST(PullQuery, AddsTheLatestTagOnlyWhenTheReferenceHasNone) {
  EXPECT_EQ(PullQuery("busybox"), "fromImage=busybox&tag=latest");
  EXPECT_EQ(PullQuery("busybox:1.36"), "fromImage=busybox%3A1.36");
  EXPECT_EQ(PullQuery("localhost:5000/team/app"),
            "fromImage=localhost%3A5000%2Fteam%2Fapp&tag=latest");
  EXPECT_EQ(PullQuery("localhost:5000/team/app:v2"),
            "fromImage=localhost%3A5000%2Fteam%2Fapp%3Av2");
  EXPECT_EQ(PullQuery("app@sha256:00ff"), "fromImage=app%40sha256%3A00ff");
}

TEST(ProgressError, FindsTheErrorAPullOrBuildEndsWith) {
  EXPECT_EQ(ProgressError("{\"status\":\"Pulling from library/x\"}\n"
                          "{\"errorDetail\":{\"message\":\"manifest unknown\"},"
                          "\"error\":\"manifest unknown\"}\n"),
            "manifest unknown");
  EXPECT_EQ(ProgressError("{\"status\":\"Pulling\"}\n{\"status\":\"Downloaded newer image\"}\n"),
            std::nullopt);
}

json Inspect(const std::string& status, int exit_code, bool oom, const std::string& started,
             const std::string& finished, const std::string& error = "") {
  return {{"State",
           {{"Status", status},
            {"Running", status == "running"},
            {"Pid", status == "running" ? 4242 : 0},
            {"ExitCode", exit_code},
            {"OOMKilled", oom},
            {"Error", error},
            {"StartedAt", started},
            {"FinishedAt", finished}}},
          {"HostConfig", {{"Memory", 16 << 20}}}};
}

TEST(ExitFromState, SaysHowTheContainerEndedWithItsExactTimes) {
  constexpr const char* kStart = "2024-05-01T12:00:00.250000000Z";
  constexpr const char* kEnd = "2024-05-01T12:00:03.750999999Z";
  constexpr int64_t kStartMs = 1714564800250;
  constexpr int64_t kEndMs = 1714564803750;
  struct Case {
    std::string name;
    json inspect;
    bool stop_requested;
    ExitKind kind;
    int exit_code;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"exit code", Inspect("exited", 3, false, kStart, kEnd), false, ExitKind::kExited, 3,
       "exited with code 3"},
      {"success", Inspect("exited", 0, false, kStart, kEnd), false, ExitKind::kExited, 0,
       "exited with code 0"},
      {"oom", Inspect("exited", 137, true, kStart, kEnd), false, ExitKind::kOomKilled, 137,
       "oom-killed: memory limit 16 MiB"},
      {"stop wins", Inspect("exited", 137, true, kStart, kEnd), true, ExitKind::kStopped, 137,
       "stopped"},
      {"daemon error", Inspect("exited", 128, false, kStart, kEnd, "mount failed"), false,
       ExitKind::kExited, 128, "exited with code 128 (mount failed)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = ParseInspect(c.inspect);
    ASSERT_TRUE(s) << s.error().message;
    const ExitReport r = ExitFromState("t-9", *s, c.stop_requested, 99);
    EXPECT_EQ(r.task_id, "t-9");
    EXPECT_EQ(r.kind, c.kind);
    EXPECT_EQ(r.exit_code, c.exit_code);
    EXPECT_EQ(r.reason, c.reason);
    EXPECT_EQ(r.started_ms, kStartMs);
    EXPECT_EQ(r.finished_ms, kEndMs);
    EXPECT_TRUE(r.finish_exact);
  }
}

TEST(ExitFromState, NeverStartedIsLostAndAnEndBeforeTheStartIsTheStart) {
  auto s = ParseInspect(Inspect("created", 127, false, "0001-01-01T00:00:00Z",
                                "0001-01-01T00:00:00Z", "exec: \"nope\": not found"));
  ASSERT_TRUE(s) << s.error().message;
  ExitReport r = ExitFromState("t-9", *s, false, 12345);
  EXPECT_EQ(r.kind, ExitKind::kLost);
  EXPECT_EQ(r.finished_ms, 12345);
  EXPECT_FALSE(r.finish_exact);
  EXPECT_NE(r.reason.find("never started"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("not found"), std::string::npos) << r.reason;

  // Seen from Docker 20.10: FinishedAt a few microseconds before StartedAt.
  s = ParseInspect(Inspect("exited", 0, false, "2024-05-01T12:00:00.483512753Z",
                           "2024-05-01T12:00:00.483148813Z"));
  ASSERT_TRUE(s);
  r = ExitFromState("t-9", *s, false, 0);
  EXPECT_EQ(r.finished_ms, r.started_ms);
}

TEST(ParseInspect, ReadsStateAndLimit) {
  auto s =
      ParseInspect(Inspect("running", 0, false, "2024-05-01T12:00:00Z", "0001-01-01T00:00:00Z"));
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->running);
  EXPECT_EQ(s->pid, 4242);
  EXPECT_EQ(s->finished_ns, 0);
  EXPECT_EQ(s->memory_bytes, 16 << 20);

  json bad = Inspect("exited", 0, false, "yesterday", "");
  auto e = ParseInspect(bad);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("State.StartedAt"), std::string::npos) << e.error().message;
  EXPECT_FALSE(ParseInspect(json::parse(R"({"Id":"x"})")));
}

TEST(ResponseError, MapsTheStatusAndKeepsDockersMessage) {
  Error e = ResponseError("creating the container of task t-1",
                          {404, {}, R"({"message":"No such image: busybox:9"})"});
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  EXPECT_EQ(e.message,
            "creating the container of task t-1: docker answered HTTP 404: No such image: "
            "busybox:9");
  EXPECT_EQ(ResponseError("x", {409, {}, R"({"message":"name in use"})"}).code,
            ErrorCode::kAlreadyExists);
  EXPECT_EQ(ResponseError("x", {400, {}, "{}"}).code, ErrorCode::kInvalidArgument);
  e = ResponseError("x", {500, {}, "plain text\n"});
  EXPECT_EQ(e.code, ErrorCode::kInternal);
  EXPECT_EQ(e.message, "x: docker answered HTTP 500: plain text");
}

}  // namespace
}  // namespace gpupool::agent::docker
