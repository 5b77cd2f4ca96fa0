// CSV parsing for the trace files (see trace.h). Strict: a malformed row is an error that names
// the file, line and field, never a silently skipped task.
#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/gpu_catalog.h"

namespace gpupool::sim {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : line) {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur.push_back(c);
    }
  }
  out.push_back(cur);
  return out;
}

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Result<CsvTable> ReadCsv(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path);
  CsvTable t;
  std::string line;
  if (!std::getline(in, line)) return InvalidArgument(path + ": empty file");
  t.header = SplitCsvLine(line);
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    t.rows.push_back(SplitCsvLine(line));
  }
  return t;
}

Result<int> Column(const CsvTable& t, const std::string& path, const std::string& name) {
  for (size_t i = 0; i < t.header.size(); ++i) {
    if (t.header[i] == name) return static_cast<int>(i);
  }
  return InvalidArgument(path + ": missing column '" + name + "'");
}

Result<int64_t> Int(const std::string& path, size_t row, const std::string& field,
                    const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) {
    return InvalidArgument(path + ":" + std::to_string(row + 2) + ": " + field +
                           " must be an integer, got '" + s + "'");
  }
  return v;
}

}  // namespace

Result<int> QosPriority(const std::string& qos) {
  // Two levels above best effort leave room between them for classes a later trace may add.
  if (qos == "LS" || qos == "Guaranteed") return 200;
  if (qos == "Burstable") return 100;
  if (qos == "BE" || qos.empty()) return 0;
  return InvalidArgument("qos must be LS, Guaranteed, Burstable or BE, got '" + qos + "'");
}

Result<std::vector<Node>> LoadNodesCsv(const std::string& path) {
  auto t = ReadCsv(path);
  if (!t) return tl::unexpected(t.error());
  std::vector<int> cols;
  for (const char* name : {"sn", "cpu_milli", "memory_mib", "gpu", "model"}) {
    auto c = Column(*t, path, name);
    if (!c) return tl::unexpected(c.error());
    cols.push_back(*c);
  }
  std::vector<Node> nodes;
  nodes.reserve(t->rows.size());
  for (size_t r = 0; r < t->rows.size(); ++r) {
    const auto& row = t->rows[r];
    if (row.size() < t->header.size()) {
      return InvalidArgument(path + ":" + std::to_string(r + 2) + ": expected " +
                             std::to_string(t->header.size()) + " fields");
    }
    auto cpu = Int(path, r, "cpu_milli", row[cols[1]]);
    auto mem = Int(path, r, "memory_mib", row[cols[2]]);
    auto gpus = Int(path, r, "gpu", row[cols[3]]);
    if (!cpu) return tl::unexpected(cpu.error());
    if (!mem) return tl::unexpected(mem.error());
    if (!gpus) return tl::unexpected(gpus.error());
    if (*gpus < 0 || *gpus > 64) {
      return InvalidArgument(path + ":" + std::to_string(r + 2) + ": gpu must be 0..64, got " +
                             std::to_string(*gpus));
    }
    nodes.push_back(Node::Make(row[cols[0]], *cpu, *mem, static_cast<int>(*gpus), row[cols[4]]));
  }
  return nodes;
}

