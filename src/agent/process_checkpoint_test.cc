// The node's process-checkpoint capability, found with stand-in `criu` and `cuda-checkpoint`
// programs in a directory of their own: missing, failing its check (as on this project's CI
// kernel), working.
#include "agent/process_checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

class ProcessCheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "process_checkpoint.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    bin_ = tmpl;
  }
  void TearDown() override { fs::remove_all(bin_); }
  void Program(const std::string& name, const std::string& script) {
    const std::string path = bin_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << script << "\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  // The stand-ins in bin_ alone, whatever the machine has installed.
  ProcessCheckpointSupport Detect(bool real_gpus) {
    return DetectProcessCheckpoint(real_gpus, [this](const std::string& name) {
      const std::string path = bin_ + "/" + name;
      return fs::exists(path) ? path : std::string();
    });
  }
  std::string bin_;
};

TEST_F(ProcessCheckpointTest, MissingFailingAndWorking) {
  ProcessCheckpointSupport s = Detect(false);
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "criu is not installed");

  Program(
      "criu",
      "echo 'Error (criu/cr-check.c:1): Kernel does not support PTRACE_O_SUSPEND_SECCOMP'; exit 1");
  s = Detect(false);
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "`criu check` fails on this kernel: " + bin_ +
                       "/criu failed: Error (criu/cr-check.c:1): Kernel does not support "
                       "PTRACE_O_SUSPEND_SECCOMP");

  Program("criu", "echo 'Looks good.'");
  EXPECT_TRUE(Detect(false).available);
  s = Detect(true);  // real GPUs need NVIDIA's tool too
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "cuda-checkpoint (NVIDIA, driver 550 or later) is not installed");
  Program("cuda-checkpoint", "exit 0");
  EXPECT_TRUE(Detect(true).available);
}

}  // namespace
}  // namespace gpupool::agent
