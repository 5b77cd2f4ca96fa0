// The interposer in real processes: cudashim_probe with libgpupool_cudashim.so preloaded over the
// fake driver (LD_LIBRARY_PATH=fake_driver), its entry points obtained by link-time binding,
// dlsym and both cuGetProcAddress (and cudashim_lookup, a program without the driver). Asserts the
// limit (the allocation that would pass it is CUDA_ERROR_OUT_OF_MEMORY = 2), the totals reported,
// frees returning quota (and a failed free returning none), the virtual-memory API, arrays, pitch
// padding, a malformed limit, a forked child, dlsym's answers, and two processes on one fake GPU
// each held to its own limit.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace {

constexpr uint64_t kGi = uint64_t{1} << 30;
constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr uint64_t kFakeDeviceBytes = 16 * kGi;  // fake_libcuda.cc

struct ProbeOptions {
  bool preload = true;
  std::optional<std::string> limit;  // GPUPOOL_GPU_MEM_LIMIT_BYTES; nullopt: unset
  std::string state_file;            // GPUPOOL_FAKE_CUDA_STATE: a fake GPU shared between processes
  std::string program = CUDASHIM_PROBE;
};

ProbeOptions Unlimited(bool preload, const std::string& state_file = "") {
  ProbeOptions options;
  options.preload = preload;
  options.state_file = state_file;
  return options;
}

ProbeOptions WithLimit(const std::string& limit, bool preload = true,
                       const std::string& state_file = "") {
  ProbeOptions options = Unlimited(preload, state_file);
  options.limit = limit;
  return options;
}

