// The wire contract has one home: API bodies are written and read only through src/proto's wire
// types (the typed client, the server's routes). This test fails on a source file outside proto
// that uses a JSON library without being one of the few that read or write something other than
// the REST API's bodies, and on raw-JSON calls of the API (Client::CallJson) outside the client.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

// Files (relative to src/) that may use nlohmann::json, and what for: none of it is an API body.
const std::map<std::string, std::string>& JsonAllowed() {
  static const std::map<std::string, std::string> allowed = {
      {"agent/agent.cc", "bindings/<id>.json, the agent's own record of a binding"},
      {"agent/identity.cc", "identity.json, the node's own credentials"},
      {"agent/runtime/docker_api.h", "the Docker Engine API"},
      {"agent/runtime/docker_api.cc", "the Docker Engine API"},
      {"agent/runtime/docker_runtime.cc", "the Docker Engine API and the task's state.json"},
      {"agent/runtime/image_archive.h",
       "docker save / docker load archives and image configurations"},
      {"agent/runtime/image_archive.cc",
       "docker save / docker load archives and image configurations"},
      {"agent/runtime/docker_runtime.h", "the Docker Engine API (an image inspected)"},
      {"agent/runtime/process_runtime.cc", "the task's state.json"},
      {"api/client.h", "CallJson: raw JSON for tests and benchmarks that check the wire itself"},
      {"api/client.cc", "CallJson (see client.h)"},
      {"sim/compare.cc", "the simulator's --json reports"},
      {"sim/replay.cc", "the simulator's --json reports"},
      {"sim/report.cc", "the simulator's --json reports"},
      {"sim/report.h", "the simulator's --json reports"},
      {"store/record_json.cc", "the store's persisted records"},
  };
  return allowed;
}

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WireContract, ApiBodiesAreWrittenOnlyThroughProto) {
  const fs::path src = fs::path(GPUPOOL_SOURCE_DIR) / "src";
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc") continue;
    if (entry.path().stem().string().ends_with("_test")) continue;  // tests check the wire
    const std::string rel = fs::relative(entry.path(), src).string();
    if (rel.starts_with("proto/")) continue;
    ++files;
    const std::string text = Read(entry.path());
    const bool uses_json = text.find("nlohmann") != std::string::npos;
    if (uses_json) {
      EXPECT_TRUE(JsonAllowed().count(rel))
          << "src/" << rel << " uses nlohmann::json: API bodies go through src/proto's wire "
          << "types (api/resources.h on the client side); if this JSON is not an API body, add "
          << "the file to JsonAllowed() saying what it is";
    }
    if (!rel.starts_with("api/client.")) {
      EXPECT_EQ(text.find("CallJson("), std::string::npos)
          << "src/" << rel << " calls the API with raw JSON: use the typed client";
    }
  }
  EXPECT_GT(files, 100);
  // An entry for a file that no longer uses JSON is stale: keep the list honest.
  for (const auto& [rel, why] : JsonAllowed()) {
    const fs::path path = src / rel;
    EXPECT_TRUE(fs::exists(path) && Read(path).find("nlohmann") != std::string::npos)
        << "src/" << rel << " is listed as using JSON (" << why << ") but does not";
  }
}

}  // namespace
