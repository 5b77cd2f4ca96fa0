// Strict JSON parsing of request bodies and JSON rendering of the records (see json_mapping.h).
#include "api/json_mapping.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "core/gpu_catalog.h"
#include "core/mig.h"
#include "core/stop_condition.h"
#include "core/task.h"

namespace gpupool::api {
namespace {

constexpr size_t kMaxIdentifierBytes = 128;

struct DuplicateKey {
  std::string key;
};
struct TooDeep {};

bool IsIdentifierChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

std::string RangeMessage(const std::string& name, int64_t min, int64_t max, int64_t type_min,
                         int64_t type_max, int64_t got) {
  std::string range;
  if (max == type_max) {
    range = ">= " + std::to_string(min);
  } else if (min == type_min) {
    range = "<= " + std::to_string(max);
  } else {
    range = std::to_string(min) + ".." + std::to_string(max);
  }
  return name + " must be " + range + ", got " + std::to_string(got);
}

std::string MigProfileName(const std::string& model, int profile) {
  const GpuModelInfo* info = FindGpuModel(model);
  if (info != nullptr && profile >= 0 && profile < static_cast<int>(info->mig_profiles.size())) {
    return info->mig_profiles[static_cast<size_t>(profile)].name;
  }
  return "#" + std::to_string(profile);
}

template <typename T>
Result<T> Finish(const FieldReader& r, T value) {
  if (!r.ok()) return tl::unexpected(r.error());
  return value;
}

}  // namespace

Result<Json> ParseJsonObject(std::string_view body, bool required, std::string_view what) {
  if (body.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    if (required) return InvalidArgument(std::string(what) + " is empty; expected a JSON object");
    return Json::object();
  }
  // Keys seen per open object, to reject a key given twice (the parser would keep the last).
  std::vector<std::vector<std::string>> keys;
  int depth = 0;
  const Json::parser_callback_t check = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth > kMaxJsonDepth) throw TooDeep{};
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        --depth;
        keys.pop_back();
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        std::vector<std::string>& seen = keys.back();
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) throw DuplicateKey{key};
        seen.push_back(key);
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  Json value;
  try {
    value = Json::parse(body.begin(), body.end(), check);
  } catch (const DuplicateKey& e) {
    return InvalidArgument(std::string(what) + " has the key '" + e.key + "' twice in one object");
  } catch (const TooDeep&) {
    return InvalidArgument(std::string(what) + " nests deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: …" or
    // "[json.exception.out_of_range.406] number overflow parsing '1e999'", without the tag.
    std::string message = e.what();
    const size_t tag_end = message.find("] ");
    if (message.rfind("[json.exception.", 0) == 0 && tag_end != std::string::npos) {
      message.erase(0, tag_end + 2);
    }
    return InvalidArgument(std::string(what) + " is not valid JSON: " + message);
  }
  if (!value.is_object()) {
    return InvalidArgument(std::string(what) + " must be a JSON object, got " +
                           value.type_name());
  }
  return value;
}

// ------------------------------------------------------------------------------------------
// FieldReader

FieldReader::FieldReader(const Json& object, std::string where)
    : object_(object), where_(std::move(where)) {}

void FieldReader::Fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  error_ = Error{ErrorCode::kInvalidArgument, std::move(message)};
}

FieldReader& FieldReader::Allow(std::initializer_list<std::string_view> allowed) {
  if (failed_) return *this;
  for (const auto& item : object_.items()) {
    if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
      Fail("unknown field '" + Name(item.key()) + "'");
      break;
    }
  }
  return *this;
}

FieldReader& FieldReader::RequireOneOf(std::initializer_list<std::string_view> names) {
  if (failed_) return *this;
  for (std::string_view n : names) {
    if (Has(n)) return *this;
  }
  std::string list;
  for (std::string_view n : names) {
    if (!list.empty()) list += " or ";
    list += Name(n);
  }
  Fail(list + " is required");
  return *this;
}

bool FieldReader::Has(std::string_view name) const { return object_.find(name) != object_.end(); }