Result<std::vector<TracePod>> LoadPodsCsv(const std::string& path) {
  auto t = ReadCsv(path);
  if (!t) return tl::unexpected(t.error());
  std::vector<int> cols;
  for (const char* name : {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}) {
    auto c = Column(*t, path, name);
    if (!c) return tl::unexpected(c.error());
    cols.push_back(*c);
  }
  auto optional_col = [&](const char* name) {
    auto c = Column(*t, path, name);
    return c ? *c : -1;
  };
  const int spec_col = optional_col("gpu_spec");
  const int creation_col = optional_col("creation_time");
  const int deletion_col = optional_col("deletion_time");
  const int scheduled_col = optional_col("scheduled_time");
  const int qos_col = optional_col("qos");
  const int priority_col = optional_col("priority");

  std::vector<TracePod> pods;
  pods.reserve(t->rows.size());
  for (size_t r = 0; r < t->rows.size(); ++r) {
    const auto& row = t->rows[r];
    if (row.size() < t->header.size()) {
      return InvalidArgument(path + ":" + std::to_string(r + 2) + ": expected " +
                             std::to_string(t->header.size()) + " fields");
    }
    TracePod p;
    p.name = row[cols[0]];
    auto cpu = Int(path, r, "cpu_milli", row[cols[1]]);
    auto mem = Int(path, r, "memory_mib", row[cols[2]]);
    auto num_gpu = Int(path, r, "num_gpu", row[cols[3]]);
    auto milli = Int(path, r, "gpu_milli", row[cols[4]]);
    for (auto* v : {&cpu, &mem, &num_gpu, &milli}) {
      if (!*v) return tl::unexpected(v->error());
    }
    p.request.cpu_milli = *cpu;
    p.request.memory_mib = *mem;
    const int64_t gpu_milli = std::min<int64_t>(*milli, kMilliPerGpu);
    if (*num_gpu == 1 && gpu_milli > 0 && gpu_milli < kMilliPerGpu) {
      p.request.gpu_milli = static_cast<int32_t>(gpu_milli);
    } else {
      p.request.gpu_count = static_cast<int>(*num_gpu);
    }
    if (spec_col >= 0 && !row[spec_col].empty()) {
      std::stringstream ss(row[spec_col]);
      std::string model;
      while (std::getline(ss, model, '|')) {
        if (!model.empty()) p.request.gpu_models.push_back(CanonicalGpuModelName(model));
      }
    }
    auto time_at = [&](int col, const char* field) -> Result<int64_t> {
      if (col < 0 || row[col].empty()) return int64_t{-1};
      return Int(path, r, field, row[col]);
    };
    auto c = time_at(creation_col, "creation_time");
    auto d = time_at(deletion_col, "deletion_time");
    auto s = time_at(scheduled_col, "scheduled_time");
    for (auto* v : {&c, &d, &s}) {
      if (!*v) return tl::unexpected(v->error());
    }
    p.creation_s = *c;
    p.deletion_s = *d;
    p.scheduled_s = *s;
    if (priority_col >= 0 && !row[priority_col].empty()) {
      auto prio = Int(path, r, "priority", row[priority_col]);
      if (!prio) return tl::unexpected(prio.error());
      if (*prio < kMinPriority || *prio > kMaxPriority) {
        return InvalidArgument(path + ":" + std::to_string(r + 2) +
                               ": priority must be 0..1000, got " + std::to_string(*prio));
      }
      p.priority = static_cast<int>(*prio);
    } else if (qos_col >= 0) {
      auto prio = QosPriority(row[qos_col]);
      if (!prio) {
        return InvalidArgument(path + ":" + std::to_string(r + 2) + ": " + prio.error().message);
      }
      p.priority = *prio;
    }
    if (auto ok = Validate(p.request); !ok) {
      return InvalidArgument(path + ":" + std::to_string(r + 2) + ": " + ok.error().message);
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

Result<std::vector<int>> LoadArrivals(const std::string& path, const std::vector<TracePod>& pods) {
  std::unordered_map<std::string, int> by_name;
  for (size_t i = 0; i < pods.size(); ++i) by_name.emplace(pods[i].name, static_cast<int>(i));
  std::ifstream in(path);
  if (!in) return NotFound("cannot open " + path);
  std::vector<int> order;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::string base = line;
    if (auto pos = line.find("-tuned-"); pos != std::string::npos) base = line.substr(0, pos);
    auto it = by_name.find(base);
    if (it == by_name.end()) {
      return InvalidArgument(path + ":" + std::to_string(line_no) + ": unknown pod '" + line + "'");
    }
    order.push_back(it->second);
  }
  return order;
}

}  // namespace gpupool::sim
