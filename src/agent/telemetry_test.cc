// Tests of the agent's telemetry collector: /proc parsing, and batches built from a real process
// runtime and simulated GPUs — output shipped past the server's offsets (never twice once
// acknowledged, again when not), samples per task and node, completion after the task ended.
#include "agent/telemetry.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/gpu/simulated_probe.h"
#include "agent/runtime/process_runtime.h"
#include "core/base64.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ParseCpuTimes, SumsBusyAndTotalJiffies) {
  auto t = ParseCpuTimes("cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 1 2 3 4\n");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->total, 980u);
  EXPECT_EQ(t->busy, 160u);  // all but idle (800) and iowait (20)
  EXPECT_FALSE(ParseCpuTimes("intr 1 2 3"));
  EXPECT_FALSE(ParseCpuTimes("cpu  1 2"));
}

TEST(ParseMemInfoUsedMib, IsTotalMinusAvailable) {
  EXPECT_EQ(ParseMemInfoUsedMib("MemTotal:       8192000 kB\nMemFree:  10 kB\n"
                                "MemAvailable:   6144000 kB\n"),
            2000);
  EXPECT_FALSE(ParseMemInfoUsedMib("MemTotal: 100 kB\n"));
}

// Decoded output of one stream of one task in a batch ("" when absent) and its offset.
std::pair<std::string, int64_t> Output(const json& batch, const std::string& task,
                                       const std::string& stream) {
  for (const json& t : batch["tasks"]) {
    if (t["task_id"] != task) continue;
    for (const json& o : t["output"]) {
      if (o["stream"] == stream) {
        return {*Base64Decode(o["data_b64"].get<std::string>()), o["offset"].get<int64_t>()};
      }
    }
  }
  return {"", -1};
}

// The server's answer, decoded as the agent's typed client does.
proto::TelemetryAck Ack(const json& answer) {
  auto ack = proto::Decode<proto::TelemetryAck>(answer, proto::UnknownFields::kIgnore);
  EXPECT_TRUE(ack) << ack.error().message;
  return ack ? *ack : proto::TelemetryAck{};
}

const json* TaskEntry(const json& batch, const std::string& task) {
  for (const json& t : batch["tasks"]) {
    if (t["task_id"] == task) return &t;
  }
  return nullptr;
}

class TelemetryCollectorTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "telemetry_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::others_exec | fs::perms::group_exec);
    RuntimeOptions ro;
    ro.cgroup_name = "gpupool-telemetry-test-" + std::to_string(::getpid());
    auto rt = ProcessRuntime::Open(dir_ + "/runtime", ro);
    ASSERT_TRUE(rt) << rt.error().message;
    runtime_ = std::move(*rt);
    auto probe = SimulatedProbe::Parse("A100-80GB:2", "n1");
    ASSERT_TRUE(probe);
    probe_ = std::move(*probe);
    TelemetryOptions o;
    o.cpu_milli = 2000;
    o.ship_interval_ms = 5000;
    collector_ = std::make_unique<TelemetryCollector>("n1", *runtime_, *probe_, o);
  }
  void TearDown() override {
    collector_.reset();
    for (const RunningTask& t : runtime_->Running()) {
      (void)runtime_->Stop(t.task_id, std::chrono::milliseconds(0));
    }
    runtime_->Reap(std::chrono::milliseconds(2000));
    for (const std::string& id : runtime_->Tasks()) (void)runtime_->Remove(id);
    runtime_.reset();
    fs::remove_all(dir_);
  }

  // Waits (bounded) for the runtime to report `id` ended.
  bool AwaitExit(const std::string& id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const ExitReport& r : runtime_->Reap(std::chrono::milliseconds(100))) {
        if (r.task_id == id) return true;
      }
    }
    return false;
  }

  std::string dir_;
  std::unique_ptr<ProcessRuntime> runtime_;
  std::unique_ptr<SimulatedProbe> probe_;
  std::unique_ptr<TelemetryCollector> collector_;
};

