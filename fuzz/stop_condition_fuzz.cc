// Fuzzes the stop-condition parser (core/stop_condition.h): a condition that parses has a
// canonical text that parses again to the same text, reads the same metric names, and evaluates
// and explains without failing over values the input chooses.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/stop_condition.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpupool;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<StopCondition> condition = ParseStopCondition(text);
  if (!condition) return 0;
  const std::string canonical = condition->ToString();
  Result<StopCondition> again = ParseStopCondition(canonical);
  FUZZ_CHECK(again.has_value(), canonical + " -> " + (again ? "" : again.error().message));
  FUZZ_CHECK(again->ToString() == canonical, canonical + " -> " + again->ToString());
  FUZZ_CHECK(again->Names() == condition->Names(), canonical);
  // Values for every other metric name, drawn from the input's bytes.
  MetricValues latest;
  for (size_t i = 0; i < condition->Names().size(); i += 2) {
    double v = 0;
    std::memcpy(&v, data + (i * 8) % (size >= 8 ? size - 7 : 1), size >= 8 ? 8 : 0);
    latest[condition->Names()[i]] = v;
  }
  const bool holds = condition->Evaluate(latest);
  FUZZ_CHECK(again->Evaluate(latest) == holds, canonical);
  (void)condition->Explain(latest);
  return 0;
}
