// Distributed jobs in the Controller (controller_jobs.cc) over an AsyncStore on a MemoryStore:
// one durable batch of members placed as a gang, one member per node, each member's rendezvous
// (the node addresses, member 0's MASTER_PORT), fate sharing (a failed member stops the others
// and gives the job its exit code; a lost node re-queues a restartable job whole), the job
// stopped as a whole, and what is refused.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "server/controller.h"
#include "server/controller_testing.h"

namespace gpupool::server {
namespace {

using testing::Await;
using testing::AwaitTask;
using testing::ControllerFixture;

class ControllerJobsTest : public ControllerFixture {
 protected:
  ControllerJobsTest() { options_.node_timeout_ms = 10'000; }

  void AddNode(const std::string& name, int gpus, const std::string& address = "") {
    Node n = Node::Make(name, 64'000, 512 * 1024, gpus, "A100-80GB");
    n.address = address;
    ASSERT_TRUE(
        Await<NodeView>([&](Done<NodeView> d) { c_->RegisterNode(admin_, n, std::move(d)); }));
  }

  static TaskSpec Member(bool restartable = false) {
    TaskSpec spec;
    spec.name = "ddp";
    spec.request.cpu_milli = 1000;
    spec.request.memory_mib = 1024;
    spec.request.gpu_count = 1;
    spec.command = {"python3", "train.py"};
    spec.restartable = restartable;
    return spec;
  }

  Result<JobView> Submit(int members, TaskSpec spec = Member(), int per_node = 1) {
    JobSpec job;
    job.members = members;
    job.members_per_node = per_node;
    return Await<JobView>([&](Done<JobView> d) { c_->SubmitJob(admin_, spec, job, std::move(d)); });
  }

  Result<JobView> Get(const std::string& id) {
    return Await<JobView>([&](Done<JobView> d) { c_->GetJob(admin_, id, std::move(d)); });
  }

  Result<Task> Report(const std::string& id, TaskState to, int exit_code = 0) {
    return Await<Task>([&](Done<Task> d) {
      c_->ReportTask(admin_, id, to, 0, exit_code, to == TaskState::kFailed ? "exit 3" : "", 0,
                     std::move(d));
    });
  }

  void Heartbeat(const std::string& node) { ASSERT_TRUE(c_->Heartbeat(admin_, node, {})); }
};

TEST_F(ControllerJobsTest, MembersArePlacedOnePerNodeWithOneRendezvous) {
  AddNode("n1", 8, "10.0.0.1");
  AddNode("n2", 8, "10.0.0.2");
  AddNode("n3", 8);  // no address given: its name stands in
  Result<JobView> job = Submit(3);
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->id, "j-" + std::to_string(job->members.front().seq));
  ASSERT_EQ(job->members.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(MemberIndex(job->members[k]), static_cast<int>(k));
    EXPECT_EQ(job->members[k].name, "ddp[" + std::to_string(k) + "]");
  }
  EXPECT_EQ(c_->SchedulePass(), 3);
  job = Get(job->id);
  ASSERT_TRUE(job) << job.error().message;
  std::set<std::string> nodes;
  for (const Task& m : job->members) {
    ASSERT_TRUE(m.placement);
    nodes.insert(m.placement->node);
    EXPECT_EQ(m.placement->rendezvous_port, kRendezvousPortFirst);
  }
  EXPECT_EQ(nodes.size(), 3u) << "one member per node";
  const Task& head = job->members.front();
  const NodeAssignments a = [&] {
    return *Await<NodeAssignments>([&](Done<NodeAssignments> d) {
      c_->WatchAssignments(admin_, head.placement->node, 0, 0, std::move(d));
    });
  }();
  ASSERT_EQ(a.rendezvous.count(head.id), 1u);
  const Rendezvous& r = a.rendezvous.at(head.id);
  EXPECT_EQ(r.job_id, job->id);
  EXPECT_EQ(r.member_index, 0);
  EXPECT_EQ(r.members, 3);
  EXPECT_EQ(r.master_port, kRendezvousPortFirst);
  std::vector<std::string> hosts;
  for (const Task& m : job->members) {
    const std::string& n = m.placement->node;
    hosts.push_back(n == "n1" ? "10.0.0.1" : n == "n2" ? "10.0.0.2" : "n3");
  }
  EXPECT_EQ(r.member_hosts, hosts);
  EXPECT_EQ(r.master_addr, hosts.front());

  // A second job's member 0 on the same node gets the next port.
  AddNode("n4", 8);
  AddNode("n5", 8);
  AddNode("n6", 8);
  Result<JobView> second = Submit(3);
  ASSERT_TRUE(second);
  EXPECT_EQ(c_->SchedulePass(), 3);
  second = Get(second->id);
  std::set<int32_t> ports{head.placement->rendezvous_port,
                          second->members.front().placement->rendezvous_port};
  if (second->members.front().placement->node == head.placement->node) {
    EXPECT_EQ(ports.size(), 2u) << "two jobs' masters on one node use two ports";
  }
}

TEST_F(ControllerJobsTest, AJobShortOfNodesWaitsAndSaysWhy) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  Result<JobView> job = Submit(3);
  ASSERT_TRUE(job);
  EXPECT_EQ(c_->SchedulePass(), 0) << "no member starts alone";
  job = Get(job->id);
  ASSERT_TRUE(job);
  for (const Task& m : job->members) {
    EXPECT_EQ(m.state, TaskState::kPending);
    ASSERT_EQ(job->pending_reasons.count(m.id), 1u) << m.id;
    EXPECT_EQ(job->pending_reasons.at(m.id),
              "gang " + job->id + ": member " + job->members[2].id +
                  " does not fit: 2 node(s) that fit hold 1 member(s) already");
  }
}

TEST_F(ControllerJobsTest, AFailedMemberStopsTheOthersAndGivesTheJobItsExitCode) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  AddNode("n3", 8);
  Result<JobView> job = Submit(3);
  ASSERT_TRUE(job);
  ASSERT_EQ(c_->SchedulePass(), 3);
  for (const Task& m : job->members) ASSERT_TRUE(Report(m.id, TaskState::kRunning));
  const std::string failed = job->members[1].id;
  ASSERT_TRUE(Report(failed, TaskState::kFailed, 3));
  job = Get(job->id);
  ASSERT_TRUE(job);
  for (const Task& m : job->members) {
    if (m.id == failed) {
      EXPECT_EQ(m.state, TaskState::kFailed);
      EXPECT_TRUE(m.ended_by.empty());
      continue;
    }
    EXPECT_EQ(m.state, TaskState::kStopped) << m.id;
    EXPECT_EQ(m.ended_by, failed);
    EXPECT_NE(m.reason.find("member 1 (" + failed + ") failed (exit code 3)"), std::string::npos)
        << m.reason;
  }
  const JobOutcome outcome = JobOutcomeOf(job->members);
  EXPECT_EQ(outcome.state, TaskState::kFailed);
  EXPECT_EQ(outcome.cause, 1);
  EXPECT_EQ(job->members[1].exit_code, 3);
}

TEST_F(ControllerJobsTest, ALostNodeRequeuesARestartableJobWhole) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  Result<JobView> job = Submit(2, Member(/*restartable=*/true));
  ASSERT_TRUE(job);
  ASSERT_EQ(c_->SchedulePass(), 2);
  for (const Task& m : job->members) ASSERT_TRUE(Report(m.id, TaskState::kRunning));
  job = Get(job->id);
  const std::string lost_node = job->members[0].placement->node;
  const std::string live_node = job->members[1].placement->node;
  // The lost node's heartbeats stop; the other's go on.
  clock_.now_ms += 11'000;
  Heartbeat(live_node);
  c_->HousekeepingPass();
  job = Get(job->id);
  ASSERT_TRUE(job);
  for (const Task& m : job->members) {
    EXPECT_EQ(m.state, TaskState::kPending) << m.id << ": " << m.reason;
  }
  EXPECT_EQ(job->members[1].ended_by, job->members[0].id);
  EXPECT_NE(job->members[1].reason.find("re-queued with job " + job->id), std::string::npos);
  EXPECT_EQ(JobOutcomeOf(job->members).state, TaskState::kPending);
  // Placed again, both together, once a node replaces the lost one.
  AddNode("n3", 8);
  EXPECT_EQ(c_->SchedulePass(), 2);
  job = Get(job->id);
  for (const Task& m : job->members) {
    EXPECT_EQ(m.state, TaskState::kScheduled);
    EXPECT_NE(m.placement->node, lost_node);
    EXPECT_TRUE(m.ended_by.empty()) << "a new run is its own";
  }
}

