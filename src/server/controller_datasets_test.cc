// Datasets in the Controller (controller_datasets.cc) over an AsyncStore on a MemoryStore and a
// ChunkStore in a temporary directory: created with a unique name in a project; seen by its
// members only until an admin publishes it; a push stores the chunks the project lacks (within
// its storage quota) and records a version only once every chunk is stored; a submission's mounts
// resolve to a version's manifest (the latest, or the one named) in the task's project or a
// published dataset; a dataset or version live tasks mount is not deleted, and its version numbers
// are never reused; deleting a snapshot keeps the dataset's chunks, deleting the dataset frees
// them; only the agent of a node a mounting task is bound to reads its chunks; and a task is
// placed on the node whose heartbeat says it holds the dataset, when more than one fits.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "os/sha256.h"
#include "proto/json_codec.h"
#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitStatus;
using testing::AwaitTask;
using testing::ChunkStoreFixture;
using testing::MakeMember;

class ControllerDatasetsTest : public ChunkStoreFixture {
 protected:
  void SetUp() override {
    ChunkStoreFixture::SetUp();
    if (HasFatalFailure()) return;
    for (const char* node : {"n1", "n2"}) {
      Node n = Node::Make(node, 64'000, 512 * 1024, 1, "A100-80GB");
      ASSERT_TRUE(
          Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
    }
  }

  Result<DatasetInfo> Create(const std::string& name, const Caller* who = nullptr) {
    return Await<DatasetInfo>([&](Done<DatasetInfo> d) {
      c_->CreateDataset(who ? *who : admin_, name, "", std::move(d));
    });
  }
  Result<DatasetInfo> GetDataset(const std::string& dataset, const Caller& who) {
    return Await<DatasetInfo>(
        [&](Done<DatasetInfo> d) { c_->GetDataset(who, dataset, std::move(d)); });
  }
  std::vector<DatasetInfo> List(const Caller& who) {
    return *Await<std::vector<DatasetInfo>>(
        [&](Done<std::vector<DatasetInfo>> d) { c_->ListDatasets(who, "", std::move(d)); });
  }
  Result<DatasetInfo> Publish(const std::string& dataset, const Caller& who) {
    return Await<DatasetInfo>(
        [&](Done<DatasetInfo> d) { c_->PublishDataset(who, dataset, true, std::move(d)); });
  }
  // A one-file directory's manifest (stored as the push stores it) and its chunk.
  struct Version {
    std::string chunk, manifest, manifest_text;
  };
  static Version VersionOf(const std::string& bytes) {
    Version v;
    v.chunk = os::Sha256Hex(bytes);
    proto::SnapshotManifest m;
    m.files.push_back({"train/0.bin", 0644, static_cast<int64_t>(bytes.size()), 1, {v.chunk}});
    v.manifest_text = proto::Dump(proto::Encode(m));
    v.manifest = os::Sha256Hex(v.manifest_text);
    return v;
  }
  // Pushes a version holding `bytes` as `gpupool dataset push` does: the chunks the project
  // lacks (remembered in missing_), then the record.
  Result<DatasetInfo> Push(const std::string& dataset, const std::string& bytes,
                           const Caller* who = nullptr) {
    const Caller& as = who ? *who : admin_;
    const Version v = VersionOf(bytes);
    Result<std::vector<std::string>> missing =
        Await<std::vector<std::string>>([&](Done<std::vector<std::string>> d) {
          c_->FindDatasetChunks(as, dataset, {v.chunk, v.manifest}, std::move(d));
        });
    if (!missing) return tl::unexpected(missing.error());
    missing_ = *missing;
    int64_t sent = 0;
    for (const std::string& sha : missing_) {
      const std::string& data = sha == v.chunk ? bytes : v.manifest_text;
      Result<bool> put = Await<bool>(
          [&](Done<bool> d) { c_->PutDatasetChunk(as, dataset, sha, data, std::move(d)); });
      if (!put) return tl::unexpected(put.error());
      sent += static_cast<int64_t>(data.size());
    }
    return Record(dataset, v.manifest, static_cast<int64_t>(bytes.size()), sent, as);
  }
  Result<DatasetInfo> Record(const std::string& dataset, const std::string& manifest, int64_t bytes,
                             int64_t new_bytes, const Caller& who) {
    return Await<DatasetInfo>([&](Done<DatasetInfo> d) {
      c_->PushDatasetVersion(who, dataset, DatasetPush{manifest, 1, bytes, new_bytes},
                             std::move(d));
    });
  }
  Result<Task> Submit(const std::string& dataset, int32_t version = 0,
                      const Caller* who = nullptr) {
    TaskSpec spec;
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.command = {"python3", "train.py"};
    spec.datasets = {DatasetMount{.name = dataset, .version = version, .path = "/root/data"}};
    return Await<Task>(
        [&](Done<Task> d) { c_->SubmitTask(who ? *who : admin_, spec, std::move(d)); });
  }
  Result<Task> Report(const std::string& id, TaskState to) {
    return Await<Task>(
        [&](Done<Task> d) { c_->ReportTask(admin_, id, to, 0, 0, "", 0, std::move(d)); });
  }
  std::string NodeOf(const std::string& id) {
    const Task t = AwaitTask(*c_, admin_, id)->task;
    return t.placement ? t.placement->node : "";
  }
  Result<std::string> ReadChunk(const Caller& who, const std::string& dataset,
                                const std::string& sha) {
    return Await<std::string>(
        [&](Done<std::string> d) { c_->GetDatasetChunk(who, dataset, sha, std::move(d)); });
  }
  // Waits (up to 10 s) until the project's chunks hold at most `bytes` (the collection runs on
  // the blocking-work executor once the deletion is durable).
  void AwaitCollected(const std::string& project, int64_t bytes) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (chunks_->ProjectBytes(project) > bytes && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  // The caller a node's own agent credential resolves to (see Controller::JoinNode).
  static Caller AgentOf(const std::string& node) {
    Caller c;
    c.user_id = "agent:" + node;
    c.agent_node = node;
    return c;
  }

  std::vector<std::string> missing_;
};

TEST_F(ControllerDatasetsTest, ADatasetIsItsProjectsUntilAnAdminPublishesIt) {
  Result<DatasetInfo> created = Create("imagenet");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->dataset.id, "d-1");
  EXPECT_EQ(created->dataset.project_id, "default");
  EXPECT_TRUE(created->dataset.versions.empty());
  EXPECT_EQ(Create("imagenet").error().code, ErrorCode::kAlreadyExists);
  EXPECT_EQ(Create("ImageNet").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Create("d-7").error().code, ErrorCode::kInvalidArgument);  // an id's form
  ASSERT_TRUE(Push("imagenet", "pixels"));

  const Caller al = MakeMember(*c_, admin_, "al", "default");
  const Caller bo = MakeMember(*c_, admin_, "bo", "other");
  // Another project's private dataset: not found, by name or id, nor mountable.
  EXPECT_TRUE(GetDataset("imagenet", al));
  EXPECT_EQ(GetDataset("imagenet", bo).error().code, ErrorCode::kNotFound);
  EXPECT_EQ(GetDataset("d-1", bo).error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(List(bo).empty());
  Result<Task> hidden = Submit("imagenet", 0, &bo);
  ASSERT_FALSE(hidden);
  EXPECT_EQ(hidden.error().code, ErrorCode::kNotFound);
  EXPECT_NE(hidden.error().message.find("datasets[0].dataset"), std::string::npos);

  // Publishing is an admin's: a member of its project may not either.
  Result<DatasetInfo> by_member = Publish("imagenet", al);
  ASSERT_FALSE(by_member);
  EXPECT_EQ(by_member.error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(Publish("imagenet", bo).error().code, ErrorCode::kNotFound);
  Result<DatasetInfo> published = Publish("imagenet", admin_);
  ASSERT_TRUE(published) << published.error().message;
  EXPECT_TRUE(published->dataset.published);

  // Published: every project lists, reads and mounts it; only its members push to it.
  ASSERT_EQ(List(bo).size(), 1u);
  EXPECT_TRUE(GetDataset("imagenet", bo));
  Result<Task> mounted = Submit("imagenet", 0, &bo);
  ASSERT_TRUE(mounted) << mounted.error().message;
  EXPECT_EQ(mounted->project_id, "other");
  ASSERT_EQ(mounted->datasets.size(), 1u);
  EXPECT_EQ(mounted->datasets[0].project_id, "default");
  EXPECT_EQ(GetDataset("imagenet", bo)->used_by, std::vector<std::string>{mounted->id});
  EXPECT_TRUE(GetDataset("imagenet", al)->used_by.empty());  // bo's task is not al's to see
  Result<DatasetInfo> pushed = Push("imagenet", "more pixels", &bo);
  ASSERT_FALSE(pushed);
  EXPECT_EQ(pushed.error().code, ErrorCode::kPermissionDenied);
  Result<std::string> deleted = Await<std::string>(
      [&](Done<std::string> d) { c_->DeleteDataset(bo, "imagenet", std::move(d)); });
  EXPECT_EQ(deleted.error().code, ErrorCode::kPermissionDenied);

  // Its own project's dataset of that name comes first; a second one of its own is ambiguous
  // for a caller of both projects (the admin), who names it by its id.
  ASSERT_TRUE(Create("imagenet", &bo));
  EXPECT_EQ(GetDataset("imagenet", bo)->dataset.id, "d-2");
  EXPECT_EQ(GetDataset("imagenet", al)->dataset.id, "d-1");
  EXPECT_EQ(GetDataset("imagenet", admin_).error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(GetDataset("d-2", admin_)->dataset.project_id, "other");

  Reopen();  // as after a restart: the records, and ids never reused
  ASSERT_EQ(List(admin_).size(), 2u);
  EXPECT_TRUE(GetDataset("d-1", admin_)->dataset.published);
  ASSERT_TRUE(Await<std::string>(
      [&](Done<std::string> d) { c_->DeleteDataset(admin_, "d-2", std::move(d)); }));
  EXPECT_EQ(Create("cifar")->dataset.id, "d-3");
}

TEST_F(ControllerDatasetsTest, APushStoresOnlyWhatTheProjectLacksAndRecordsACompleteVersion) {
  ASSERT_TRUE(Create("imagenet"));
  const std::string bytes(5000, 'p');
  const Version v = VersionOf(bytes);
  Result<DatasetInfo> first = Push("imagenet", bytes);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(missing_, (std::vector<std::string>{v.chunk, v.manifest}));
  ASSERT_EQ(first->dataset.versions.size(), 1u);
  const DatasetVersion& v1 = first->dataset.versions[0];
  EXPECT_EQ(v1.version, 1);
  EXPECT_EQ(v1.manifest, v.manifest);
  EXPECT_EQ(v1.bytes, 5000);
  EXPECT_EQ(v1.created_by, admin_.user_id);
  const int64_t stored = chunks_->ProjectBytes("default");

  // The same directory again: nothing is sent, nothing more stored, and no version is added
  // (the latest already is what it holds).
  Result<DatasetInfo> second = Push("imagenet", bytes);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_TRUE(missing_.empty());
  EXPECT_EQ(second->dataset.versions, first->dataset.versions);
  EXPECT_EQ(chunks_->ProjectBytes("default"), stored);

  // A version whose chunk is not stored is refused, naming it; so is one with no manifest.
  const Version partial = VersionOf("never sent");
  ASSERT_TRUE(Await<bool>([&](Done<bool> d) {
    c_->PutDatasetChunk(admin_, "imagenet", partial.manifest, partial.manifest_text, std::move(d));
  }));
  Result<DatasetInfo> incomplete = Record("imagenet", partial.manifest, 10, 0, admin_);
  ASSERT_FALSE(incomplete);
  EXPECT_EQ(incomplete.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(incomplete.error().message.find(partial.chunk), std::string::npos);
  EXPECT_FALSE(Record("imagenet", std::string(64, 'a'), 10, 0, admin_));
  Result<DatasetInfo> negative = Record("imagenet", v.manifest, -1, 0, admin_);
  ASSERT_FALSE(negative);
  EXPECT_NE(negative.error().message.find("bytes"), std::string::npos);
  EXPECT_EQ(GetDataset("imagenet", admin_)->dataset.versions.size(), 1u);
  // A chunk whose bytes are not its name is refused.
  Result<bool> forged = Await<bool>([&](Done<bool> d) {
    c_->PutDatasetChunk(admin_, "imagenet", os::Sha256Hex("real"), "forged", std::move(d));
  });
  ASSERT_FALSE(forged);
  EXPECT_EQ(forged.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ControllerDatasetsTest, APushFitsTheProjectsStorageQuota) {
  ASSERT_TRUE(Create("imagenet"));
  Project p = *c_->GetProject(admin_, "default");
  p.max_storage_bytes = 4096;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->UpdateProject(admin_, p, d); }));
  Result<DatasetInfo> over = Push("imagenet", std::string(5000, 'x'));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
  EXPECT_TRUE(Push("imagenet", std::string(1000, 'x')));
}

TEST_F(ControllerDatasetsTest, ASubmissionMountsTheLatestOrTheNamedVersion) {
  ASSERT_TRUE(Create("imagenet"));
  Result<Task> empty = Submit("imagenet");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(empty.error().message.find("no version yet"), std::string::npos);
  ASSERT_TRUE(Push("imagenet", "v1"));
  ASSERT_TRUE(Push("imagenet", "v2"));

  Result<Task> latest = Submit("imagenet");
  ASSERT_TRUE(latest) << latest.error().message;
  ASSERT_EQ(latest->datasets.size(), 1u);
  const DatasetMount& m = latest->datasets[0];
  EXPECT_EQ(m.dataset_id, "d-1");
  EXPECT_EQ(m.name, "imagenet");
  EXPECT_EQ(m.version, 2);
  EXPECT_EQ(m.project_id, "default");
  EXPECT_EQ(m.manifest, VersionOf("v2").manifest);
  EXPECT_EQ(m.path, "/root/data");
  // Stored with the task: a later push does not change what it mounts.
  ASSERT_TRUE(Push("imagenet", "v3"));
  EXPECT_EQ(AwaitTask(*c_, admin_, latest->id)->task.datasets, latest->datasets);

  Result<Task> named = Submit("d-1", 1);
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(named->datasets[0].version, 1);
  EXPECT_EQ(named->datasets[0].name, "imagenet");
  EXPECT_EQ(named->datasets[0].manifest, VersionOf("v1").manifest);

  Result<Task> no_such = Submit("imagenet", 9);
  ASSERT_FALSE(no_such);
  EXPECT_EQ(no_such.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(no_such.error().message.find("datasets[0].version"), std::string::npos);
  EXPECT_EQ(Submit("cifar").error().code, ErrorCode::kNotFound);

  // Arrays take the same path: each element mounts the resolved version.
  TaskSpec spec;
  spec.request.cpu_milli = 1000;
  spec.request.memory_mib = 1024;
  spec.command = {"true"};
  spec.datasets = {DatasetMount{.name = "imagenet", .version = 0, .path = "/root/data"}};
  Result<TaskArrayView> array = Await<TaskArrayView>([&](Done<TaskArrayView> d) {
    c_->SubmitArray(admin_, spec, ArraySpec{{0, 1}, 0}, d);
  });
  ASSERT_TRUE(array) << array.error().message;
  for (const std::string& id : array->task_ids) {
    const Task t = AwaitTask(*c_, admin_, id)->task;
    ASSERT_EQ(t.datasets.size(), 1u);
    EXPECT_EQ(t.datasets[0].version, 3);
  }
  // Mounted twice, by name and by id: refused.
  spec.datasets.push_back(DatasetMount{.name = "d-1", .version = 1, .path = "/root/old"});
  Result<TaskArrayView> twice = Await<TaskArrayView>([&](Done<TaskArrayView> d) {
    c_->SubmitArray(admin_, spec, ArraySpec{{0}, 0}, d);
  });
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("mounted twice"), std::string::npos);
}

TEST_F(ControllerDatasetsTest, WhatLiveTasksMountIsNotDeletedAndVersionNumbersAreNotReused) {
  ASSERT_TRUE(Create("imagenet"));
  ASSERT_TRUE(Push("imagenet", "v1"));
  ASSERT_TRUE(Push("imagenet", "v2"));
  Result<Task> t = Submit("imagenet", 1);
  ASSERT_TRUE(t);
  auto delete_version = [&](int32_t version) {
    return Await<DatasetInfo>([&](Done<DatasetInfo> d) {
      c_->DeleteDatasetVersion(admin_, "imagenet", version, std::move(d));
    });
  };
  auto delete_dataset = [&] {
    return Await<std::string>(
        [&](Done<std::string> d) { c_->DeleteDataset(admin_, "imagenet", std::move(d)); });
  };
  Result<std::string> refused = delete_dataset();
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(refused.error().message.find(t->id), std::string::npos);
  Result<DatasetInfo> version_refused = delete_version(1);
  ASSERT_FALSE(version_refused);
  EXPECT_EQ(version_refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_NE(version_refused.error().message.find(t->id), std::string::npos);
  EXPECT_EQ(delete_version(7).error().code, ErrorCode::kNotFound);

  // Version 2 no task mounts: deleted, and its number is never given again.
  Result<DatasetInfo> without_2 = delete_version(2);
  ASSERT_TRUE(without_2) << without_2.error().message;
  ASSERT_EQ(without_2->dataset.versions.size(), 1u);
  Reopen();
  Result<DatasetInfo> next = Push("imagenet", "v3");
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(next->dataset.versions.back().version, 3);

  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t->id, TaskState::kRunning));
  EXPECT_FALSE(delete_dataset());
  ASSERT_TRUE(Report(t->id, TaskState::kSucceeded));
  ASSERT_TRUE(delete_version(1));
  Result<std::string> gone = delete_dataset();
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_EQ(*gone, "d-1");
  AwaitCollected("default", 0);
  EXPECT_EQ(chunks_->ProjectBytes("default"), 0);
}

// ManifestsOf lists the dataset versions: collecting a deleted snapshot's chunks keeps theirs.
TEST_F(ControllerDatasetsTest, DeletingASnapshotKeepsTheDatasetsChunks) {
  ASSERT_TRUE(Create("imagenet"));
  const std::string data(3000, 'd');
  ASSERT_TRUE(Push("imagenet", data));
  const int64_t dataset_bytes = chunks_->ProjectBytes("default");

  TaskSpec spec;
  spec.request.cpu_milli = 1000;
  spec.request.memory_mib = 1024;
  spec.command = {"python3", "train.py"};
  Result<Task> t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, std::move(d)); });
  ASSERT_TRUE(t);
  ASSERT_EQ(c_->SchedulePass(), 1);
  ASSERT_TRUE(Report(t->id, TaskState::kRunning));
  const Version workspace = VersionOf(std::string(4000, 'w'));
  for (const auto& [sha, bytes] : {std::pair{workspace.chunk, std::string(4000, 'w')},
                                   {workspace.manifest, workspace.manifest_text}}) {
    ASSERT_TRUE(
        Await<bool>([&](Done<bool> d) { c_->PutChunk(admin_, t->id, sha, bytes, std::move(d)); }));
  }
  SnapshotCapture capture;
  capture.run = 1;
  capture.trigger = SnapshotTrigger::kManual;
  capture.manifest = workspace.manifest;
  capture.files = 1;
  capture.taken_ms = clock_.NowMs();
  Result<TaskSnapshot> s = Await<TaskSnapshot>(
      [&](Done<TaskSnapshot> d) { c_->CommitSnapshot(admin_, t->id, capture, std::move(d)); });
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_GT(chunks_->ProjectBytes("default"), dataset_bytes);

