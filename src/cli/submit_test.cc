// Unit tests of `gpupool submit`'s mapping from flags to the POST /v1/tasks body (submit.h).
#include "cli/submit.h"

#include <gtest/gtest.h>

#include <functional>

#include "proto/json_codec.h"

namespace gpupool::cli {
namespace {

using proto::TaskSubmit;

SubmitFlags WithCommand() {
  SubmitFlags f;
  f.command = {"python", "train.py"};
  return f;
}

// The submission of `python train.py` with what `set` changes.
TaskSubmit Expected(void (*set)(TaskSubmit&)) {
  TaskSubmit s;
  s.command = {"python", "train.py"};
  set(s);
  return s;
}

// Submissions compare by their wire JSON: every field.
void ExpectBody(const Result<TaskSubmit>& body, const TaskSubmit& expected) {
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(proto::Encode(*body), proto::Encode(expected));
}

TEST(BuildSubmitBodyTest, MinimalCommand) {
  ExpectBody(BuildSubmitBody(WithCommand()), Expected([](TaskSubmit&) {}));
}

TEST(BuildSubmitBodyTest, EveryFlagMapsToItsField) {
  SubmitFlags f = WithCommand();
  f.name = "train";
  f.gpus = "2";
  f.gpu_model = "A100-80GB, H100-80GB";
  f.cpu = "8000";
  f.mem = "64Gi";
  f.disk = "100";
  f.image = "pytorch/pytorch:2.3";
  f.max_runtime = "1h30m";
  f.stop_when = "val_acc > 0.95";
  f.priority = "10";
  f.project = "ml-team";
  f.restartable = true;
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.name = "train";
               s.project = "ml-team";
               s.cpu_milli = 8000;
               s.memory_mib = 65536;
               s.gpu_count = 2;
               s.gpu_models = {"A100-80GB", "H100-80GB"};
               s.priority = 10;
               s.image = "pytorch/pytorch:2.3";
               s.disk_gib = 100;
               s.max_runtime_ms = 5'400'000;
               s.stop_when = "val_acc > 0.95";
               s.restartable = true;
             }));
}

// Every size flag takes a unit (binary, as docker's), a bare number being the field's own unit.
TEST(BuildSubmitBodyTest, SizeFlagsTakeUnits) {
  SubmitFlags f = WithCommand();
  f.mem = "16G";
  f.disk = "50G";
  Result<TaskSubmit> body = BuildSubmitBody(f);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(body->memory_mib, 16384);
  EXPECT_EQ(body->disk_gib, 50);
  f.disk = "1T";
  f.mem = "512M";
  body = BuildSubmitBody(f);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(body->disk_gib, 1024);
  EXPECT_EQ(body->memory_mib, 512);
  f.disk = "500M";  // rounded up to whole GiB
  EXPECT_EQ(BuildSubmitBody(f)->disk_gib, 1);
}

TEST(BuildSubmitBodyTest, ShareWithMemory) {
  SubmitFlags f = WithCommand();
  f.gpu_share = "500";
  f.gpu_mem = "8192";
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.gpu_milli = 500;
               s.gpu_mem_mib = 8192;
             }));
}

TEST(BuildJobBodyTest, NodesAndPlacementRules) {
  SubmitFlags f = WithCommand();
  f.gpus = "8";
  f.nodes = "4";
  f.members_per_node = "2";
  f.topology_label = "rack";
  f.topology = "required";
  Result<proto::JobSubmit> body = BuildJobBody(f);
  ASSERT_TRUE(body) << body.error().message;
  EXPECT_EQ(body->gpu_count, 8);
  EXPECT_EQ(body->nodes, 4);
  EXPECT_EQ(body->members_per_node, 2);
  EXPECT_EQ(body->topology_label, "rack");
  EXPECT_EQ(body->topology, "required");
  f.members_per_node.reset();
  f.topology.reset();
  body = BuildJobBody(f);
  ASSERT_TRUE(body);
  EXPECT_EQ(body->members_per_node, 1) << "one member per node by default";
  EXPECT_EQ(body->topology, "preferred");
}

TEST(BuildJobBodyTest, RefusesWhatAJobCannotBe) {
  struct Case {
    std::function<void(SubmitFlags&)> set;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](SubmitFlags& f) { f.nodes = "1"; }, "--nodes 1 is a task on one node"},
      {[](SubmitFlags& f) { f.nodes = "5000"; }, "--nodes must be an integer in 2..4096"},
      {[](SubmitFlags& f) {
         f.nodes = "2";
         f.gpu_share = "500";
       },
       "--gpu-share cannot be used with --nodes"},
      {[](SubmitFlags& f) {
         f.nodes = "2";
         f.inputs = {"data"};
       },
       "--input cannot be used with --nodes"},
      {[](SubmitFlags& f) { f.topology_label = "rack"; }, "--topology-label needs --nodes"},
      {[](SubmitFlags& f) {
         f.nodes = "2";
         f.topology = "required";
       },
       "--topology needs --topology-label"},
      {[](SubmitFlags& f) {
         f.nodes = "2";
         f.topology_label = "rack";
         f.topology = "strict";
       },
       "--topology must be required or preferred"},
      {[](SubmitFlags& f) {
         f.nodes = "2";
         f.members_per_node = "0";
       },
       "--members-per-node must be an integer in 1..4096"},
  };
  for (const Case& c : cases) {
    SubmitFlags f = WithCommand();
    c.set(f);
    Result<proto::JobSubmit> body = BuildJobBody(f);
    ASSERT_FALSE(body) << c.message;
    EXPECT_NE(body.error().message.find(c.message), std::string::npos) << body.error().message;
  }
}

