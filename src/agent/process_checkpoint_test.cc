// The node's process-checkpoint capability, found with stand-in `criu` and `cuda-checkpoint`
// programs on PATH: missing, failing its check (as on this project's CI kernel), working.
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
    saved_path_ = getenv("PATH") != nullptr ? getenv("PATH") : "";
    // Only the stand-ins: the system's directories come after PATH, where this machine has none
    // of the two programs (checked below).
    setenv("PATH", bin_.c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", saved_path_.c_str(), 1);
    fs::remove_all(bin_);
  }
  void Program(const std::string& name, const std::string& script) {
    const std::string path = bin_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << script << "\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  std::string bin_;
  std::string saved_path_;
};

TEST_F(ProcessCheckpointTest, MissingFailingAndWorking) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    if (fs::exists(std::string(dir) + "/criu")) GTEST_SKIP() << "criu is installed in " << dir;
  }
  ProcessCheckpointSupport s = DetectProcessCheckpoint(false);
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "criu is not installed");

  Program(
      "criu",
      "echo 'Error (criu/cr-check.c:1): Kernel does not support PTRACE_O_SUSPEND_SECCOMP'; exit 1");
  s = DetectProcessCheckpoint(false);
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "`criu check` fails on this kernel: " + bin_ +
                       "/criu failed: Error (criu/cr-check.c:1): Kernel does not support "
                       "PTRACE_O_SUSPEND_SECCOMP");

  Program("criu", "echo 'Looks good.'");
  EXPECT_TRUE(DetectProcessCheckpoint(false).available);
  s = DetectProcessCheckpoint(true);  // real GPUs need NVIDIA's tool too
  EXPECT_FALSE(s.available);
  EXPECT_EQ(s.why, "cuda-checkpoint (NVIDIA, driver 550 or later) is not installed");
  Program("cuda-checkpoint", "exit 0");
  EXPECT_TRUE(DetectProcessCheckpoint(true).available);
}

}  // namespace
}  // namespace gpupool::agent