  ASSERT_TRUE(AwaitStatus([&](DoneStatus d) { c_->DeleteSnapshot(admin_, s->id, std::move(d)); }));
  AwaitCollected("default", dataset_bytes);
  EXPECT_EQ(chunks_->ProjectBytes("default"), dataset_bytes);
  const Version v = VersionOf(data);
  EXPECT_EQ(chunks_->Get("default", v.chunk).value_or(""), data);
  EXPECT_TRUE(chunks_->Get("default", v.manifest));
}

TEST_F(ControllerDatasetsTest, OnlyTheAgentOfANodeWithAMountingTaskReadsTheChunks) {
  ASSERT_TRUE(Create("imagenet"));
  ASSERT_TRUE(Push("imagenet", "pixels"));
  const std::string chunk = VersionOf("pixels").chunk;
  ASSERT_TRUE(Publish("imagenet", admin_));
  const Caller bo = MakeMember(*c_, admin_, "bo", "other");
  Result<Task> t = Submit("imagenet", 0, &bo);
  ASSERT_TRUE(t);
  EXPECT_EQ(ReadChunk(AgentOf("n1"), "d-1", chunk).error().code, ErrorCode::kPermissionDenied);

  ASSERT_EQ(c_->SchedulePass(), 1);
  const std::string node = NodeOf(t->id);
  const std::string other = node == "n1" ? "n2" : "n1";
  EXPECT_EQ(ReadChunk(AgentOf(node), "d-1", chunk).value_or(""), "pixels");
  EXPECT_EQ(ReadChunk(AgentOf(other), "d-1", chunk).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(ReadChunk(AgentOf(node), "d-9", chunk).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(ReadChunk(bo, "d-1", chunk).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(ReadChunk(admin_, "d-1", chunk).value_or(""), "pixels");

  ASSERT_TRUE(Report(t->id, TaskState::kFailed));  // ended: its node reads no more
  EXPECT_EQ(ReadChunk(AgentOf(node), "d-1", chunk).error().code, ErrorCode::kPermissionDenied);
}

TEST_F(ControllerDatasetsTest, ATaskIsPlacedOnTheNodeThatHoldsItsLargestDataset) {
  ASSERT_TRUE(Create("imagenet"));
  ASSERT_TRUE(Create("labels"));
  ASSERT_TRUE(Push("imagenet", std::string(2000, 'i')));
  ASSERT_TRUE(Push("labels", "cat"));
  const std::string imagenet = VersionOf(std::string(2000, 'i')).manifest;
  const std::string labels = VersionOf("cat").manifest;
  TaskSpec spec;
  spec.request.cpu_milli = 1000;
  spec.request.memory_mib = 1024;
  spec.command = {"python3", "train.py"};
  spec.datasets = {DatasetMount{.name = "labels", .version = 0, .path = "/root/labels"},
                   DatasetMount{.name = "imagenet", .version = 0, .path = "/root/imagenet"}};
  auto submit = [&] {
    Result<Task> t = Await<Task>([&](Done<Task> d) { c_->SubmitTask(admin_, spec, std::move(d)); });
    EXPECT_TRUE(t) << t.error().message;
    return t ? t->id : "";
  };
  // Each node in turn holds the larger dataset (the other the smaller one): the task goes there.
  for (const char* name : {"n1", "n2"}) {
    const std::string holder = name;
    const std::string other = holder == "n1" ? "n2" : "n1";
    ASSERT_TRUE(c_->Heartbeat(admin_, holder, {imagenet}));
    ASSERT_TRUE(c_->Heartbeat(admin_, other, {labels}));
    const std::string id = submit();
    ASSERT_EQ(c_->SchedulePass(), 1);
    EXPECT_EQ(NodeOf(id), holder);
    // The dataset says where its versions are.
    const Result<DatasetInfo> info = GetDataset("imagenet", admin_);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->nodes, (std::map<int32_t, std::vector<std::string>>{{1, {holder}}}));
  }
  // A preference only: with no room there, the task goes elsewhere rather than wait.
  ASSERT_TRUE(c_->Heartbeat(admin_, "n1", {imagenet}));
  ASSERT_TRUE(c_->Heartbeat(admin_, "n2", {}));
  spec.request.gpu_count = 1;
  spec.request.cpu_milli = 60'000;
  const std::string first = submit();
  const std::string second = submit();
  ASSERT_EQ(c_->SchedulePass(), 2);
  EXPECT_EQ(NodeOf(first), "n1");
  EXPECT_EQ(NodeOf(second), "n2");
}

}  // namespace
}  // namespace gpupool::server