TEST_F(ControllerJobsTest, ALostNodeStopsTheOthersOfAJobThatIsNotRestartable) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  Result<JobView> job = Submit(2);
  ASSERT_TRUE(job);
  ASSERT_EQ(c_->SchedulePass(), 2);
  job = Get(job->id);
  const std::string live_node = job->members[1].placement->node;
  clock_.now_ms += 11'000;
  Heartbeat(live_node);
  c_->HousekeepingPass();
  job = Get(job->id);
  EXPECT_EQ(job->members[0].state, TaskState::kLost);
  EXPECT_EQ(job->members[1].state, TaskState::kStopped);
  EXPECT_EQ(JobOutcomeOf(job->members).state, TaskState::kLost);
}

TEST_F(ControllerJobsTest, StopJobStopsEveryMemberAndStoppingOneStopsAll) {
  AddNode("n1", 8);
  AddNode("n2", 8);
  Result<JobView> job = Submit(2);
  ASSERT_TRUE(job);
  const std::string id = job->id;
  job = Await<JobView>([&](Done<JobView> d) { c_->StopJob(admin_, id, std::move(d)); });
  ASSERT_TRUE(job) << job.error().message;
  for (const Task& m : job->members) EXPECT_EQ(m.state, TaskState::kStopped);

  Result<JobView> other = Submit(2);
  ASSERT_TRUE(other);
  ASSERT_EQ(c_->SchedulePass(), 2);
  const std::string member = other->members[0].id;
  ASSERT_TRUE(Await<Task>(
      [&](Done<Task> d) { c_->StopTask(admin_, member, /*discard=*/false, std::move(d)); }));
  other = Get(other->id);
  EXPECT_EQ(other->members[1].state, TaskState::kStopped);
  EXPECT_EQ(other->members[1].ended_by, member);
}

TEST_F(ControllerJobsTest, RefusesSharesAndAJobLargerThanTheQuota) {
  TaskSpec share = Member();
  share.request.gpu_count = 0;
  share.request.gpu_milli = 500;
  Result<JobView> job = Submit(2, share);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(job.error().message.find("not a share of a GPU"), std::string::npos);

  Project p;
  p.id = "small";
  p.name = "small";
  p.max_gpu_milli = 2000;
  ASSERT_TRUE(Await<Project>([&](Done<Project> d) { c_->CreateProject(admin_, p, d); }));
  TaskSpec spec = Member();
  spec.project_id = "small";
  job = Submit(3, spec);
  ASSERT_FALSE(job);
  EXPECT_EQ(job.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(job.error().message.find("the job's 3 members ask for 3000 milli-GPU"),
            std::string::npos)
      << job.error().message;
  EXPECT_FALSE(Get("j-999")) << "no such job";
}

}  // namespace
}  // namespace gpupool::server
