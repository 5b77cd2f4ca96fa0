// Enforces the dependency rule of docs/architecture.md: a module under src/ may include only the
// modules its row allows. Fails with the file and the offending #include line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace {

// module -> modules it may include (itself always allowed). Mirrors the table in
// docs/architecture.md; change both together.
const std::map<std::string, std::set<std::string>>& Allowed() {
  static const std::map<std::string, std::set<std::string>> allowed = {
      {"core", {}},
      {"cudashim", {}},
      {"proto", {"core"}},
      {"os", {"core"}},
      {"sched", {"core"}},
      {"meter", {"core"}},
      {"store", {"core"}},
      {"server", {"core", "os", "proto", "sched", "meter", "store"}},
      {"api", {"core", "os", "proto", "server"}},
      {"console", {"core", "api"}},
      {"agent", {"core", "os", "proto", "api"}},
      {"sim", {"core", "sched", "meter", "store"}},
      {"cli",
       {"core", "os", "proto", "sched", "meter", "store", "server", "api", "agent", "sim", "cli"}},
      {"cmd",
       {"core", "os", "proto", "sched", "meter", "store", "server", "api", "console", "agent",
        "sim", "cli"}},
  };
  return allowed;
}

// Modules whose code must stay pure: no sockets, files, threads or system clock.
const std::set<std::string> kPure = {"core", "proto", "sched", "meter", "console"};
const std::set<std::string> kImpureHeaders = {
    "thread", "mutex", "chrono", "fstream", "filesystem", "sys/socket.h", "condition_variable"};

TEST(Layering, ModulesIncludeOnlyWhatTheDependencyRuleAllows) {
  const fs::path src = fs::path(GPUPOOL_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const std::regex include_re(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc") continue;
    const std::string module = fs::relative(entry.path(), src).begin()->string();
    const auto row = Allowed().find(module);
    ASSERT_NE(row, Allowed().end()) << "module '" << module << "' is missing from the table";
    const bool is_test = entry.path().stem().string().ends_with("_test");
    std::ifstream in(entry.path());
    std::string line;
    int line_no = 0;
    ++files;
    while (std::getline(in, line)) {
      ++line_no;
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      const std::string inc = m[1];
      const auto slash = inc.find('/');
      const std::string first = slash == std::string::npos ? "" : inc.substr(0, slash);
      if (Allowed().count(first) && first != module) {
        EXPECT_TRUE(row->second.count(first))
            << entry.path() << ":" << line_no << ": " << module << " may not include " << inc;
      }
      if (kPure.count(module) && !is_test) {
        EXPECT_FALSE(kImpureHeaders.count(inc)) << entry.path() << ":" << line_no << ": " << module
                                                << " must stay pure, includes " << inc;
      }
    }
  }
  EXPECT_GT(files, 5) << "no sources found under " << src;
}

}  // namespace
