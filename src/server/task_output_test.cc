// Tests of TaskOutput: offset-addressed appends (retries stored once, gaps refused, the size
// limit), reads by offset and by last lines, long-poll waiters, removal.
#include "server/task_output.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

namespace gpupool::server {
namespace {

namespace fs = std::filesystem;

class TaskOutputTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "task_output_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto out = TaskOutput::Open(dir_ + "/out", 64);
    ASSERT_TRUE(out) << out.error().message;
    out_ = std::move(*out);
  }
  void TearDown() override {
    out_.reset();
    fs::remove_all(dir_);
  }

  std::string ReadAll(const std::string& task, OutputStream s) {
    auto slice = out_->Read(task, s, 0, -1, 1 << 20);
    EXPECT_TRUE(slice) << slice.error().message;
    return slice ? slice->data : "";
  }

  std::string dir_;
  std::unique_ptr<TaskOutput> out_;
};

TEST_F(TaskOutputTest, AppendsAtOffsetsStoresARetriedChunkOnceAndBridgesAGap) {
  ASSERT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 0, "hello\n"), 6);
  ASSERT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 0, "hello\n"), 6);       // a retry
  ASSERT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 3, "lo\nworld\n"), 12);  // overlaps
  EXPECT_EQ(ReadAll("t-1", OutputStream::kStdout), "hello\nworld\n");
  EXPECT_EQ(ReadAll("t-1", OutputStream::kStderr), "");  // streams are apart
  EXPECT_EQ(out_->Size("t-1", OutputStream::kStdout), 12);
  EXPECT_EQ(out_->Size("t-2", OutputStream::kStdout), 0);

  // A gap (the agent's log rotated before it shipped bytes 12..19): the chunk follows what is
  // stored, and the run's later offsets count from there.
  EXPECT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 20, "x"), 21);
  EXPECT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 20, "xy"), 22);
  EXPECT_EQ(ReadAll("t-1", OutputStream::kStdout), "hello\nworld\nxy");
  auto again = TaskOutput::Open(dir_ + "/out", 64);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->RunSize("t-1", 1, OutputStream::kStdout), 22);
  EXPECT_FALSE(out_->Append("../etc", 1, OutputStream::kStdout, 0, "x"));
  EXPECT_FALSE(out_->Append("..", 1, OutputStream::kStdout, 0, "x"));
  EXPECT_FALSE(fs::exists(dir_ + "/etc"));
}

TEST_F(TaskOutputTest, SizeSurvivesReopeningTheDirectory) {
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kMetrics, 0, "{\"a\":1}\n"));
  auto again = TaskOutput::Open(dir_ + "/out", 64);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->Size("t-1", OutputStream::kMetrics), 8);
  EXPECT_EQ((*again)->Append("t-1", 1, OutputStream::kMetrics, 0, "{\"a\":1}\n{}\n"), 11);
}

TEST_F(TaskOutputTest, ASecondRunContinuesAfterTheFirstAndAnOldRunIsRefused) {
  ASSERT_EQ(out_->Append("t-1", 5, OutputStream::kStdout, 0, "first\n"), 6);
  EXPECT_EQ(out_->RunSize("t-1", 5, OutputStream::kStdout), 6);
  EXPECT_EQ(out_->RunSize("t-1", 9, OutputStream::kStdout), 0);  // not started yet
  // The task was bound anew: the new run's offsets start at 0 again.
  ASSERT_EQ(out_->Append("t-1", 9, OutputStream::kStdout, 0, "second\n"), 7);
  ASSERT_EQ(out_->Append("t-1", 9, OutputStream::kStdout, 0, "second\n"), 7);  // a retry
  EXPECT_EQ(ReadAll("t-1", OutputStream::kStdout), "first\nsecond\n");
  EXPECT_EQ(out_->RunSize("t-1", 9, OutputStream::kStdout), 7);
  EXPECT_EQ(out_->RunSize("t-1", 5, OutputStream::kStdout), 0);
  auto stale = out_->Append("t-1", 5, OutputStream::kStdout, 6, "late\n");
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kFailedPrecondition);
  // The runs survive reopening.
  auto again = TaskOutput::Open(dir_ + "/out", 64);
  ASSERT_TRUE(again);
  EXPECT_EQ((*again)->RunSize("t-1", 9, OutputStream::kStdout), 7);
  EXPECT_EQ((*again)->Append("t-1", 9, OutputStream::kStdout, 7, "more\n"), 12);
  EXPECT_EQ((*again)->Size("t-1", OutputStream::kStdout), 18);
}