TEST(BuildSubmitBodyTest, MigProfile) {
  SubmitFlags f = WithCommand();
  f.mig = "3g.40gb";
  f.gpu_model = "A100-80GB";
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.mig_profile = "3g.40gb";
               s.gpu_models = {"A100-80GB"};
             }));
}

TEST(BuildSubmitBodyTest, ImageWithoutCommand) {
  SubmitFlags f;
  f.image = "nginx";
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.command.clear();
               s.image = "nginx";
             }));
}

TEST(BuildSubmitBodyTest, GpuFormsAreMutuallyExclusive) {
  const struct {
    bool gpus, share, mig;
    const char* names;
  } cases[] = {
      {true, true, false, "--gpus and --gpu-share are mutually exclusive"},
      {true, false, true, "--gpus and --mig are mutually exclusive"},
      {false, true, true, "--gpu-share and --mig are mutually exclusive"},
      {true, true, true, "--gpus, --gpu-share and --mig are mutually exclusive"},
  };
  for (const auto& c : cases) {
    SubmitFlags f = WithCommand();
    if (c.gpus) f.gpus = "1";
    if (c.share) f.gpu_share = "500";
    if (c.mig) f.mig = "3g.40gb";
    Result<TaskSubmit> body = BuildSubmitBody(f);
    ASSERT_FALSE(body) << c.names;
    EXPECT_EQ(body.error().message.rfind(c.names, 0), 0u) << body.error().message;
  }
}

TEST(BuildSubmitBodyTest, BadValuesNameTheFlag) {
  const struct {
    void (*set)(SubmitFlags&);
    const char* expected;
  } cases[] = {
      {[](SubmitFlags& f) { f.gpus = "9"; }, "--gpus must be an integer in 1..8, got '9'"},
      {[](SubmitFlags& f) { f.gpus = "0.5"; },
       "--gpus must be an integer in 1..8, got '0.5': for a share of one GPU use --gpu-share 500"},
      {[](SubmitFlags& f) { f.gpus = "two"; }, "--gpus must be an integer"},
      {[](SubmitFlags& f) { f.gpu_share = "1000"; }, "--gpu-share (milli-GPU) must be"},
      {[](SubmitFlags& f) { f.gpu_share = "0"; }, "--gpu-share (milli-GPU) must be"},
      {[](SubmitFlags& f) { f.gpu_mem = "8Gi"; }, "--gpu-mem needs --gpu-share"},
      {[](SubmitFlags& f) {
         f.gpu_share = "500";
         f.gpu_mem = "8X";
       },
       "--gpu-mem: invalid size '8X'"},
      {[](SubmitFlags& f) { f.mig = "3g.41gb"; },
       "--mig '3g.41gb' is not a MIG profile of any known GPU model"},
      {[](SubmitFlags& f) {
         f.mig = "3g.40gb";
         f.gpu_model = "T4";
       },
       "--mig '3g.40gb' is not a MIG profile of --gpu-model T4"},
      {[](SubmitFlags& f) { f.gpu_model = "A100,,H100"; }, "--gpu-model has an empty model"},
      {[](SubmitFlags& f) { f.cpu = "-1"; }, "--cpu (milli-CPU) must be an integer >= 0"},
      {[](SubmitFlags& f) { f.mem = "lots"; }, "--mem: invalid size 'lots'"},
      {[](SubmitFlags& f) { f.disk = "1.5"; }, "--disk: invalid size '1.5'"},
      {[](SubmitFlags& f) { f.max_runtime = "2 hours"; }, "--max-runtime: invalid duration"},
      {[](SubmitFlags& f) { f.max_runtime = "0s"; }, "--max-runtime must be longer than 0"},
      {[](SubmitFlags& f) { f.priority = "1001"; }, "--priority must be an integer in 0..1000"},
      {[](SubmitFlags& f) { f.project = "my project"; }, "--project must be a project id"},
      {[](SubmitFlags& f) { f.name = ""; }, "--name must be 1..256 bytes"},
      {[](SubmitFlags& f) { f.stop_when = ""; }, "--stop-when must be a condition"},
      {[](SubmitFlags& f) { f.command.clear(); }, "nothing to run"},
  };
  for (const auto& c : cases) {
    SubmitFlags f = WithCommand();
    c.set(f);
    Result<TaskSubmit> body = BuildSubmitBody(f);
    ASSERT_FALSE(body) << c.expected;
    EXPECT_EQ(body.error().message.rfind(c.expected, 0), 0u)
        << "got: " << body.error().message << "\nwant: " << c.expected;
  }
}