const Json* FieldReader::Find(std::string_view name, bool required) {
  if (failed_) return nullptr;
  const auto it = object_.find(name);
  if (it == object_.end()) {
    if (required) Fail(Name(name) + " is required");
    return nullptr;
  }
  return &*it;
}

bool FieldReader::Int64Of(std::string_view name, const Json& v, int64_t min, int64_t max,
                          int64_t* out) {
  const std::string field = Name(name);
  const int bits = max > std::numeric_limits<int32_t>::max() ? 64 : 32;
  const std::string out_of_range =
      field + " is out of range for a " + std::to_string(bits) + "-bit integer, got ";
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail(out_of_range + v.dump());
      return false;
    }
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // Integer literals beyond 64 bits arrive as doubles.
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) >= 9.2e18) {
      Fail(out_of_range + v.dump());
    } else {
      Fail(field + " must be an integer, got number " + v.dump());
    }
    return false;
  } else {
    Fail(field + " must be an integer, got " + v.type_name());
    return false;
  }
  if (x < min || x > max) {
    Fail(out_of_range + std::to_string(x));
    return false;
  }
  *out = x;
  return true;
}

template <typename T>
void FieldReader::Int(std::string_view name, T* out, bool required, int64_t min, int64_t max) {
  const Json* v = Find(name, required);
  if (v == nullptr) return;
  constexpr int64_t kTypeMin = std::numeric_limits<T>::min();
  constexpr int64_t kTypeMax = std::numeric_limits<T>::max();
  int64_t x = 0;
  if (!Int64Of(name, *v, kTypeMin, kTypeMax, &x)) return;
  if (x < min || x > max) {
    Fail(RangeMessage(Name(name), min, max, kTypeMin, kTypeMax, x));
    return;
  }
  *out = static_cast<T>(x);
}

template void FieldReader::Int<int32_t>(std::string_view, int32_t*, bool, int64_t, int64_t);
template void FieldReader::Int<int64_t>(std::string_view, int64_t*, bool, int64_t, int64_t);

void FieldReader::String(std::string_view name, std::string* out, bool required, size_t max_bytes) {
  const Json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_string()) {
    Fail(Name(name) + " must be a string, got " + v->type_name());
    return;
  }
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) {
    Fail(Name(name) + " is longer than " + std::to_string(max_bytes) + " bytes (" +
         std::to_string(s.size()) + ")");
    return;
  }
  *out = s;
}

void FieldReader::Bool(std::string_view name, bool* out, bool required) {
  const Json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_boolean()) {
    Fail(Name(name) + " must be a boolean, got " + v->type_name());
    return;
  }
  *out = v->get<bool>();
}

void FieldReader::StringArray(std::string_view name, std::vector<std::string>* out, bool required,
                              size_t max_items, size_t max_bytes) {
  const Json* v = Find(name, required);
  if (v == nullptr) return;
  if (!v->is_array()) {
    Fail(Name(name) + " must be an array of strings, got " + v->type_name());
    return;
  }
  if (v->size() > max_items) {
    Fail(Name(name) + " has more than " + std::to_string(max_items) + " items (" +
         std::to_string(v->size()) + ")");
    return;
  }
  std::vector<std::string> items;
  items.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& item = (*v)[i];
    const std::string at = Name(name) + "[" + std::to_string(i) + "]";
    if (!item.is_string()) {
      Fail(at + " must be a string, got " + item.type_name());
      return;
    }
    if (item.get_ref<const std::string&>().size() > max_bytes) {
      Fail(at + " is longer than " + std::to_string(max_bytes) + " bytes");
      return;
    }
    items.push_back(item.get<std::string>());
  }
  *out = std::move(items);
}

void FieldReader::Identifier(std::string_view name, std::string* out, bool required) {
  std::string value;
  const bool had = Has(name);
  String(name, &value, required, kMaxIdentifierBytes);
  if (failed_ || !had) return;
  if (value.empty() || !std::all_of(value.begin(), value.end(), IsIdentifierChar)) {
    Fail(Name(name) + " must be 1..128 characters of A-Z a-z 0-9 - _ ., got '" + value + "'");
    return;
  }
  *out = std::move(value);
}

