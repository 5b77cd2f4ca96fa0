// Fuzzes the rules of task file paths (core/task_path.h), which decide what a tenant's upload,
// download or listing may touch: a valid path splits into components that join back to it and
// break no rule (none empty, ".", ".." or too long; not too deep); it is its own spelling from a
// user, also under the workspace's absolute path; whatever TaskPathFromUser accepts is valid;
// QuoteTaskPath leaves no control character in a message.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/task_path.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupool;
  const std::string_view path(reinterpret_cast<const char*>(data), size);
  if (ValidateTaskPath(path)) {
    const std::vector<std::string> parts = SplitTaskPath(path);
    FUZZ_CHECK(!parts.empty() && parts.size() <= kMaxTaskPathDepth, QuoteTaskPath(path));
    std::string joined;
    for (const std::string& part : parts) {
      FUZZ_CHECK(!part.empty() && part != "." && part != ".." &&
                     part.size() <= kMaxTaskPathComponentBytes &&
                     part.find('/') == std::string::npos,
                 QuoteTaskPath(path));
      joined += (joined.empty() ? "" : "/") + part;
    }
    FUZZ_CHECK(joined == path, QuoteTaskPath(path));
    auto from_user = TaskPathFromUser(path);
    FUZZ_CHECK(from_user.has_value() && *from_user == path, QuoteTaskPath(path));
    auto absolute = TaskPathFromUser(std::string(kTaskHome) + "/" + std::string(path));
    FUZZ_CHECK(absolute.has_value() && *absolute == path, QuoteTaskPath(path));
  }
  if (auto from_user = TaskPathFromUser(path); from_user && !from_user->empty()) {
    FUZZ_CHECK(ValidateTaskPath(*from_user).has_value(),
               QuoteTaskPath(path) + " -> " + QuoteTaskPath(*from_user));
  }
  for (const char c : QuoteTaskPath(path)) {
    const auto u = static_cast<unsigned char>(c);
    FUZZ_CHECK(u >= 0x20 && u != 0x7f, QuoteTaskPath(path));
  }
  return 0;
}