TEST_F(TelemetryCollectorTest, ShipsOutputPastTheAcknowledgedOffsetsThenCompletes) {
  LaunchSpec spec;
  spec.task_id = "t-1";
  spec.command = {"sh", "-c",
                  "echo out1; echo err1 >&2; echo '{\"step\":1}' >> \"$GPUPOOL_METRICS_FILE\"; "
                  "printf '{\"step\"' >> \"$GPUPOOL_METRICS_FILE\"; exec sleep 30"};
  auto rt = runtime_->Launch(spec);
  ASSERT_TRUE(rt) << rt.error().message;
  auto gpus = probe_->Discover();
  ASSERT_TRUE(gpus);
  probe_->SetLoad((*gpus)[1].uuid, rt->pid, 40, 2048);
  collector_->Track("t-1", 77, {(*gpus)[1].uuid});

  // Output arrives: the batch goes at once (output is urgent), with what is there.
  // Polled for up to 20 s: a loaded machine (or a sanitizer build) may take seconds to start it.
  // The streams may be read at different moments, so a batch may have one without the other:
  // each batch carries what is not acknowledged yet, and the latest of each stream counts.
  json batch;
  std::map<std::string, std::pair<std::string, int64_t>> shipped;
  const auto complete = [&] {
    return shipped["stdout"].first == "out1\n" && shipped["stderr"].first == "err1\n" &&
           shipped["metrics"].first == "{\"step\":1}\n";
  };
  for (int i = 0; i < 1'000 && !complete(); ++i) {
    collector_->Sample(1'000 + i);
    auto body = collector_->NextBatch(1'000 + i);
    if (body) {
      batch = proto::Encode(*body);
      for (const char* stream : {"stdout", "stderr", "metrics"}) {
        auto output = Output(batch, "t-1", stream);
        if (output.second >= 0) shipped[stream] = std::move(output);
      }
    }
    if (!complete()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(batch.is_object());
  EXPECT_EQ(shipped["stdout"], (std::pair<std::string, int64_t>{"out1\n", 0}));
  EXPECT_EQ(shipped["stderr"], (std::pair<std::string, int64_t>{"err1\n", 0}));
  // The metrics line still being written waits for its newline.
  EXPECT_EQ(shipped["metrics"].first, "{\"step\":1}\n");
  const json* entry = TaskEntry(batch, "t-1");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ((*entry)["bound_ms"], 77);
  EXPECT_FALSE((*entry)["complete"].get<bool>());
  ASSERT_FALSE((*entry)["samples"].empty()) << batch.dump();
  const json& sample = (*entry)["samples"].back();
  EXPECT_EQ(sample["gpu_util_pct"], 40);
  EXPECT_EQ(sample["gpu_mem_mib"], 2048);
  if (!rt->cgroup.empty()) {
    EXPECT_GT(sample["memory_mib"].get<int64_t>(), -1);
  }
  ASSERT_FALSE(batch["samples"].empty());
  EXPECT_EQ(batch["samples"].back()["gpus"].size(), 2u);
  EXPECT_EQ(batch["samples"].back()["gpus"][1]["util_pct"], 40);

  // Not acknowledged: the same bytes go again. Acknowledged: they do not.
  auto again = collector_->NextBatch(9'000);
  ASSERT_TRUE(again);
  EXPECT_EQ(Output(proto::Encode(*again), "t-1", "stdout").first, "out1\n");
  auto done = collector_->Acknowledge(
      Ack({{"tasks", {{{"task_id", "t-1"}, {"stdout", 5}, {"stderr", 5}, {"metrics", 11}}}}}));
  EXPECT_TRUE(done.empty());
  auto none = collector_->NextBatch(9'100);
  EXPECT_FALSE(none) << "nothing new, samples not due: " << (none ? proto::Encode(*none) : json());

  // The task ends: its last partial metrics line goes too, marked complete; once acknowledged
  // the task is done with.
  ASSERT_TRUE(runtime_->Stop("t-1", std::chrono::milliseconds(0)));
  ASSERT_TRUE(AwaitExit("t-1"));
  collector_->Ended("t-1", 77);
  auto last = collector_->NextBatch(9'200);
  ASSERT_TRUE(last);
  const json last_batch = proto::Encode(*last);
  EXPECT_EQ(Output(last_batch, "t-1", "metrics"),
            (std::pair<std::string, int64_t>{"{\"step\"", 11}));
  EXPECT_EQ(Output(last_batch, "t-1", "stdout").first, "");
  EXPECT_TRUE((*TaskEntry(last_batch, "t-1"))["complete"].get<bool>());
  done = collector_->Acknowledge(
      Ack({{"tasks", {{{"task_id", "t-1"}, {"stdout", 5}, {"stderr", 5}, {"metrics", 18}}}}}));
  EXPECT_EQ(done, std::vector<std::string>{"t-1"});
  EXPECT_FALSE(collector_->Tracking("t-1"));
}

TEST_F(TelemetryCollectorTest, ARefusedTaskIsDoneWith) {
  collector_->Track("t-9", 1, {});
  collector_->Sample(1'000);
  auto body = collector_->NextBatch(10'000);  // samples due
  ASSERT_TRUE(body);
  auto done = collector_->Acknowledge(Ack({{"tasks", {{{"task_id", "t-9"}, {"refused", true}}}}}));
  EXPECT_EQ(done, std::vector<std::string>{"t-9"});
  EXPECT_FALSE(collector_->Tracking("t-9"));
}

}  // namespace
}  // namespace gpupool::agent
