// JSON <-> entities for the REST API: strict parsing of request bodies (errors name the field)
// and rendering of the records (snake_case, times in ms, money in micros, lower-case states).
// nlohmann::json exceptions are caught in json_mapping.cc and never leave it.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "server/control_plane.h"

namespace gpupool::api {

using Json = nlohmann::json;

inline constexpr int kMaxJsonDepth = 32;

// Parses a request body (or any text, `what` naming it in messages) that must be a JSON object.
// An empty body is an error when `required` and `{}` otherwise. Errors: invalid JSON (with line
// and column), a number beyond double's range, a key given twice in one object, nesting deeper
// than kMaxJsonDepth, a body that is not an object.
Result<Json> ParseJsonObject(std::string_view body, bool required,
                             std::string_view what = "request body");

// Reads the fields of one JSON object strictly. The first problem is kept and later reads do
// nothing, so a parser reads every field and checks error() once.
class FieldReader {
 public:
  // `where` prefixes field names in messages ("gpus[1]."); empty at the top level.
  FieldReader(const Json& object, std::string where = "");

  // Fails on the first member not in `allowed` ("unknown field 'gpu_cnt'").
  FieldReader& Allow(std::initializer_list<std::string_view> allowed);
  // Fails unless at least one of `names` is present.
  FieldReader& RequireOneOf(std::initializer_list<std::string_view> names);

  bool Has(std::string_view name) const;
  bool ok() const { return !failed_; }
  const Error& error() const { return error_; }
  void Fail(std::string message);

  // Integer fields: must be a JSON integer within [min, max] (and within T). A missing field
  // leaves *out unchanged, or fails when `required`.
  template <typename T>
  void Int(std::string_view name, T* out, bool required = false,
           int64_t min = std::numeric_limits<T>::min(),
           int64_t max = std::numeric_limits<T>::max());
  void String(std::string_view name, std::string* out, bool required = false,
              size_t max_bytes = 4096);
  void Bool(std::string_view name, bool* out, bool required = false);
  void StringArray(std::string_view name, std::vector<std::string>* out, bool required = false,
                   size_t max_items = 1024, size_t max_bytes = 4096);
  // An identifier: 1..128 characters of A–Z a–z 0–9 - _ . (ids, node and project names).
  void Identifier(std::string_view name, std::string* out, bool required = false);

  // The member as a JSON value of the given type, or nullptr (missing, or wrong type: fails).
  const Json* Object(std::string_view name, bool required = false);
  const Json* Array(std::string_view name, bool required = false);

 private:
  const Json* Find(std::string_view name, bool required);
  bool Int64Of(std::string_view name, const Json& v, int64_t min, int64_t max, int64_t* out);
  std::string Name(std::string_view field) const { return where_ + std::string(field); }

  const Json& object_;
  std::string where_;
  bool failed_ = false;
  Error error_;
};

// --- request bodies (each runs its checks before anything reaches the control plane) ---

// POST /v1/tasks; the TaskRequest passes Validate().
Result<server::TaskSpec> ParseTaskSpec(const Json& body);
// POST /v1/agent/nodes; MIG instances by profile name, checked against the GPU model's rules.
Result<Node> ParseNodeRegistration(const Json& body);
// POST /v1/projects.
Result<Project> ParseNewProject(const Json& body);
// PATCH /v1/projects/{id}: name, max_gpu_milli, max_tasks, stop_grace_ms (at least one).
Status ApplyProjectPatch(const Json& body, Project* project);
// POST /v1/users.
Result<User> ParseNewUser(const Json& body);
// PATCH /v1/users/{id}: role, projects (at least one).
Status ApplyUserPatch(const Json& body, User* user);
// PUT /v1/prices; effective_ms defaults to `now_ms`.
Result<Price> ParsePrice(const Json& body, int64_t now_ms);

struct CreditRequest {
  int64_t amount_micros = 0;
  std::string note;
};
// POST /v1/projects/{id}/credits.
Result<CreditRequest> ParseCredit(const Json& body);

struct TaskReport {
  TaskState state = TaskState::kRunning;
  int64_t time_ms = 0;
  int exit_code = 0;
  std::string reason;
  int64_t bound_ms = 0;  // the binding the report is about; 0: not checked
};
// POST /v1/agent/tasks/{id}/status; time_ms defaults to `now_ms`.
Result<TaskReport> ParseTaskReport(const Json& body, int64_t now_ms);
// POST /v1/users/{id}/keys: an optional description.
Result<std::string> ParseKeyDescription(const Json& body);
// Bodies that carry nothing (stop, cordon, heartbeat, …): empty, or an empty object.
Status ParseEmptyBody(const Json& body);

// --- rendering ---
Json ToJson(const Task& task);
Json ToJson(const server::TaskView& view);
Json ToJson(const TaskEvent& event);
Json ToJson(const server::NodeView& view);
Json ToJson(const Project& project);
Json ToJson(const User& user);
Json ToJson(const AccessKey& key);             // never the secret
Json ToJson(const server::NewAccessKey& key);  // with secret_key, shown once
Json ToJson(const server::Balance& balance);
Json ToJson(const server::TaskCost& cost);
Json ToJson(const server::NodeAssignments& assignments);
Json ToJson(const server::Statement& statement);
Json ToJson(const LedgerEntry& entry);
Json ToJson(const Price& price);

// Renders a JSON value for a response body (invalid UTF-8 replaced, never throws).
std::string Dump(const Json& value);

}  // namespace gpupool::api