// One run of the probe; stdin stays open until CloseStdin (the probe's `wait`).
class Probe {
 public:
  Probe(const ProbeOptions& options, const std::vector<std::string>& args) {
    std::vector<std::string> env = {std::string("LD_LIBRARY_PATH=") + CUDASHIM_FAKE_DRIVER_DIR};
    if (options.preload) env.push_back(std::string("LD_PRELOAD=") + CUDASHIM_LIBRARY);
    if (options.limit) env.push_back("GPUPOOL_GPU_MEM_LIMIT_BYTES=" + *options.limit);
    if (!options.state_file.empty()) env.push_back("GPUPOOL_FAKE_CUDA_STATE=" + options.state_file);
    std::vector<std::string> argv = {options.program};
    argv.insert(argv.end(), args.begin(), args.end());

    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    stderr_path_ =
        std::filesystem::temp_directory_path() /
        ("cudashim_test_stderr." + std::to_string(getpid()) + "." + std::to_string(counter_++));
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    std::vector<char*> cargv, cenv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env) cenv.push_back(e.data());
    cenv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, cargv[0], &actions, nullptr, cargv.data(), cenv.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    stdout_ = fdopen(out[0], "r");
  }
  ~Probe() {
    CloseStdin();
    if (pid_ > 0) Finish();
    if (stdout_ != nullptr) fclose(stdout_);
    std::filesystem::remove(stderr_path_);
  }

  // The next line of output ("" at its end).
  std::string Line() {
    char buffer[512];
    if (stdout_ == nullptr || fgets(buffer, sizeof buffer, stdout_) == nullptr) return "";
    std::string line = buffer;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    lines_.push_back(line);
    return line;
  }

  void CloseStdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }

  // Waits for the exit; every line printed, in order.
  std::vector<std::string> Finish() {
    CloseStdin();
    while (!Line().empty()) {
    }
    int status = 0;
    EXPECT_EQ(waitpid(pid_, &status, 0), pid_);
    pid_ = -1;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "probe failed: " << Stderr();
    return lines_;
  }

  std::string Stderr() const {
    std::ifstream in(stderr_path_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  static inline int counter_ = 0;
  pid_t pid_ = -1;
  int stdin_ = -1;
  FILE* stdout_ = nullptr;
  std::filesystem::path stderr_path_;
  std::vector<std::string> lines_;
};

std::vector<std::string> RunProbe(const ProbeOptions& options, const std::vector<std::string>& args,
                                  std::string* err = nullptr) {
  Probe probe(options, args);
  std::vector<std::string> lines = probe.Finish();
  if (err != nullptr) *err = probe.Stderr();
  return lines;
}

std::string N(uint64_t n) { return std::to_string(n); }

std::string Info(uint64_t free, uint64_t total) { return "info 0 " + N(free) + " " + N(total); }

// A fake GPU shared by the processes of one test.
class SharedState {
 public:
  SharedState()
      : path_(std::filesystem::temp_directory_path() /
              ("cudashim_test_gpu." + std::to_string(getpid()))) {
    std::filesystem::remove(path_);
  }
  ~SharedState() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

using Lines = std::vector<std::string>;

class EveryLookup : public testing::TestWithParam<const char*> {};

TEST_P(EveryLookup, TheLimitHoldsFreesReturnQuotaAndTheTotalIsTheReservation) {
  const std::string limit = N(kGi);
  const Lines lines =
      RunProbe(WithLimit(limit),
               {GetParam(),  "alloc", "512Mi", "alloc", "512Mi",   "alloc", "1",          //
                "info",      "total", "0",                                                //
                "free",      "#0",    "async", "256Mi", "managed", "256Mi", "pool", "1",  //
                "freeasync", "#2",    "pool",  "256Mi", "info",                           //
                "free",      "#1",    "free",  "#3",    "free",    "#4",    "info"});
  EXPECT_EQ(lines, (Lines{"alloc 0 #0", "alloc 0 #1", "alloc 2",  // 1 byte past the limit
                          Info(0, kGi), "total 0 " + N(kGi),      //
                          "free 0", "async 0 #2", "managed 0 #3", "pool 2", "freeasync 0",
                          "pool 0 #4", Info(0, kGi),  //
                          "free 0", "free 0", "free 0", Info(kGi, kGi)}));
}

INSTANTIATE_TEST_SUITE_P(Cudashim, EveryLookup,
                         testing::Values("link", "dlsym", "proc", "proc-ptsz", "proc-v1"),
                         [](const testing::TestParamInfo<const char*>& param) {
                           std::string name = param.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

TEST(Cudashim, AFailedFreeReturnsNothing) {
  const std::string limit = N(kGi);
  const Lines lines = RunProbe(WithLimit(limit), {"link", "alloc", "1Gi", "free", "#0", "free",
                                                  "#0", "alloc", "1Gi", "alloc", "1"});
  // The second free is the driver's CUDA_ERROR_INVALID_VALUE (1), and counts nothing back.
  EXPECT_EQ(lines, (Lines{"alloc 0 #0", "free 0", "free 1", "alloc 0 #1", "alloc 2"}));
}

TEST(Cudashim, AForkedChildHoldsNothingOfItsParents) {
  const std::string limit = N(kGi);
  const Lines lines =
      RunProbe(WithLimit(limit), {"link", "alloc", "1Gi", "fork", "1Gi", "alloc", "1"});
  EXPECT_EQ(lines, (Lines{"alloc 0 #0", "fork 0", "alloc 2"}));
}

TEST(Cudashim, WithoutTheVariableNothingIsLimited) {
  const Lines lines =
      RunProbe(Unlimited(/*preload=*/true), {"proc", "alloc", "8Gi", "info", "total", "0"});
  EXPECT_EQ(lines, (Lines{"alloc 0 #0", Info(kFakeDeviceBytes - 8 * kGi, kFakeDeviceBytes),
                          "total 0 " + N(kFakeDeviceBytes)}));
}

TEST(Cudashim, WithoutTheShimTheLimitIsNotEnforced) {
  // What the tests above would see without the interposer: the fake driver gives everything.
  const std::string limit = N(kGi);
  const Lines lines = RunProbe(WithLimit(limit, /*preload=*/false), {"proc", "alloc", "2Gi"});
  EXPECT_EQ(lines, (Lines{"alloc 0 #0"}));
}

TEST(Cudashim, EachDeviceOrdinalHasItsOwnLimit) {
  const std::string limits = N(kGi) + "," + N(2 * kGi);
  const Lines lines =
      RunProbe(WithLimit(limits),
               {"proc", "total", "0", "total", "1", "device", "1", "alloc", "2Gi", "alloc", "1",
                "info", "device", "0", "alloc", "1Gi", "alloc", "1", "info"});
  EXPECT_EQ(lines, (Lines{"total 0 " + N(kGi), "total 0 " + N(2 * kGi), "device 0", "alloc 0 #0",
                          "alloc 2", Info(0, 2 * kGi), "device 0", "alloc 0 #1", "alloc 2",
                          Info(0, kGi)}));
}

TEST(Cudashim, VirtualMemoryCountsUntilReleasedAndUnmapped) {
  const std::string limit = N(kGi);
  for (const char* mode : {"link", "proc"}) {
    const Lines lines = RunProbe(
        WithLimit(limit), {mode, "vmm", "768Mi", "vmm", "512Mi", "map", "#0", "release", "#0",
                           "vmm", "512Mi",  // the released handle is still mapped: held
                           "unmap", "#0", "vmm", "512Mi", "info"});
    EXPECT_EQ(lines, (Lines{"vmm 0 #0", "vmm 2", "map 0", "release 0", "vmm 2", "unmap 0",
                            "vmm 0 #1", Info(512 * kMi, kGi)}))
        << mode;
  }
}

TEST(Cudashim, ARetainedHandleNeedsItsOwnRelease) {
  const std::string limit = N(kGi);
  const Lines lines =
      RunProbe(WithLimit(limit), {"dlsym", "vmm", "1Gi", "map", "#0", "retain", "#0", "release",
                                  "#0", "unmap", "#0", "vmm", "1",  // one reference left
                                  "release", "#0", "vmm", "1Gi"});
  EXPECT_EQ(lines, (Lines{"vmm 0 #0", "map 0", "retain 0", "release 0", "unmap 0", "vmm 2",
                          "release 0", "vmm 0 #1"}));
}

TEST(Cudashim, PitchedAllocationsCountTheirPadding) {
  // The fake driver pads rows to 512 bytes: 1000 × 1000 takes 1024 × 1000.
  const Lines refused = RunProbe(WithLimit("1000000"), {"link", "pitch", "1000", "1000", "info"});
  EXPECT_EQ(refused, (Lines{"pitch 2", Info(1000000, 1000000)}));
  const Lines admitted = RunProbe(WithLimit("1024000"),
                                  {"link", "pitch", "1000", "1000", "info", "free", "#0", "info"});
  EXPECT_EQ(admitted, (Lines{"pitch 0 #0", Info(0, 1024000), "free 0", Info(1024000, 1024000)}));
}

TEST(Cudashim, ArraysCountTheirData) {
  const std::string limit = N(kMi);
  const Lines lines =
      RunProbe(WithLimit(limit), {"proc",    "array",      "512", "256",  // 512 KiB of floats
                                  "array3d", "256",        "256", "2",    // 512 KiB
                                  "array",   "1",          "1",   "destroy", "#0",  //
                                  "mipmap",  "256",        "256", "2",              // 256 + 64 KiB
                                  "info",    "destroymip", "#2",  "destroy", "#1", "info"});
  EXPECT_EQ(lines, (Lines{"array 0 #0", "array3d 0 #1", "array 2", "destroy 0", "mipmap 0 #2",
                          Info(kMi - 512 * 1024 - 320 * 1024, kMi), "destroymip 0", "destroy 0",
                          Info(kMi, kMi)}));
}

TEST(Cudashim, AMalformedLimitRefusesEveryAllocation) {
  std::string err;
  const Lines lines =
      RunProbe(WithLimit("12abc"), {"link", "alloc", "1", "vmm", "2Mi", "info"}, &err);
  EXPECT_EQ(lines, (Lines{"alloc 2", "vmm 2", Info(0, 0)}));
  EXPECT_NE(err.find("gpupool-cudashim: GPUPOOL_GPU_MEM_LIMIT_BYTES='12abc' is not a "
                     "comma-separated list of byte counts; every GPU allocation is refused"),
            std::string::npos)
      << err;
}

TEST(Cudashim, TheFirstRefusalIsLoggedOnce) {
  std::string err;
  const Lines lines =
      RunProbe(WithLimit("1000"), {"link", "alloc", "600", "alloc", "600", "alloc", "700"}, &err);
  EXPECT_EQ(lines, (Lines{"alloc 0 #0", "alloc 2", "alloc 2"}));
  const std::string expected =
      "gpupool-cudashim: device 0: refused an allocation of 600 bytes: 600 of the 1000 bytes this "
      "process may hold (GPUPOOL_GPU_MEM_LIMIT_BYTES) are in use\n";
  EXPECT_EQ(err, expected);
}

TEST(Cudashim, TwoProcessesOnOneFakeGpuAreEachHeldToTheirOwnLimit) {
  SharedState gpu;
  const std::string one = N(kGi), two = N(2 * kGi);
  Probe first(WithLimit(one, true, gpu.path()),
              {"proc", "alloc", "1Gi", "alloc", "1", "wait", "info"});
  EXPECT_EQ(first.Line(), "alloc 0 #0");
  EXPECT_EQ(first.Line(), "alloc 2");
  ASSERT_EQ(first.Line(), "wait");  // holds its 1 GiB while the second runs
  const Lines second =
      RunProbe(WithLimit(two, true, gpu.path()), {"dlsym", "alloc", "2Gi", "alloc", "1", "info"});
  EXPECT_EQ(second, (Lines{"alloc 0 #0", "alloc 2", Info(0, 2 * kGi)}));
  const Lines rest = first.Finish();
  EXPECT_EQ(rest.back(), Info(0, kGi));  // untouched by its neighbour
}

TEST(Cudashim, WithoutLimitsOneProcessCanStarveItsNeighbour) {
  // The fake GPU really is shared: what the limits above prevent.
  SharedState gpu;
  Probe greedy(Unlimited(/*preload=*/false, gpu.path()), {"link", "alloc", "16Gi", "wait"});
  EXPECT_EQ(greedy.Line(), "alloc 0 #0");
  ASSERT_EQ(greedy.Line(), "wait");
  EXPECT_EQ(RunProbe(Unlimited(/*preload=*/false, gpu.path()), {"link", "alloc", "1Gi"}),
            (Lines{"alloc 2"}));
  greedy.Finish();
}

TEST(Cudashim, WithoutTheDriverTheWrappedNamesAreNotFound) {
  // A program probing for CUDA with dlsym(RTLD_DEFAULT) finds what it would without the shim:
  // nothing where no driver is loaded, the (wrapped) function where one is.
  ProbeOptions options = WithLimit(N(kGi));
  options.program = CUDASHIM_LOOKUP;
  EXPECT_EQ(RunProbe(options, {"cuMemAlloc_v2", "cuGetProcAddress_v2", "cuInit", "getpid"}),
            (Lines{"cuMemAlloc_v2 absent", "cuGetProcAddress_v2 absent", "cuInit absent",
                   "getpid found"}));
  EXPECT_EQ(RunProbe(options, {"--load", "cuMemAlloc_v2", "cuGetProcAddress_v2", "cuInit"}),
            (Lines{"cuMemAlloc_v2 found", "cuGetProcAddress_v2 found", "cuInit found"}));
}

TEST(Cudashim, DlsymRtldNextStillSearchesPastItsCaller) {
  // The probe's dlsym(RTLD_NEXT, "dlsym") must find the object after the probe (the shim), as
  // without a wrapper; a wrapper that answered for itself would find libc's.
  const std::string limit = N(kGi);
  const Lines lines = RunProbe(WithLimit(limit), {"link", "rtld_next"});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], std::string("rtld_next ") + CUDASHIM_LIBRARY);
}

}  // namespace