const Json* FieldReader::Object(std::string_view name, bool required) {
  const Json* v = Find(name, required);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    Fail(Name(name) + " must be an object, got " + v->type_name());
    return nullptr;
  }
  return v;
}

const Json* FieldReader::Array(std::string_view name, bool required) {
  const Json* v = Find(name, required);
  if (v == nullptr) return nullptr;
  if (!v->is_array()) {
    Fail(Name(name) + " must be an array, got " + v->type_name());
    return nullptr;
  }
  return v;
}

// ------------------------------------------------------------------------------------------
// Request bodies

Result<server::TaskSpec> ParseTaskSpec(const Json& body) {
  server::TaskSpec spec;
  TaskRequest& req = spec.request;
  FieldReader r(body);
  r.Allow({"name", "project", "cpu_milli", "memory_mib", "gpu_count", "gpu_milli", "gpu_mem_mib",
           "mig_profile", "gpu_models", "priority", "gang_id", "gang_size", "image", "command",
           "disk_gib", "max_runtime_ms", "stop_when", "restartable", "hold"});
  r.RequireOneOf({"command", "image"});
  r.String("name", &spec.name, false, 256);
  r.Identifier("project", &spec.project_id);
  r.Int("cpu_milli", &req.cpu_milli);
  r.Int("memory_mib", &req.memory_mib);
  r.Int("gpu_count", &req.gpu_count);
  r.Int("gpu_milli", &req.gpu_milli);
  r.Int("gpu_mem_mib", &req.gpu_mem_mib);
  r.String("mig_profile", &req.mig_profile, false, 64);
  r.StringArray("gpu_models", &req.gpu_models, false, 64, 128);
  r.Int("priority", &req.priority);
  r.String("gang_id", &req.gang_id, false, 256);
  r.Int("gang_size", &req.gang_size);
  r.String("image", &spec.image, false, 1024);
  r.StringArray("command", &spec.command, false, 4096, 64 * 1024);
  r.Int("disk_gib", &spec.disk_gib, false, 0);
  r.Int("max_runtime_ms", &spec.max_runtime_ms, false, 0);
  r.String("stop_when", &spec.stop_when, false, 1024);
  r.Bool("restartable", &spec.restartable);
  r.Bool("hold", &spec.hold);
  if (!r.ok()) return tl::unexpected(r.error());
  if (r.Has("command") && spec.command.empty() && spec.image.empty()) {
    return InvalidArgument("command must not be empty when no image is given");
  }
  for (std::string& model : req.gpu_models) model = CanonicalGpuModelName(model);
  if (Status valid = Validate(req); !valid) return tl::unexpected(valid.error());
  if (!spec.stop_when.empty()) {
    // Refused here with the column; stored in its canonical form.
    Result<StopCondition> condition = ParseStopCondition(spec.stop_when);
    if (!condition) return tl::unexpected(condition.error());
    spec.stop_when = condition->ToString();
  }
  return spec;
}

