// Tests of job ids and members' indexes (core/task_job.h).
#include "core/task_job.h"

#include <gtest/gtest.h>

namespace gpupool {
namespace {

TEST(TaskJobTest, JobIdsNameTheFirstMembersSeq) {
  EXPECT_EQ(JobId(7), "j-7");
  EXPECT_EQ(JobFirstSeq("j-7"), 7);
  EXPECT_EQ(JobFirstSeq("j-123456789"), 123456789);
  for (const char* bad : {"", "j-", "j-0", "j-07", "j-x", "a-7", "t-7", "j-7x", "j--7", "J-7",
                          "j-99999999999999999999"}) {
    EXPECT_FALSE(IsJobId(bad)) << bad;
    EXPECT_EQ(JobFirstSeq(bad), 0) << bad;
  }
}

TEST(TaskJobTest, AMembersIndexIsItsSeqPastTheFirst) {
  Task t;
  t.request.gang_id = "j-10";
  t.request.gang_size = 3;
  for (int64_t seq : {10, 11, 12}) {
    t.seq = seq;
    EXPECT_TRUE(IsJobMember(t));
    EXPECT_EQ(MemberIndex(t), seq - 10);
  }
  t.seq = 13;  // past the job's members: not one of them
  EXPECT_EQ(MemberIndex(t), -1);
  t.request.gang_id = "mine";  // a gang that is no job
  t.seq = 10;
  EXPECT_FALSE(IsJobMember(t));
  EXPECT_EQ(MemberIndex(t), -1);
}

}  // namespace
}  // namespace gpupool
