// Fuzzes the trace readers of sim/trace.h (the simulator's input, which users bring): the
// input's first byte picks the nodes CSV, the pods CSV, or the pods CSV followed by an arrival
// list (after the first "\n\n"); the readers get it as a file (a memfd) and must answer rows or
// an error, never crash. Every node read has its GPUs' models canonical and non-negative sizes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/gpu_catalog.h"
#include "fuzz/fuzz_check.h"
#include "sim/trace.h"

namespace {

// A file holding `text`, named by a path the readers can open; closed on destruction.
class MemFile {
 public:
  explicit MemFile(std::string_view text) : fd_(::memfd_create("trace", 0)) {
    size_t done = 0;
    while (fd_ >= 0 && done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupool;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      const MemFile file(text);
      if (auto nodes = sim::LoadNodesCsv(file.path())) {
        for (const Node& n : *nodes) {
          for (const Gpu& g : n.gpus) {
            FUZZ_CHECK(CanonicalGpuModelName(g.model) == g.model, g.model);
            FUZZ_CHECK(g.mem_mib >= 0, n.name);
          }
        }
      }
      break;
    }
    case 1: {
      const MemFile file(text);
      (void)sim::LoadPodsCsv(file.path());
      break;
    }
    default: {
      const size_t split = text.find("\n\n");
      const MemFile pods_file(text.substr(0, split));
      auto pods = sim::LoadPodsCsv(pods_file.path());
      if (pods && split != std::string_view::npos) {
        const MemFile arrivals_file(text.substr(split + 2));
        if (auto order = sim::LoadArrivals(arrivals_file.path(), *pods)) {
          for (const int i : *order) {
            FUZZ_CHECK(i >= 0 && static_cast<size_t>(i) < pods->size(), std::to_string(i));
          }
        }
      }
    }
  }
  return 0;
}