Result<Node> ParseNodeRegistration(const Json& body) {
  Node node;
  FieldReader r(body);
  r.Allow({"name", "cpu_milli", "memory_mib", "disk_gib", "gpus", "labels"});
  r.Identifier("name", &node.name, true);
  r.Int("cpu_milli", &node.cpu_milli, true, 1);
  r.Int("memory_mib", &node.memory_mib, true, 1);
  r.Int("disk_gib", &node.disk_gib, false, 0);
  const Json* gpus = r.Array("gpus");
  const Json* labels = r.Object("labels");
  if (!r.ok()) return tl::unexpected(r.error());
  node.cpu_free_milli = node.cpu_milli;
  node.memory_free_mib = node.memory_mib;

  if (gpus != nullptr) {
    if (gpus->size() > 64) return InvalidArgument("gpus has more than 64 items");
    for (size_t i = 0; i < gpus->size(); ++i) {
      const std::string at = "gpus[" + std::to_string(i) + "]";
      const Json& g = (*gpus)[i];
      if (!g.is_object()) {
        return InvalidArgument(at + " must be an object, got " + g.type_name());
      }
      Gpu gpu;
      FieldReader gr(g, at + ".");
      gr.Allow({"model", "uuid", "mem_mib", "mig_enabled", "mig_instances"});
      gr.String("model", &gpu.model, true, 128);
      gr.String("uuid", &gpu.uuid, false, 128);
      gr.Int("mem_mib", &gpu.mem_mib, false, 0);
      gr.Bool("mig_enabled", &gpu.mig_enabled);
      const Json* instances = gr.Array("mig_instances");
      if (!gr.ok()) return tl::unexpected(gr.error());
      if (gpu.model.empty()) return InvalidArgument(at + ".model must not be empty");
      gpu.model = CanonicalGpuModelName(gpu.model);
      const GpuModelInfo* model = FindGpuModel(gpu.model);
      if (gpu.mem_mib == 0 && model != nullptr) gpu.mem_mib = model->mem_mib;
      gpu.mem_free_mib = gpu.mem_mib;
      if (gpu.mig_enabled && (model == nullptr || !model->MigCapable())) {
        return InvalidArgument(at + ".mig_enabled: " + gpu.model + " is not MIG-capable");
      }
      if (instances != nullptr && !instances->empty()) {
        if (!gpu.mig_enabled) {
          return InvalidArgument(at + ".mig_instances requires mig_enabled: true");
        }
        uint32_t occupied = 0;
        std::vector<int> per_profile(model->mig_profiles.size(), 0);
        for (size_t j = 0; j < instances->size(); ++j) {
          const std::string iat = at + ".mig_instances[" + std::to_string(j) + "]";
          const Json& inst = (*instances)[j];
          if (!inst.is_object()) {
            return InvalidArgument(iat + " must be an object, got " + inst.type_name());
          }
          std::string profile_name;
          int32_t start = 0;
          FieldReader ir(inst, iat + ".");
          ir.Allow({"profile", "start"});
          ir.String("profile", &profile_name, true, 64);
          ir.Int("start", &start, true, 0, 63);
          if (!ir.ok()) return tl::unexpected(ir.error());
          const int profile = model->ProfileIndex(profile_name);
          if (profile < 0) {
            return InvalidArgument(iat + ".profile '" + profile_name +
                                   "' is not a MIG profile of " + model->name);
          }
          const MigProfile& p = model->mig_profiles[static_cast<size_t>(profile)];
          if (!MigStartLegal(*model, profile, start, occupied,
                             per_profile[static_cast<size_t>(profile)])) {
            return InvalidArgument(iat + ": " + p.name + " cannot start at slot " +
                                   std::to_string(start) +
                                   " (not a legal start, overlaps another instance, or too many "
                                   "instances of the profile)");
          }
          occupied |= ((1u << p.memory_slices) - 1u) << start;
          ++per_profile[static_cast<size_t>(profile)];
          gpu.mig_instances.push_back(MigInstance{profile, start, false});
        }
      }
      node.gpus.push_back(std::move(gpu));
    }
  }
  if (labels != nullptr) {
    if (labels->size() > 256) return InvalidArgument("labels has more than 256 entries");
    for (const auto& item : labels->items()) {
      if (!item.value().is_string()) {
        return InvalidArgument("labels." + item.key() + " must be a string, got " +
                               item.value().type_name());
      }
      if (item.key().empty() || item.key().size() > 256 ||
          item.value().get_ref<const std::string&>().size() > 1024) {
        return InvalidArgument("labels." + item.key() +
                               ": keys are 1..256 bytes and values at most 1024");
      }
      node.labels[item.key()] = item.value().get<std::string>();
    }
  }
  return node;
}

namespace {

void ReadProjectFields(FieldReader& r, Project* p) {
  r.String("name", &p->name, false, 256);
  r.Int("max_gpu_milli", &p->max_gpu_milli, false, -1);
  r.Int("max_tasks", &p->max_tasks, false, -1);
  r.Int("stop_grace_ms", &p->stop_grace_ms, false, 0);
}

}  // namespace