TEST_F(TaskOutputTest, ForgettingATaskKeepsItsOutputAndItsCurrentRun) {
  ASSERT_EQ(out_->Append("t-1", 5, OutputStream::kStdout, 0, "first\n"), 6);
  ASSERT_EQ(out_->Append("t-1", 9, OutputStream::kStdout, 0, "second\n"), 7);
  out_->Forget("t-1");
  EXPECT_EQ(ReadAll("t-1", OutputStream::kStdout), "first\nsecond\n");
  EXPECT_EQ(out_->RunSize("t-1", 9, OutputStream::kStdout), 7) << "read back from the runs file";
  EXPECT_EQ(out_->Append("t-1", 9, OutputStream::kStdout, 7, "more\n"), 12);
  EXPECT_FALSE(out_->Append("t-1", 5, OutputStream::kStdout, 6, "late\n"));
}

TEST_F(TaskOutputTest, StreamsStopAtTheSizeLimit) {
  const std::string big(100, 'x');
  EXPECT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 0, big), 64);
  EXPECT_EQ(out_->Append("t-1", 1, OutputStream::kStdout, 64, "more"), 64);
  auto slice = out_->Read("t-1", OutputStream::kStdout, 0, -1, 1000);
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->data, big.substr(0, 64));
  EXPECT_TRUE(slice->truncated);
}

TEST_F(TaskOutputTest, ReadsFromAnOffsetOrTheLastLines) {
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kStdout, 0, "a\nbb\nccc\n"));
  struct Case {
    int64_t offset;
    int64_t tail;
    int64_t max;
    std::string want;
    int64_t want_offset;
  };
  for (const Case& c : std::vector<Case>{{0, -1, 100, "a\nbb\nccc\n", 0},
                                         {2, -1, 3, "bb\n", 2},
                                         {50, -1, 100, "", 9},
                                         {0, 1, 100, "ccc\n", 5},
                                         {0, 2, 100, "bb\nccc\n", 2},
                                         {0, 3, 100, "a\nbb\nccc\n", 0},
                                         {0, 10, 100, "a\nbb\nccc\n", 0},
                                         {0, 0, 100, "", 9}}) {
    auto s = out_->Read("t-1", OutputStream::kStdout, c.offset, c.tail, c.max);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->data, c.want) << c.offset << " " << c.tail;
    EXPECT_EQ(s->offset, c.want_offset) << c.offset << " " << c.tail;
    EXPECT_EQ(s->next_offset, s->offset + static_cast<int64_t>(s->data.size()));
    EXPECT_EQ(s->size, 9);
  }
  // A last line without its newline is a line.
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kStdout, 9, "dd"));
  auto s = out_->Read("t-1", OutputStream::kStdout, 0, 2, 100);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->data, "ccc\ndd");
}

TEST_F(TaskOutputTest, WaitersAreAnsweredByNewBytesByWakeAndAtTheirDeadline) {
  std::vector<std::string> got;
  auto record = [&](Result<OutputSlice> s) { got.push_back(s ? s->data : "error"); };
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kStdout, 0, "x"));
  out_->ReadOrWait("t-1", OutputStream::kStdout, 0, 100, 1000, record);  // data: answered now
  ASSERT_EQ(got, std::vector<std::string>{"x"});
  out_->ReadOrWait("t-1", OutputStream::kStdout, 1, 100, 1000, record);
  out_->ReadOrWait("t-1", OutputStream::kStderr, 0, 100, 1000, record);
  out_->ReadOrWait("t-2", OutputStream::kStdout, 0, 100, 5000, record);
  EXPECT_EQ(got.size(), 1u);
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kStdout, 1, "yz"));  // wakes the first only
  EXPECT_EQ(got, (std::vector<std::string>{"x", "yz"}));
  out_->ExpireWaiters(999);
  EXPECT_EQ(got.size(), 2u);
  out_->ExpireWaiters(1000);  // the stderr waiter's deadline
  EXPECT_EQ(got, (std::vector<std::string>{"x", "yz", ""}));
  out_->Wake("t-2");
  EXPECT_EQ(got, (std::vector<std::string>{"x", "yz", "", ""}));
}

TEST_F(TaskOutputTest, RemoveDeletesTheTasksFilesAndAnswersItsWaiters) {
  ASSERT_TRUE(out_->Append("t-1", 1, OutputStream::kStdout, 0, "x"));
  ASSERT_TRUE(out_->Append("t-2", 1, OutputStream::kStdout, 0, "y"));
  int answered = 0;
  out_->ReadOrWait("t-1", OutputStream::kStderr, 0, 100, 1000,
                   [&](Result<OutputSlice>) { ++answered; });
  out_->Remove("t-1");
  EXPECT_EQ(answered, 1);
  EXPECT_FALSE(fs::exists(dir_ + "/out/t-1"));
  EXPECT_EQ(out_->Size("t-1", OutputStream::kStdout), 0);
  EXPECT_EQ(ReadAll("t-2", OutputStream::kStdout), "y");
}

}  // namespace
}  // namespace gpupool::server
