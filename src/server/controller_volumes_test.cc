// Volumes in the Controller (controller_volumes.cc): created in a project within its storage
// quota, named uniquely there; a submission's mounts resolve in the task's project (another
// project's volume is not found); a node-local volume is bound to the node of the first task
// placed with it, and every later task that mounts it runs there only (also two placed in one
// pass); a shared volume only on nodes with the shared storage; the node's assignments carry the
// volumes; a volume live tasks mount is not deleted, and a deleted one goes once its node
// removed its files; records survive a restart.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitStatus;
using testing::AwaitTask;
using testing::ControllerFixture;
using testing::MakeMember;

constexpr int64_t kGiB = int64_t{1} << 30;

class ControllerVolumesTest : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    if (HasFatalFailure()) return;
    AddNode("n1", false);
    AddNode("n2", true);
  }
  void AddNode(const std::string& name, bool shared_storage) {
    Node n = Node::Make(name, 64'000, 512 * 1024, 1, "A100-80GB");
    n.shared_storage = shared_storage;
    ASSERT_TRUE(
        Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
  }
  Result<VolumeInfo> Create(const std::string& name, int64_t size, bool shared = false,
                            const Caller* who = nullptr, const std::string& node = "") {
    VolumeSpec spec{name, "", size, shared, node};
    return Await<VolumeInfo>(
        [&](Done<VolumeInfo> d) { c_->CreateVolume(who ? *who : admin_, spec, std::move(d)); });
  }
  Result<Task> Submit(const std::vector<VolumeMount>& mounts, const Caller* who = nullptr,
                      int gpus = 0) {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = gpus;
    spec.command = {"python3", "train.py"};
    spec.volumes = mounts;
    return Await<Task>(
        [&](Done<Task> d) { c_->SubmitTask(who ? *who : admin_, spec, std::move(d)); });
  }
  static VolumeMount Mount(const std::string& name, const std::string& path = "/root/data") {
    return VolumeMount{.volume_id = "", .name = name, .path = path};
  }
  Task Get(const std::string& id) { return AwaitTask(*c_, admin_, id)->task; }
  std::string NodeOf(const std::string& id) {
    const Task t = Get(id);
    return t.placement ? t.placement->node : "";
  }
  NodeAssignments Assignments(const std::string& node) {
    return *Await<NodeAssignments>(
        [&](Done<NodeAssignments> d) { c_->WatchAssignments(admin_, node, 0, 0, std::move(d)); });
  }
  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }
  Result<std::string> Delete(const std::string& volume) {
    return Await<std::string>(
        [&](Done<std::string> d) { c_->DeleteVolume(admin_, volume, std::move(d)); });
  }
  std::vector<VolumeInfo> List() {
    return *Await<std::vector<VolumeInfo>>(
        [&](Done<std::vector<VolumeInfo>> d) { c_->ListVolumes(admin_, "", std::move(d)); });
  }
};

TEST_F(ControllerVolumesTest, AVolumeHasAUniqueNameInItsProjectAndFitsItsStorageQuota) {
  Result<VolumeInfo> data = Create("data", 200 * kGiB);
  ASSERT_TRUE(data) << data.error().message;
  EXPECT_EQ(data->volume.id, "v-1");
  EXPECT_EQ(data->volume.project_id, "default");
  EXPECT_TRUE(data->volume.node.empty());
  Result<VolumeInfo> again = Create("data", kGiB);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists);
  EXPECT_FALSE(Create("Data", kGiB));  // not a volume name
  Result<VolumeInfo> on_gone = Create("x", kGiB, false, nullptr, "n9");
  ASSERT_FALSE(on_gone);
  EXPECT_EQ(on_gone.error().code, ErrorCode::kNotFound);

  Project p = *c_->GetProject(admin_, "default");
  p.max_storage_bytes = 250 * kGiB;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, p, d); }));
  Result<VolumeInfo> over = Create("more", 51 * kGiB);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(over.error().message.find("max_storage_bytes"), std::string::npos);
  ASSERT_TRUE(Create("more", 50 * kGiB));
  Result<VolumeInfo> grown = Await<VolumeInfo>(
      [&](Done<VolumeInfo> d) { c_->ResizeVolume(admin_, "data", 201 * kGiB, std::move(d)); });
  ASSERT_FALSE(grown);
  EXPECT_EQ(grown.error().code, ErrorCode::kResourceExhausted);
  Result<VolumeInfo> shrunk = Await<VolumeInfo>(
      [&](Done<VolumeInfo> d) { c_->ResizeVolume(admin_, "data", 100 * kGiB, std::move(d)); });
  ASSERT_TRUE(shrunk) << shrunk.error().message;
  EXPECT_EQ(shrunk->volume.size_bytes, 100 * kGiB);

  Reopen();  // as after a restart: the records, and ids never reused
  ASSERT_EQ(List().size(), 2u);
  EXPECT_EQ(List()[0].volume.size_bytes, 100 * kGiB);
  ASSERT_TRUE(Delete("more"));
  Result<VolumeInfo> next = Create("next", kGiB);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->volume.id, "v-3");
}