Result<Project> ParseNewProject(const Json& body) {
  Project p;
  FieldReader r(body);
  r.Allow({"id", "name", "max_gpu_milli", "max_tasks", "stop_grace_ms"});
  r.Identifier("id", &p.id, true);
  const bool named = r.Has("name");
  ReadProjectFields(r, &p);
  if (r.ok() && named && p.name.empty()) r.Fail("name must not be empty");
  if (!named) p.name = p.id;  // optional: the id is a fine name
  return Finish(r, std::move(p));
}

Status ApplyProjectPatch(const Json& body, Project* project) {
  FieldReader r(body);
  r.Allow({"name", "max_gpu_milli", "max_tasks", "stop_grace_ms"});
  r.RequireOneOf({"name", "max_gpu_milli", "max_tasks", "stop_grace_ms"});
  Project updated = *project;
  ReadProjectFields(r, &updated);
  if (r.ok() && r.Has("name") && updated.name.empty()) r.Fail("name must not be empty");
  if (!r.ok()) return tl::unexpected(r.error());
  *project = std::move(updated);
  return {};
}

namespace {

void ReadUserFields(FieldReader& r, User* u) {
  std::string role;
  const bool has_role = r.Has("role");
  r.String("role", &role, false, 32);
  if (r.ok() && has_role) {
    const std::optional<Role> parsed = ParseRole(role);
    if (!parsed) {
      r.Fail("role must be admin or member, got '" + role + "'");
    } else {
      u->role = *parsed;
    }
  }
  const bool has_projects = r.Has("projects");
  std::vector<std::string> projects;
  r.StringArray("projects", &projects, false, 1024, kMaxIdentifierBytes);
  if (r.ok() && has_projects) {
    for (size_t i = 0; i < projects.size(); ++i) {
      const std::string& p = projects[i];
      if (p.empty() || !std::all_of(p.begin(), p.end(), IsIdentifierChar)) {
        r.Fail("projects[" + std::to_string(i) + "] must be a project id, got '" + p + "'");
        return;
      }
    }
    u->projects = std::move(projects);
  }
}

}  // namespace

Result<User> ParseNewUser(const Json& body) {
  User u;
  FieldReader r(body);
  r.Allow({"id", "name", "role", "projects"});
  r.Identifier("id", &u.id, true);
  const bool named = r.Has("name");
  r.String("name", &u.name, false, 256);
  if (r.ok() && named && u.name.empty()) r.Fail("name must not be empty");
  if (!named) u.name = u.id;  // optional: the id is a fine name
  ReadUserFields(r, &u);
  return Finish(r, std::move(u));
}

Status ApplyUserPatch(const Json& body, User* user) {
  FieldReader r(body);
  r.Allow({"role", "projects"});
  r.RequireOneOf({"role", "projects"});
  User updated = *user;
  ReadUserFields(r, &updated);
  if (!r.ok()) return tl::unexpected(r.error());
  *user = std::move(updated);
  return {};
}

Result<Price> ParsePrice(const Json& body, int64_t now_ms) {
  Price p;
  p.effective_ms = now_ms;
  FieldReader r(body);
  r.Allow({"resource", "micros_per_hour", "effective_ms"});
  r.String("resource", &p.resource, true, 256);
  r.Int("micros_per_hour", &p.micros_per_hour, true, 0);
  r.Int("effective_ms", &p.effective_ms, false, 0);
  if (!r.ok()) return tl::unexpected(r.error());
  const std::string& res = p.resource;
  const bool known =
      res == "cpu" || res == "memory" || (res.rfind("gpu:", 0) == 0 && res.size() > 4);
  if (!known) {
    return InvalidArgument("resource must be cpu, memory, gpu:<model> or gpu:*, got '" + res + "'");
  }
  if (res.rfind("gpu:", 0) == 0 && res != "gpu:*") {
    p.resource = "gpu:" + CanonicalGpuModelName(res.substr(4));
  }
  return p;
}

Result<CreditRequest> ParseCredit(const Json& body) {
  CreditRequest c;
  FieldReader r(body);
  r.Allow({"amount_micros", "note"});
  r.Int("amount_micros", &c.amount_micros, true, 1);
  r.String("note", &c.note, false, 1024);
  return Finish(r, std::move(c));
}