TEST(BuildSubmitBodyTest, VolumesMapToMountsAndBadOnesNameTheFlag) {
  SubmitFlags f = WithCommand();
  f.volumes = {"data:/root/data", "imagenet:in/train:ro"};
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.volumes = {{"data", "/root/data", false, "", false},
                            {"imagenet", "/root/in/train", true, "", false}};
             }));
  f.volumes = {"data:/etc"};
  Result<TaskSubmit> outside = BuildSubmitBody(f);
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().message.rfind("--volume: volume path '/etc' is outside", 0), 0u)
      << outside.error().message;
  f.volumes = {"data"};
  Result<TaskSubmit> bare = BuildSubmitBody(f);
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message, "--volume: volume 'data' needs a path: NAME:/root/PATH[:ro]");
}

TEST(BuildSubmitBodyTest, DatasetsMapToReadOnlyMountsAndBadOnesNameTheFlag) {
  SubmitFlags f = WithCommand();
  f.datasets = {"imagenet:/root/data", "coco@3:coco"};
  ExpectBody(BuildSubmitBody(f), Expected([](TaskSubmit& s) {
               s.datasets = {{"imagenet", 0, "/root/data", "", "", ""},
                             {"coco", 3, "/root/coco", "", "", ""}};
             }));
  f.datasets = {"imagenet@0:/root/data"};
  Result<TaskSubmit> zero = BuildSubmitBody(f);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().message.rfind("--dataset: dataset 'imagenet@0:/root/data': version", 0),
            0u)
      << zero.error().message;
  f.datasets = {"imagenet"};
  Result<TaskSubmit> bare = BuildSubmitBody(f);
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message,
            "--dataset: dataset 'imagenet' needs a path: NAME[@VERSION]:/root/PATH");
}

TEST(BuildSubmitBodyTest, HoldAndInputsSubmitHeld) {
  EXPECT_FALSE(BuildSubmitBody(WithCommand())->hold);
  SubmitFlags held = WithCommand();
  held.hold = true;
  EXPECT_TRUE(BuildSubmitBody(held)->hold);
  SubmitFlags with_input = WithCommand();
  with_input.inputs = {"./data:data"};
  EXPECT_TRUE(BuildSubmitBody(with_input)->hold) << "inputs are uploaded while the task is held";
}

TEST(ParseSubmitInputsTest, SplitsAtTheLastColonAndDefaultsToTheBaseName) {
  Result<std::vector<SubmitInput>> inputs = ParseSubmitInputs(
      {"./data:data", "../runs/ckpt/", "cfg.yaml:conf/train.yaml", "./odd:name:", "x:out/in/",
       "m.py:/root/src/m.py", "w.bin:/root/"});
  ASSERT_TRUE(inputs) << inputs.error().message;
  std::vector<std::pair<std::string, std::string>> got;
  for (const SubmitInput& in : *inputs) got.emplace_back(in.local, in.path);
  EXPECT_EQ(got, (std::vector<std::pair<std::string, std::string>>{{"./data", "data"},
                                                                   {"../runs/ckpt/", "ckpt"},
                                                                   {"cfg.yaml", "conf/train.yaml"},
                                                                   {"./odd:name", "odd:name"},
                                                                   {"x", "out/in"},
                                                                   {"m.py", "src/m.py"},
                                                                   {"w.bin", "w.bin"}}));
  EXPECT_EQ(inputs->front().flag, "./data:data");
  EXPECT_TRUE(ParseSubmitInputs({})->empty());
}

TEST(ParseSubmitInputsTest, BadInputsNameTheFlag) {
  const struct {
    std::vector<std::string> inputs;
    std::string expected;
  } cases[] = {
      {{":data"}, "--input ':data': LOCAL is empty (--input LOCAL[:PATH])"},
      {{"./x:../y"}, "--input './x:../y': path '../y' has a '..' component"},
      {{"./x:/etc/x"},
       "--input './x:/etc/x': path '/etc/x' is outside the task's workspace /root: give a path "
       "below /root/ or a relative one"},
      {{"/"}, "--input '/': '/' has no name to copy it under"},
      {{"a/data", "b:data"},
       "--input 'b:data' and --input 'a/data' would both become 'data' in the workspace; give "
       "one of them another PATH"},
  };
  for (const auto& c : cases) {
    Result<std::vector<SubmitInput>> inputs = ParseSubmitInputs(c.inputs);
    ASSERT_FALSE(inputs) << c.expected;
    EXPECT_EQ(inputs.error().message.rfind(c.expected, 0), 0u)
        << "got: " << inputs.error().message << "\nwant: " << c.expected;
  }
}

}  // namespace
}  // namespace gpupool::cli