TEST_F(ControllerVolumesTest, AnotherProjectsVolumeIsNotFoundForItsMembers) {
  ASSERT_TRUE(Create("data", kGiB));
  const Caller other = MakeMember(*c_, admin_, "bob", "other");
  Result<Task> t = Submit({Mount("data")}, &other);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(t.error().message, "volumes[0].volume: volume data not found in project other");
  Result<VolumeInfo> get =
      Await<VolumeInfo>([&](Done<VolumeInfo> d) { c_->GetVolume(other, "v-1", std::move(d)); });
  ASSERT_FALSE(get);
  EXPECT_EQ(get.error().code, ErrorCode::kNotFound);
  Result<std::string> rm =
      Await<std::string>([&](Done<std::string> d) { c_->DeleteVolume(other, "data", d); });
  ASSERT_FALSE(rm);
  EXPECT_EQ(rm.error().code, ErrorCode::kNotFound);
}

TEST_F(ControllerVolumesTest, ANodeLocalVolumeHoldsItsTasksToTheNodeOfTheFirst) {
  ASSERT_TRUE(Create("data", kGiB));
  // Two tasks of one GPU each on two one-GPU nodes, placed in one pass: the first binds the
  // volume to its node, the second may not go elsewhere and waits.
  Result<Task> a = Submit({Mount("data")}, nullptr, 1);
  Result<Task> b = Submit({Mount("v-1", "/root/in")}, nullptr, 1);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->volumes[0].volume_id, "v-1");
  EXPECT_EQ(b->volumes[0].name, "data");  // named by its id, shown by its name
  c_->SchedulePass();
  c_->SchedulePass();
  const std::string node = NodeOf(a->id);
  ASSERT_FALSE(node.empty());
  EXPECT_EQ(List()[0].volume.node, node);
  EXPECT_EQ(Get(b->id).state, TaskState::kPending);
  const std::string why = AwaitTask(*c_, admin_, b->id)->pending_reason;
  EXPECT_NE(why.find("not node " + node + ", where its volume is"), std::string::npos) << why;
  // Its node's assignments carry the volume.
  NodeAssignments assigned = Assignments(node);
  ASSERT_EQ(assigned.volumes.count("v-1"), 1u);
  EXPECT_EQ(assigned.volumes.at("v-1").size_bytes, kGiB);
  // Once the first ends, the second runs on the same node.
  ASSERT_TRUE(Report(a->id, TaskState::kRunning));
  ASSERT_TRUE(Report(a->id, TaskState::kSucceeded));
  EXPECT_EQ(c_->SchedulePass(), 1);
  EXPECT_EQ(NodeOf(b->id), node);

  Reopen();  // the binding is durable
  EXPECT_EQ(List()[0].volume.node, node);
}

TEST_F(ControllerVolumesTest, ASharedVolumeRunsOnlyWhereTheSharedStorageIs) {
  ASSERT_TRUE(Create("common", kGiB, /*shared=*/true));
  Result<VolumeInfo> pinned = Create("bad", kGiB, true, nullptr, "n1");
  ASSERT_FALSE(pinned);
  EXPECT_EQ(pinned.error().code, ErrorCode::kInvalidArgument);
  for (int i = 0; i < 3; ++i) {
    Result<Task> t = Submit({Mount("common")});
    ASSERT_TRUE(t);
    EXPECT_TRUE(t->volumes[0].shared);
  }
  EXPECT_EQ(c_->SchedulePass(), 3);
  for (const std::string id : {"t-1", "t-2", "t-3"}) EXPECT_EQ(NodeOf(id), "n2") << id;
  EXPECT_TRUE(List()[0].volume.node.empty());
}

TEST_F(ControllerVolumesTest, AVolumeInUseStaysAndADeletedOneGoesOnceItsNodeRemovedItsFiles) {
  ASSERT_TRUE(Create("data", kGiB));
  Result<Task> t = Submit({Mount("data")});
  ASSERT_TRUE(t);
  ASSERT_EQ(c_->SchedulePass(), 1);
  const std::string node = NodeOf(t->id);
  Result<std::string> busy = Delete("data");
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(busy.error().message,
            "volume data (v-1) is mounted by t-1, which have not ended: stop them first");
  ASSERT_TRUE(Report(t->id, TaskState::kRunning));
  ASSERT_TRUE(Report(t->id, TaskState::kSucceeded));
  Result<std::string> gone = Delete("data");
  ASSERT_TRUE(gone) << gone.error().message;
  ASSERT_EQ(List().size(), 1u);
  EXPECT_TRUE(List()[0].volume.deleting);
  // A new task cannot mount it; its node is told to remove its files.
  Result<Task> late = Submit({Mount("data")});
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(Assignments(node).remove_volumes, std::vector<std::string>{"v-1"});
  const std::string other = node == "n1" ? "n2" : "n1";
  EXPECT_TRUE(Assignments(other).remove_volumes.empty());
  // Only that node's agent (or an admin) may say it did.
  Caller other_agent;
  other_agent.user_id = "agent:" + other;
  other_agent.agent_node = other;
  EXPECT_FALSE(AwaitStatus([&](DoneStatus d) { c_->VolumeRemoved(other_agent, "v-1", d); }));
  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->VolumeRemoved(admin_, "v-1", d); }));
  EXPECT_TRUE(List().empty());
  EXPECT_TRUE(Assignments(node).remove_volumes.empty());
  // A volume never bound to a node goes at once.
  ASSERT_TRUE(Create("unused", kGiB));
  ASSERT_TRUE(Delete("unused"));
  EXPECT_TRUE(List().empty());
}

}  // namespace
}  // namespace gpupool::server