Result<TaskReport> ParseTaskReport(const Json& body, int64_t now_ms) {
  TaskReport t;
  t.time_ms = now_ms;
  std::string state;
  FieldReader r(body);
  r.Allow({"state", "time_ms", "exit_code", "reason", "bound_ms"});
  r.String("state", &state, true, 32);
  r.Int("time_ms", &t.time_ms, false, 0);
  r.Int("exit_code", &t.exit_code);
  r.String("reason", &t.reason, false, 4096);
  r.Int("bound_ms", &t.bound_ms, false, 0);
  if (!r.ok()) return tl::unexpected(r.error());
  const std::optional<TaskState> parsed = ParseTaskState(state);
  if (!parsed) return InvalidArgument("state '" + state + "' is not a task state");
  t.state = *parsed;
  return t;
}

Result<std::string> ParseKeyDescription(const Json& body) {
  std::string description;
  FieldReader r(body);
  r.Allow({"description"});
  r.String("description", &description, false, 1024);
  return Finish(r, std::move(description));
}

Status ParseEmptyBody(const Json& body) {
  FieldReader r(body);
  r.Allow({});
  if (!r.ok()) return tl::unexpected(r.error());
  return {};
}

// ------------------------------------------------------------------------------------------
// Rendering

Json ToJson(const Task& t) {
  const TaskRequest& q = t.request;
  Json j = {
      {"id", t.id},
      {"seq", t.seq},
      {"project", t.project_id},
      {"user", t.user_id},
      {"name", t.name},
      {"state", TaskStateName(t.state)},
      {"reason", t.reason},
      {"cpu_milli", q.cpu_milli},
      {"memory_mib", q.memory_mib},
      {"gpu_count", q.gpu_count},
      {"gpu_milli", q.gpu_milli},
      {"gpu_mem_mib", q.gpu_mem_mib},
      {"mig_profile", q.mig_profile},
      {"gpu_models", q.gpu_models},
      {"priority", q.priority},
      {"gang_id", q.gang_id},
      {"gang_size", q.gang_size},
      {"image", t.image},
      {"command", t.command},
      {"disk_gib", t.disk_gib},
      {"max_runtime_ms", t.max_runtime_ms},
      {"stop_when", t.stop_when},
      {"restartable", t.restartable},
      {"held", t.held},
      {"created_ms", t.created_ms},
      {"updated_ms", t.updated_ms},
      {"bound_ms", t.bound_ms},
      {"started_ms", t.started_ms},
      {"finished_ms", t.finished_ms},
      {"billed_until_ms", t.billed_until_ms},
      {"exit_code", t.exit_code},
      {"preemptions", t.preemptions},
  };
  if (t.placement) {
    const TaskPlacement& p = *t.placement;
    j["placement"] = {
        {"node", p.node},
        {"gpus", p.gpus},
        {"milli_per_gpu", p.milli_per_gpu},
        {"gpu_mem_mib", p.gpu_mem_mib},
        {"mig_profile", p.mig_profile >= 0 ? Json(q.mig_profile) : Json(nullptr)},
        {"mig_start", p.mig_profile >= 0 ? Json(p.mig_start) : Json(nullptr)},
    };
  } else {
    j["placement"] = nullptr;
  }
  return j;
}

Json ToJson(const server::TaskView& view) {
  Json j = ToJson(view.task);
  j["queue_position"] = view.queue_position;
  j["pending_reason"] = view.pending_reason;
  Json nodes = Json::array();
  for (const auto& [reason, count] : view.pending_nodes) {
    nodes.push_back({{"reason", reason}, {"count", count}});
  }
  j["pending_nodes"] = std::move(nodes);
  return j;
}

Json ToJson(const TaskEvent& e) {
  return {{"task", e.task_id},
          {"time_ms", e.time_ms},
          {"from", TaskStateName(e.from)},
          {"to", TaskStateName(e.to)},
          {"reason", e.reason}};
}

