#include "agent/process_checkpoint.h"

#include "agent/programs.h"
#include "core/result.h"

namespace gpupool::agent {

ProcessCheckpointSupport DetectProcessCheckpoint(bool real_gpus, const ProgramFinder& find) {
  const std::string criu = find("criu");
  if (criu.empty()) return {false, "criu is not installed"};
  if (Result<std::string> checked = RunTool({criu, "check"}); !checked) {
    std::string said = checked.error().message;
    if (const size_t eol = said.find('\n'); eol != std::string::npos) said.resize(eol);
    return {false, "`criu check` fails on this kernel: " + said};
  }
  if (real_gpus && find("cuda-checkpoint").empty()) {
    return {false, "cuda-checkpoint (NVIDIA, driver 550 or later) is not installed"};
  }
  return {true, ""};
}

}  // namespace gpupool::agent
