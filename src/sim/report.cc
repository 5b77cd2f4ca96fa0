// JSON and text rendering of FgdResult.
#include "sim/report.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace gpupool::sim {

std::string Fixed(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

nlohmann::json JsonOrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

namespace {

nlohmann::json CurveJson(const Curve& c) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& v : c) a.push_back(JsonOrNull(v));
  return a;
}

std::string At(const Curve& c, int bin) { return Fixed(c[static_cast<size_t>(bin)]); }

}  // namespace

std::string FgdResultJson(const FgdResult& r) {
  nlohmann::json j;
  j["policy"] = r.policy;
  j["arrivals"] = r.arrivals;
  j["failed"] = r.failed;
  j["alloc_pct"] = CurveJson(r.alloc_pct);
  j["frag_amount_pct"] = CurveJson(r.frag_amount_pct);
  j["frag_ratio_pct"] = CurveJson(r.frag_ratio_pct);
  j["elapsed_ms"] = r.elapsed_ms;
  j["idle"] = {{"free_gpus", r.idle.free_gpus},
               {"partial_milli", r.idle.partial_milli},
               {"share_gpus", r.idle.share_gpus},
               {"share_gpus_repacked", r.idle.share_gpus_repacked}};
  return j.dump();
}

std::string FgdResultText(const FgdResult& r) {
  std::string s = "policy " + r.policy + ": " + std::to_string(r.arrivals) + " arrivals, " +
                  std::to_string(r.failed) + " failed, " +
                  std::to_string(static_cast<int64_t>(r.elapsed_ms)) + " ms\n";
  s += "arrived %   alloc %   frag amount %   frag ratio %\n";
  for (int bin : {50, 90, 100, 110, 120, 130}) {
    char line[128];
    std::snprintf(line, sizeof line, "%9d   %7s   %13s   %12s\n", bin, At(r.alloc_pct, bin).c_str(),
                  At(r.frag_amount_pct, bin).c_str(), At(r.frag_ratio_pct, bin).c_str());
    s += line;
  }
  s += "idle at the end: " + std::to_string(r.idle.free_gpus) + " free GPUs, " +
       std::to_string(r.idle.partial_milli) + " milli on partly used GPUs; the shares on " +
       std::to_string(r.idle.share_gpus) + " GPUs fit on " +
       std::to_string(r.idle.share_gpus_repacked) + " repacked offline (best-fit decreasing)\n";
  return s;
}

}  // namespace gpupool::sim