Json ToJson(const server::NodeView& view) {
  const NodeInfo& info = view.info;
  const Node& n = info.node;
  Json gpus = Json::array();
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const Gpu& g = n.gpus[i];
    Json instances = Json::array();
    for (const MigInstance& m : g.mig_instances) {
      instances.push_back({{"profile", MigProfileName(g.model, m.profile)},
                           {"start", m.start},
                           {"in_use", m.in_use}});
    }
    gpus.push_back({{"index", i},
                    {"model", g.model},
                    {"uuid", g.uuid},
                    {"mem_mib", g.mem_mib},
                    {"mig_enabled", g.mig_enabled},
                    {"mig_instances", std::move(instances)}});
  }
  return {{"name", n.name},
          {"status", NodeStatusName(info.status)},
          {"cordoned", !n.schedulable},
          {"draining", info.draining},
          {"cpu_milli", n.cpu_milli},
          {"memory_mib", n.memory_mib},
          {"disk_gib", n.disk_gib},
          {"cpu_free_milli", view.cpu_free_milli},
          {"memory_free_mib", view.memory_free_mib},
          {"gpu_milli_free", view.gpu_milli_free},
          {"gpus", std::move(gpus)},
          {"labels", n.labels},
          {"tasks", view.tasks},
          {"registered_ms", info.registered_ms},
          {"last_heartbeat_ms", info.last_heartbeat_ms}};
}

Json ToJson(const Project& p) {
  return {{"id", p.id},
          {"name", p.name},
          {"max_gpu_milli", p.max_gpu_milli},
          {"max_tasks", p.max_tasks},
          {"stop_grace_ms", p.stop_grace_ms},
          {"created_ms", p.created_ms}};
}

Json ToJson(const User& u) {
  return {{"id", u.id},
          {"name", u.name},
          {"role", RoleName(u.role)},
          {"projects", u.projects},
          {"created_ms", u.created_ms}};
}

Json ToJson(const AccessKey& k) {
  return {{"access_key", k.access_key},   {"user", k.user_id},
          {"description", k.description}, {"created_ms", k.created_ms},
          {"revoked_ms", k.revoked_ms},   {"active", k.revoked_ms == 0}};
}

Json ToJson(const server::NewAccessKey& k) {
  Json j = ToJson(k.key);
  j["secret_key"] = k.secret;
  return j;
}

Json ToJson(const server::Balance& b) {
  return {{"project", b.project_id},
          {"balance_micros", b.balance_micros},
          {"credits_micros", b.credits_micros},
          {"usage_micros", b.usage_micros}};
}

Json ToJson(const LedgerEntry& e) {
  return {{"key", e.key},
          {"project", e.project_id},
          {"task", e.task_id},
          {"kind", LedgerKindName(e.kind)},
          {"amount_micros", e.amount_micros},
          {"from_ms", e.from_ms},
          {"to_ms", e.to_ms},
          {"detail", e.detail},
          {"created_ms", e.created_ms}};
}

Json ToJson(const server::TaskCost& c) {
  Json entries = Json::array();
  for (const LedgerEntry& e : c.entries) entries.push_back(ToJson(e));
  return {{"task", c.task_id},
          {"cost_micros", c.cost_micros},
          {"billed_until_ms", c.billed_until_ms},
          {"entries", std::move(entries)}};
}

Json ToJson(const server::NodeAssignments& a) {
  Json tasks = Json::array();
  for (const Task& t : a.tasks) tasks.push_back(ToJson(t));
  return {{"node", a.node}, {"version", a.version}, {"tasks", std::move(tasks)}};
}

Json ToJson(const server::Statement& s) {
  Json by_task = Json::array();
  for (const auto& [task, micros] : s.by_task) {
    by_task.push_back({{"task", task}, {"usage_micros", micros}});
  }
  return {{"project", s.project_id},
          {"from_ms", s.from_ms},
          {"to_ms", s.to_ms},
          {"credits_micros", s.credits_micros},
          {"usage_micros", s.usage_micros},
          {"by_task", std::move(by_task)}};
}

Json ToJson(const Price& p) {
  return {{"resource", p.resource},
          {"micros_per_hour", p.micros_per_hour},
          {"effective_ms", p.effective_ms}};
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace gpupool::api
