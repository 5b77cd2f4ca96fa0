// Tests of the runtime router without a Docker daemon: the agent still runs commands as
// processes, an image task is refused with the reason docker is unavailable, and every call
// about a task reaches the process runtime that owns it (Reap waits for its end).
#include "agent/runtime/runtime_router.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(RuntimeRouter, WithoutDockerRunsCommandsAndRefusesImagesSayingWhy) {
  std::string tmpl = (fs::temp_directory_path() / "gpupool-router-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string base = tmpl;
  chmod(base.c_str(), 0711);  // task uids must reach their workspaces
  std::atomic<int> exits{0};
  RuntimeOptions process;
  process.use_cgroups = false;
  process.on_exit = [&] {
    ++exits;
    exits.notify_all();
  };
  DockerOptions docker;
  docker.socket = base + "/no-docker.sock";
  auto router = RuntimeRouter::Open(base + "/runtime", process, base + "/docker", docker);
  ASSERT_TRUE(router) << router.error().message;
  TaskRuntime& rt = **router;

  EXPECT_EQ((*router)->docker(), nullptr);
  EXPECT_NE((*router)->docker_unavailable().find(docker.socket), std::string::npos)
      << (*router)->docker_unavailable();

  LaunchSpec image;
  image.task_id = "t-image";
  image.image = "busybox:1.36";
  auto refused = rt.Launch(image);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(refused.error().message.rfind("docker runtime unavailable: ", 0), 0u)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find(docker.socket), std::string::npos);

  LaunchSpec cmd;
  cmd.task_id = "t-cmd";
  cmd.command = {"/bin/sh", "-c", "echo routed; exit 4"};
  auto t = rt.Launch(cmd);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(rt.Workspace("t-cmd"), (*router)->process().Workspace("t-cmd"));
  EXPECT_EQ(rt.Workspace("t-cmd").rfind(fs::absolute(base + "/runtime").string(), 0), 0u);
  const std::vector<ExitReport> ended = rt.Reap(milliseconds(10'000));  // woken by the exit
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].task_id, "t-cmd");
  EXPECT_EQ(ended[0].exit_code, 4);
  exits.wait(0);  // the owner's callback runs too (after the report was queued)
  auto log = rt.ReadLog("t-cmd", LogStream::kStdout, 0, 100);
  ASSERT_TRUE(log) << log.error().message;
  EXPECT_EQ(log->data, "routed\n");
  EXPECT_EQ(rt.Tasks(), std::vector<std::string>{"t-cmd"});
  ASSERT_TRUE(rt.Remove("t-cmd"));
  EXPECT_FALSE(fs::exists(rt.TaskDir("t-cmd")));
  EXPECT_EQ(rt.Stop("t-cmd", milliseconds(0)).error().code, ErrorCode::kNotFound);
  router->reset();
  std::error_code ec;
  fs::remove_all(base, ec);
}

}  // namespace
}  // namespace gpupool::agent
