// The REST routes (docs/api.md): match, authenticate, parse strictly, admit (consume the nonce),
// call the control plane, render. Input problems are answered before the nonce is consumed or
// any service is called, so a malformed request changes nothing.
#include "api/routes.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/file_transfer.h"
#include "api/join_mapping.h"
#include "api/json_mapping.h"
#include "api/router.h"
#include "api/signing.h"
#include "api/telemetry_json.h"
#include "api/url.h"
#include "core/task_path.h"

namespace gpupool::api {
namespace {

using server::ControlPlane;
using Clock = std::chrono::steady_clock;

constexpr int kDefaultPageLimit = 100;
constexpr int kMaxPageLimit = 1000;
// Agents' long-polls: long enough to be cheap, short enough for proxies' idle timeouts.
constexpr int64_t kDefaultAssignmentWaitMs = 25'000;
constexpr int64_t kMaxAssignmentWaitMs = 30'000;

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool IsIdentifier(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// Answers a request once: reports its latency to the control plane, then sends it. Copyable,
// so the control plane's callbacks can carry it; needs only the control plane to be alive.
class Reply {
 public:
  Reply(ControlPlane* cp, const std::string* route, Clock::time_point start, Responder respond)
      : cp_(cp), route_(route), start_(start), respond_(std::move(respond)) {}

  void Send(HttpResponse response) const {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    cp_->ObserveRequest(*route_, response.status, micros);
    respond_(std::move(response));
  }
  void Json(int status, const api::Json& body) const {
    HttpResponse r;
    r.status = status;
    r.body = Dump(body);
    Send(std::move(r));
  }
  void Fail(const Error& error) const { Send(ErrorResponse(error)); }
  void Fail(ErrorCode code, std::string message) const {
    Send(ErrorResponse(code, std::move(message)));
  }

 private:
  ControlPlane* cp_;
  const std::string* route_;
  Clock::time_point start_;
  Responder respond_;
};

// A Done<T> that renders the value with ToJson and `status`, or the error.
template <typename T>
server::Done<T> Render(const Reply& reply, int status = 200) {
  return [reply, status](Result<T> result) {
    if (!result) return reply.Fail(result.error());
    reply.Json(status, ToJson(*result));
  };
}

// The query parameters of one request, read strictly: unknown or repeated names and values that
// do not parse are errors naming the parameter. The first problem is kept.
class QueryReader {
 public:
  QueryReader(std::string_view raw, std::initializer_list<std::string_view> allowed) {
    auto parsed = ParseQueryString(raw);
    if (!parsed) {
      Fail(parsed.error().message);
      return;
    }
    params_ = std::move(*parsed);
    for (size_t i = 0; i < params_.size(); ++i) {
      const std::string& name = params_[i].first;
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        Fail("unknown query parameter '" + name + "'");
        return;
      }
      for (size_t j = 0; j < i; ++j) {
        if (params_[j].first == name) {
          Fail("query parameter '" + name + "' is given twice");
          return;
        }
      }
    }
  }

  const std::string* Get(std::string_view name) const {
    for (const auto& [n, v] : params_) {
      if (n == name) return &v;
    }
    return nullptr;
  }

  template <typename T>
  void Int(std::string_view name, T* out, int64_t min, int64_t max) {
    const std::string* v = Get(name);
    if (v == nullptr || failed_) return;
    int64_t x = 0;
    const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), x);
    if (v->empty() || ec == std::errc::invalid_argument || ptr != v->data() + v->size()) {
      Fail(std::string(name) + " must be an integer, got '" + *v + "'");
      return;
    }
    if (ec == std::errc::result_out_of_range || x < min || x > max) {
      Fail(std::string(name) + " must be " + std::to_string(min) + ".." + std::to_string(max) +
           ", got " + *v);
      return;
    }
    *out = static_cast<T>(x);
  }

  void Identifier(std::string_view name, std::string* out) {
    const std::string* v = Get(name);
    if (v == nullptr || failed_) return;
    if (!IsIdentifier(*v)) {
      Fail(std::string(name) + " must be 1..128 characters of A-Z a-z 0-9 - _ ., got '" + *v + "'");
      return;
    }
    *out = *v;
  }

  void Fail(std::string message) {
    if (failed_) return;
    failed_ = true;
    error_ = Error{ErrorCode::kInvalidArgument, std::move(message)};
  }
  bool ok() const { return !failed_; }
  const Error& error() const { return error_; }

 private:
  std::vector<std::pair<std::string, std::string>> params_;
  bool failed_ = false;
  Error error_;
};

}  // namespace

namespace {

// What the routes share: the control plane, the clock and the tasks' files (may be null).
struct State {
  ControlPlane& cp;
  std::function<int64_t()> clock;
  server::TaskFiles* files;

  int64_t now_ms() const { return clock ? clock() : SystemNowMs(); }
};

// One request being handled. Lives on the stack of Handle; handlers copy what they keep.
struct Call {
  State& api;
  const HttpRequest& request;
  const PathParams& params;
  Reply reply;
  std::optional<Verified> verified;  // empty on public routes

  const server::Caller& caller() const { return verified->caller; }
  ControlPlane& cp() const { return api.cp; }
  int64_t now_ms() const { return api.now_ms(); }

  // The last authentication step, once the input is known to be well formed: consumes the
  // nonce (durably for non-GET methods). On failure it has answered and returns false.
  bool Admit() {
    if (!verified) return true;
    const bool durable = request.method != "GET" && request.method != "HEAD";
    if (Status s = ConsumeNonce(api.cp, *verified, durable); !s) {
      reply.Fail(s.error());
      return false;
    }
    return true;
  }

  // A path parameter, checked to be an identifier; on failure it has answered (400).
  std::optional<std::string> Param(std::string_view name) {
    const std::string_view v = params.Get(name);
    if (!IsIdentifier(v)) {
      reply.Fail(ErrorCode::kInvalidArgument,
                 "path parameter '" + std::string(name) +
                     "' must be 1..128 characters of A-Z a-z 0-9 - _ ., got '" + std::string(v) +
                     "'");
      return std::nullopt;
    }
    return std::string(v);
  }

  // The body as a JSON object; on failure it has answered (400).
  std::optional<api::Json> Body(bool required) {
    Result<api::Json> body = ParseJsonObject(request.body, required);
    if (!body) {
      reply.Fail(body.error());
      return std::nullopt;
    }
    return std::move(*body);
  }

  // Routes that take no body: empty or {}. On failure it has answered (400).
  bool NoBody() {
    std::optional<api::Json> body = Body(false);
    if (!body) return false;
    if (Status s = ParseEmptyBody(*body); !s) {
      reply.Fail(ErrorCode::kInvalidArgument, request.method + " " + std::string(request.Path()) +
                                                  " takes no request body (" + s.error().message +
                                                  ")");
      return false;
    }
    return true;
  }

  // A query reader that has answered when the parameters are bad (check ok()).
  bool Check(const QueryReader& q) {
    if (q.ok()) return true;
    reply.Fail(q.error());
    return false;
  }
};

// ------------------------------------------------------------------------------------------
// Operations

void Healthz(Call& c) {
  if (!c.NoBody()) return;
  const bool healthy = c.cp().Healthy();
  c.reply.Json(healthy ? 200 : 503, {{"status", healthy ? "ok" : "unhealthy"}});
}

void Metrics(Call& c) {
  if (!c.NoBody()) return;
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = c.cp().MetricsText();
  c.reply.Send(std::move(r));
}

// --- tasks ---

void SubmitTask(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<server::TaskSpec> spec = ParseTaskSpec(*body);
  if (!spec) return c.reply.Fail(spec.error());
  if (!c.Admit()) return;
  c.cp().SubmitTask(c.caller(), std::move(*spec), Render<Task>(c.reply, 201));
}

void ListTasks(Call& c) {
  if (!c.NoBody()) return;
  server::TaskFilter filter;
  filter.limit = kDefaultPageLimit;
  QueryReader q(c.request.RawQuery(), {"project", "state", "node", "limit", "after"});
  q.Identifier("project", &filter.project_id);
  q.Identifier("node", &filter.node);
  q.Int("limit", &filter.limit, 1, kMaxPageLimit);
  if (const std::string* after = q.Get("after"); after != nullptr && q.ok()) {
    int64_t seq = 0;
    const auto [ptr, ec] = std::from_chars(after->data(), after->data() + after->size(), seq);
    if (after->empty() || ec != std::errc() || ptr != after->data() + after->size() || seq < 0) {
      q.Fail("after must be a cursor returned as next_after, got '" + *after + "'");
    }
    filter.after_seq = seq;
  }
  if (const std::string* states = q.Get("state"); states != nullptr && q.ok()) {
    std::string_view rest = *states;
    while (q.ok()) {
      const size_t comma = rest.find(',');
      const std::string_view name = rest.substr(0, comma);
      const std::optional<TaskState> s = ParseTaskState(name);
      if (!s) {
        q.Fail("state '" + std::string(name) +
               "' is not a task state (pending, scheduled, starting, running, succeeded, "
               "failed, stopped, preempted, lost)");
      } else if (std::find(filter.states.begin(), filter.states.end(), *s) == filter.states.end()) {
        filter.states.push_back(*s);
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (!c.Check(q) || !c.Admit()) return;
  Result<server::TaskPage> page = c.cp().ListTasks(c.caller(), filter);
  if (!page) return c.reply.Fail(page.error());
  api::Json tasks = api::Json::array();
  for (const Task& t : page->tasks) tasks.push_back(ToJson(t));
  c.reply.Json(200, {{"tasks", std::move(tasks)},
                     {"next_after", page->next_after_seq > 0
                                        ? api::Json(std::to_string(page->next_after_seq))
                                        : api::Json(nullptr)}});
}

void GetTask(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<server::TaskView> view = c.cp().GetTask(c.caller(), *id);
  if (!view) return c.reply.Fail(view.error());
  c.reply.Json(200, ToJson(*view));
}

void StopTask(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  c.cp().StopTask(c.caller(), *id, Render<Task>(c.reply));
}

void ReleaseTask(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  c.cp().ReleaseTask(c.caller(), *id, Render<Task>(c.reply));
}

void DeleteTask(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  c.cp().DeleteTask(c.caller(), *id, [reply = c.reply, id = *id, files = c.api.files](Status s) {
    if (!s) return reply.Fail(s.error());
    if (files != nullptr) files->Remove(id);
    reply.Json(200, {{"id", id}, {"deleted", true}});
  });
}

void TaskEvents(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<std::vector<TaskEvent>> events = c.cp().TaskEvents(c.caller(), *id);
  if (!events) return c.reply.Fail(events.error());
  api::Json list = api::Json::array();
  for (const TaskEvent& e : *events) list.push_back(ToJson(e));
  c.reply.Json(200, {{"events", std::move(list)}});
}

void TaskCost(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<server::TaskCost> cost = c.cp().GetTaskCost(c.caller(), *id);
  if (!cost) return c.reply.Fail(cost.error());
  c.reply.Json(200, ToJson(*cost));
}

// --- task files (docs/api.md "Task files") ---

// The file store; answers 503 when this server keeps none.
server::TaskFiles* Files(Call& c) {
  if (c.api.files == nullptr) c.reply.Fail(ErrorCode::kUnavailable, "this server keeps no files");
  return c.api.files;
}

// A file store error: a size limit is 413, the rest as usual.
void FailFiles(const Reply& reply, const Error& error) {
  if (error.code != ErrorCode::kResourceExhausted) return reply.Fail(error);
  reply.Send(ErrorResponse(413, ErrorCodeName(error.code), error.message));
}

// The `path` query parameter, checked against the task path rules; "" (the task's root) when
// absent and not `required`.
std::string ReadTaskPath(QueryReader& q, bool required) {
  const std::string* path = q.Get("path");
  if (path == nullptr) {
    if (required) q.Fail("path is required");
    return "";
  }
  if (!path->empty() || required) {
    if (Status ok = ValidateTaskPath(*path); !ok) q.Fail(ok.error().message);
  }
  return *path;
}

// The task as the caller may see it; on failure it has answered (404 for another tenant's).
std::optional<Task> VisibleTask(Call& c, const std::string& id) {
  Result<server::TaskView> view = c.cp().GetTask(c.caller(), id);
  if (!view) {
    c.reply.Fail(view.error());
    return std::nullopt;
  }
  return std::move(view->task);
}

// Whether the caller may upload to `task` now: anyone who sees it while it is pending (its
// inputs), or, with `node`, the agent of the node it is bound to (its own key, or an admin's)
// and after it ended there (its outputs). On refusal it has answered.
bool MayUpload(Call& c, const Task& task, const std::string& node) {
  const std::string state(TaskStateName(task.state));
  if (node.empty()) {
    if (task.state == TaskState::kPending) return true;
    c.reply.Fail(ErrorCode::kFailedPrecondition,
                 IsTerminal(task.state)
                     ? "task " + task.id + " has ended (" + state +
                           "): its files can be downloaded but no longer uploaded"
                     : "task " + task.id + " is " + state +
                           ": files can be uploaded while it is pending, before it starts; its "
                           "outputs are uploaded by its node when it ends");
    return false;
  }
  if (!c.caller().IsAdmin() && c.caller().agent_node != node) {
    c.reply.Fail(ErrorCode::kPermissionDenied,
                 "only a node's agent uploads a task's outputs (node=" + node + ")");
    return false;
  }
  // Bound there now, or ended there (a run the server stopped: its agent saves the outputs
  // without a report).
  const bool bound = task.state == TaskState::kScheduled || task.state == TaskState::kStarting ||
                     task.state == TaskState::kRunning || IsTerminal(task.state);
  if (bound && task.placement && task.placement->node == node) return true;
  c.reply.Fail(ErrorCode::kFailedPrecondition, "task " + task.id + " is " + state +
                                                   " and not bound to node " + node +
                                                   ": its outputs are not taken from there");
  return false;
}

// After a write: a task deleted meanwhile must not keep what the write stored. False (and the
// files removed, 404 answered) when it is gone.
bool StillThere(Call& c, server::TaskFiles& files, const std::string& id) {
  if (Result<server::TaskView> view = c.cp().GetTask(c.caller(), id); view) return true;
  files.Remove(id);
  c.reply.Fail(ErrorCode::kNotFound, "task " + id + " was deleted during the upload");
  return false;
}

void ListFiles(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  QueryReader q(c.request.RawQuery(), {"path"});
  const std::string path = ReadTaskPath(q, /*required=*/false);
  if (!c.Check(q) || !c.Admit()) return;
  server::TaskFiles* files = Files(c);
  if (files == nullptr || !VisibleTask(c, *id)) return;
  Result<server::FileListing> listing = files->List(*id, path);
  if (!listing) return FailFiles(c.reply, listing.error());
  api::Json list = api::Json::array();
  for (const server::StoredFile& f : listing->files) {
    list.push_back({{"path", f.path}, {"size", f.size}, {"sha256", f.sha256}});
  }
  c.reply.Json(200, {{"task", *id},
                     {"path", path},
                     {"type", listing->is_dir ? "dir" : "file"},
                     {"files", std::move(list)},
                     {"max_file_bytes", listing->max_file_bytes},
                     {"max_task_bytes", listing->max_task_bytes}});
}

void ReadFileContent(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  QueryReader q(c.request.RawQuery(), {"path", "offset", "length"});
  const std::string path = ReadTaskPath(q, /*required=*/true);
  int64_t offset = 0;
  int64_t length = kFileChunkBytes;
  q.Int("offset", &offset, 0, std::numeric_limits<int64_t>::max());
  q.Int("length", &length, 1, kFileChunkBytes);
  if (!c.Check(q) || !c.Admit()) return;
  server::TaskFiles* files = Files(c);
  if (files == nullptr || !VisibleTask(c, *id)) return;
  Result<server::FileChunk> chunk = files->Read(*id, path, offset, length);
  if (!chunk) return FailFiles(c.reply, chunk.error());
  HttpResponse r;
  r.content_type = "application/octet-stream";
  r.body = std::move(chunk->bytes);
  r.headers.emplace_back("X-Gpupool-File-Size", std::to_string(chunk->size));
  r.headers.emplace_back("X-Gpupool-File-Sha256", chunk->sha256);
  c.reply.Send(std::move(r));
}

void UploadStatus(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  QueryReader q(c.request.RawQuery(), {"path"});
  const std::string path = ReadTaskPath(q, /*required=*/true);
  if (!c.Check(q) || !c.Admit()) return;
  server::TaskFiles* files = Files(c);
  if (files == nullptr || !VisibleTask(c, *id)) return;
  Result<int64_t> received = files->Received(*id, path);
  if (!received) return FailFiles(c.reply, received.error());
  c.reply.Json(200, {{"task", *id}, {"path", path}, {"received", *received}});
}

void PutUploadChunk(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  QueryReader q(c.request.RawQuery(), {"path", "offset", "node"});
  const std::string path = ReadTaskPath(q, /*required=*/true);
  int64_t offset = -1;
  std::string node;
  q.Int("offset", &offset, 0, std::numeric_limits<int64_t>::max());
  if (q.ok() && offset < 0) q.Fail("offset is required");
  q.Identifier("node", &node);
  if (!c.Check(q) || !c.Admit()) return;
  server::TaskFiles* files = Files(c);
  if (files == nullptr) return;
  std::optional<Task> task = VisibleTask(c, *id);
  if (!task || !MayUpload(c, *task, node)) return;
  Result<int64_t> received = files->Append(*id, path, offset, c.request.body);
  if (!received) return FailFiles(c.reply, received.error());
  if (!StillThere(c, *files, *id)) return;
  c.reply.Json(200, {{"task", *id}, {"path", path}, {"received", *received}});
}

void CommitUpload(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  QueryReader q(c.request.RawQuery(), {"node"});
  std::string node;
  q.Identifier("node", &node);
  if (!c.Check(q)) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  std::string path, sha256;
  int64_t size = 0;
  FieldReader r(*body);
  r.Allow({"path", "size", "sha256"});
  r.String("path", &path, /*required=*/true, kMaxTaskPathBytes);
  r.Int("size", &size, /*required=*/true, 0);
  r.String("sha256", &sha256, /*required=*/true, 64);
  if (r.ok()) {
    if (Status ok = ValidateTaskPath(path); !ok) r.Fail(ok.error().message);
  }
  if (!r.ok()) return c.reply.Fail(r.error());
  if (!c.Admit()) return;
  server::TaskFiles* files = Files(c);
  if (files == nullptr) return;
  std::optional<Task> task = VisibleTask(c, *id);
  if (!task || !MayUpload(c, *task, node)) return;
  Result<server::StoredFile> stored = files->Commit(*id, path, size, sha256);
  if (!stored) return FailFiles(c.reply, stored.error());
  if (!StillThere(c, *files, *id)) return;
  c.reply.Json(
      200,
      {{"task", *id}, {"path", stored->path}, {"size", stored->size}, {"sha256", stored->sha256}});
}

// --- nodes ---

void ListNodes(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  api::Json list = api::Json::array();
  for (const server::NodeView& n : c.cp().ListNodes(c.caller())) list.push_back(ToJson(n));
  c.reply.Json(200, {{"nodes", std::move(list)}});
}

void GetNode(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody() || !c.Admit()) return;
  Result<server::NodeView> node = c.cp().GetNode(c.caller(), *name);
  if (!node) return c.reply.Fail(node.error());
  c.reply.Json(200, ToJson(*node));
}

void SetCordon(Call& c, bool cordoned) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody() || !c.Admit()) return;
  c.cp().SetCordon(c.caller(), *name, cordoned, Render<server::NodeView>(c.reply));
}
void Cordon(Call& c) { SetCordon(c, true); }
void Uncordon(Call& c) { SetCordon(c, false); }

void Drain(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody() || !c.Admit()) return;
  c.cp().DrainNode(c.caller(), *name, Render<server::NodeView>(c.reply));
}

// --- agent-facing ---

void RegisterNode(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<Node> node = ParseNodeRegistration(*body);
  if (!node) return c.reply.Fail(node.error());
  if (!c.Admit()) return;
  c.cp().RegisterNode(c.caller(), std::move(*node), Render<server::NodeView>(c.reply));
}

void Heartbeat(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody() || !c.Admit()) return;
  if (Status s = c.cp().Heartbeat(c.caller(), *name); !s) return c.reply.Fail(s.error());
  c.reply.Json(200, {{"name", *name}, {"ok", true}});
}

void WatchAssignments(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody()) return;
  int64_t after = 0;
  int64_t wait_ms = kDefaultAssignmentWaitMs;
  QueryReader q(c.request.RawQuery(), {"after", "wait_ms"});
  q.Int("after", &after, 0, std::numeric_limits<int64_t>::max());
  q.Int("wait_ms", &wait_ms, 0, kMaxAssignmentWaitMs);
  if (!c.Check(q) || !c.Admit()) return;
  c.cp().WatchAssignments(c.caller(), *name, after, wait_ms,
                          Render<server::NodeAssignments>(c.reply));
}

void ReportTask(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<TaskReport> report = ParseTaskReport(*body, c.now_ms());
  if (!report) return c.reply.Fail(report.error());
  if (!c.Admit()) return;
  c.cp().ReportTask(c.caller(), *id, report->state, report->time_ms, report->exit_code,
                    std::move(report->reason), report->bound_ms, Render<Task>(c.reply));
}

// --- telemetry ---

constexpr int64_t kMaxLogWaitMs = 30'000;
constexpr int64_t kMaxLogBytes = 4 << 20;
constexpr int64_t kRawWindowMs = 5 * 60'000;         // what a raw history query shows by default
constexpr int64_t kMinuteWindowMs = 24 * 3'600'000;  // … and a one-minute one

void PushTelemetry(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<server::NodeTelemetry> batch = ParseNodeTelemetry(*body, *name);
  if (!batch) return c.reply.Fail(batch.error());
  if (!c.Admit()) return;
  auto offsets = c.cp().PushTelemetry(c.caller(), std::move(*batch));
  if (!offsets) return c.reply.Fail(offsets.error());
  c.reply.Json(200, ToJson(*offsets));
}

void TaskLogs(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  server::LogRequest request;
  QueryReader q(c.request.RawQuery(), {"stream", "offset", "tail", "max_bytes", "wait_ms"});
  if (const std::string* stream = q.Get("stream"); stream != nullptr && q.ok()) {
    const auto s = server::ParseOutputStream(*stream);
    if (!s) q.Fail("stream must be stdout, stderr or metrics, got '" + *stream + "'");
    if (s) request.stream = *s;
  }
  q.Int("offset", &request.offset, 0, std::numeric_limits<int64_t>::max());
  q.Int("tail", &request.tail_lines, 0, 1'000'000);
  q.Int("max_bytes", &request.max_bytes, 1, kMaxLogBytes);
  q.Int("wait_ms", &request.wait_ms, 0, kMaxLogWaitMs);
  if (q.ok() && q.Get("tail") != nullptr && q.Get("offset") != nullptr) {
    q.Fail("give either offset or tail, not both");
  }
  if (!c.Check(q) || !c.Admit()) return;
  const server::OutputStream stream = request.stream;
  c.cp().ReadTaskLog(c.caller(), *id, request,
                     [reply = c.reply, stream](Result<server::LogSlice> slice) {
                       if (!slice) return reply.Fail(slice.error());
                       reply.Json(200, ToJson(*slice, stream));
                     });
}

// The span and resolution of a history query: resolution raw (default) or 1m; from_ms defaults
// to the last 5 minutes (raw) or 24 hours (1m), to_ms to now.
bool ReadHistoryQuery(Call& c, int64_t* from_ms, int64_t* to_ms, server::Resolution* resolution) {
  QueryReader q(c.request.RawQuery(), {"from_ms", "to_ms", "resolution"});
  *resolution = server::Resolution::kRaw;
  if (const std::string* r = q.Get("resolution"); r != nullptr && q.ok()) {
    auto parsed = server::ParseResolution(*r);
    if (!parsed) q.Fail(parsed.error().message);
    if (parsed) *resolution = *parsed;
  }
  *to_ms = c.now_ms();
  *from_ms = -1;
  q.Int("from_ms", from_ms, 0, std::numeric_limits<int64_t>::max());
  q.Int("to_ms", to_ms, 0, std::numeric_limits<int64_t>::max());
  if (*from_ms < 0) {
    *from_ms = *to_ms - (*resolution == server::Resolution::kRaw ? kRawWindowMs : kMinuteWindowMs);
  }
  if (q.ok() && *from_ms > *to_ms) q.Fail("from_ms must not be after to_ms");
  return c.Check(q);
}

void GetTaskMetrics(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  int64_t from_ms = 0, to_ms = 0;
  server::Resolution resolution;
  if (!ReadHistoryQuery(c, &from_ms, &to_ms, &resolution) || !c.Admit()) return;
  auto metrics = c.cp().GetTaskMetrics(c.caller(), *id, from_ms, to_ms, resolution);
  if (!metrics) return c.reply.Fail(metrics.error());
  c.reply.Json(200, ToJson(*metrics));
}

void GetNodeMetrics(Call& c) {
  std::optional<std::string> name = c.Param("name");
  if (!name || !c.NoBody()) return;
  int64_t from_ms = 0, to_ms = 0;
  server::Resolution resolution;
  if (!ReadHistoryQuery(c, &from_ms, &to_ms, &resolution) || !c.Admit()) return;
  auto metrics = c.cp().GetNodeMetrics(c.caller(), *name, from_ms, to_ms, resolution);
  if (!metrics) return c.reply.Fail(metrics.error());
  c.reply.Json(200, ToJson(*metrics));
}

void GetUsage(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  auto usage = c.cp().GetUsage(c.caller());
  if (!usage) return c.reply.Fail(usage.error());
  c.reply.Json(200, ToJson(*usage));
}

// --- projects ---

void CreateProject(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<Project> project = ParseNewProject(*body);
  if (!project) return c.reply.Fail(project.error());
  if (!c.Admit()) return;
  c.cp().CreateProject(c.caller(), std::move(*project), Render<Project>(c.reply, 201));
}

void ListProjects(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  Result<std::vector<Project>> projects = c.cp().ListProjects(c.caller());
  if (!projects) return c.reply.Fail(projects.error());
  api::Json list = api::Json::array();
  for (const Project& p : *projects) list.push_back(ToJson(p));
  c.reply.Json(200, {{"projects", std::move(list)}});
}

void GetProject(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<Project> project = c.cp().GetProject(c.caller(), *id);
  if (!project) return c.reply.Fail(project.error());
  c.reply.Json(200, ToJson(*project));
}

void PatchProject(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  // The patch is checked on its own first, so a bad one never reaches the control plane.
  Project scratch;
  if (Status s = ApplyProjectPatch(*body, &scratch); !s) return c.reply.Fail(s.error());
  if (!c.Admit()) return;
  Result<Project> project = c.cp().GetProject(c.caller(), *id);
  if (!project) return c.reply.Fail(project.error());
  if (Status s = ApplyProjectPatch(*body, &*project); !s) return c.reply.Fail(s.error());
  c.cp().UpdateProject(c.caller(), std::move(*project), Render<Project>(c.reply));
}

void GetBalance(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<server::Balance> balance = c.cp().GetBalance(c.caller(), *id);
  if (!balance) return c.reply.Fail(balance.error());
  c.reply.Json(200, ToJson(*balance));
}

void AddCredit(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<CreditRequest> credit = ParseCredit(*body);
  if (!credit) return c.reply.Fail(credit.error());
  if (!c.Admit()) return;
  c.cp().Credit(c.caller(), *id, credit->amount_micros, std::move(credit->note),
                Render<LedgerEntry>(c.reply, 201));
}

// from_ms / to_ms of a period; to_ms defaults to now. Checks from_ms <= to_ms.
void ReadPeriod(QueryReader& q, int64_t now_ms, int64_t* from_ms, int64_t* to_ms) {
  *from_ms = 0;
  *to_ms = now_ms;
  q.Int("from_ms", from_ms, 0, std::numeric_limits<int64_t>::max());
  q.Int("to_ms", to_ms, 0, std::numeric_limits<int64_t>::max());
  if (q.ok() && *from_ms > *to_ms) {
    q.Fail("from_ms must be <= to_ms, got from_ms=" + std::to_string(*from_ms) +
           " to_ms=" + std::to_string(*to_ms));
  }
}

void Ledger(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  QueryReader q(c.request.RawQuery(), {"from_ms", "to_ms", "offset", "limit"});
  int64_t from_ms = 0, to_ms = 0, offset = 0, limit = kDefaultPageLimit;
  ReadPeriod(q, c.now_ms(), &from_ms, &to_ms);
  q.Int("offset", &offset, 0, std::numeric_limits<int64_t>::max());
  q.Int("limit", &limit, 1, kMaxPageLimit);
  if (!c.Check(q) || !c.Admit()) return;
  Result<std::vector<LedgerEntry>> entries =
      c.cp().Ledger(c.caller(), *id, from_ms, to_ms, offset, limit);
  if (!entries) return c.reply.Fail(entries.error());
  const bool full = static_cast<int64_t>(entries->size()) >= limit;
  api::Json list = api::Json::array();
  for (const LedgerEntry& e : *entries) list.push_back(ToJson(e));
  c.reply.Json(200, {{"entries", std::move(list)},
                     {"next_offset", full ? api::Json(offset + limit) : api::Json(nullptr)}});
}

void GetStatement(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody()) return;
  QueryReader q(c.request.RawQuery(), {"from_ms", "to_ms"});
  int64_t from_ms = 0, to_ms = 0;
  ReadPeriod(q, c.now_ms(), &from_ms, &to_ms);
  if (!c.Check(q) || !c.Admit()) return;
  Result<server::Statement> statement = c.cp().GetStatement(c.caller(), *id, from_ms, to_ms);
  if (!statement) return c.reply.Fail(statement.error());
  c.reply.Json(200, ToJson(*statement));
}

// --- users and keys ---

void CreateUser(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<User> user = ParseNewUser(*body);
  if (!user) return c.reply.Fail(user.error());
  if (!c.Admit()) return;
  c.cp().CreateUser(c.caller(), std::move(*user), Render<User>(c.reply, 201));
}

void ListUsers(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  Result<std::vector<User>> users = c.cp().ListUsers(c.caller());
  if (!users) return c.reply.Fail(users.error());
  api::Json list = api::Json::array();
  for (const User& u : *users) list.push_back(ToJson(u));
  c.reply.Json(200, {{"users", std::move(list)}});
}

void PatchUser(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  User scratch;
  if (Status s = ApplyUserPatch(*body, &scratch); !s) return c.reply.Fail(s.error());
  if (!c.Admit()) return;
  // The control plane has no GetUser: find the user in the caller's view of the users.
  Result<std::vector<User>> users = c.cp().ListUsers(c.caller());
  if (!users) return c.reply.Fail(users.error());
  auto it = std::find_if(users->begin(), users->end(), [&](const User& u) { return u.id == *id; });
  if (it == users->end()) return c.reply.Fail(ErrorCode::kNotFound, "user '" + *id + "' not found");
  User user = std::move(*it);
  if (Status s = ApplyUserPatch(*body, &user); !s) return c.reply.Fail(s.error());
  c.cp().UpdateUser(c.caller(), std::move(user), Render<User>(c.reply));
}

void CreateKey(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id) return;
  std::optional<api::Json> body = c.Body(false);
  if (!body) return;
  Result<std::string> description = ParseKeyDescription(*body);
  if (!description) return c.reply.Fail(description.error());
  if (!c.Admit()) return;
  c.cp().CreateAccessKey(c.caller(), *id, std::move(*description),
                         Render<server::NewAccessKey>(c.reply, 201));
}

void ListKeys(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  Result<std::vector<AccessKey>> keys = c.cp().ListAccessKeys(c.caller(), *id);
  if (!keys) return c.reply.Fail(keys.error());
  api::Json list = api::Json::array();
  for (const AccessKey& k : *keys) list.push_back(ToJson(k));
  c.reply.Json(200, {{"keys", std::move(list)}});
}

void RevokeKey(Call& c) {
  std::optional<std::string> key = c.Param("access_key");
  if (!key || !c.NoBody() || !c.Admit()) return;
  c.cp().RevokeAccessKey(c.caller(), *key, Render<AccessKey>(c.reply));
}

// --- join tokens and agents' own credentials ---

void CreateJoinToken(Call& c) {
  std::optional<api::Json> body = c.Body(false);
  if (!body) return;
  Result<JoinTokenRequest> request = ParseJoinTokenRequest(*body);
  if (!request) return c.reply.Fail(request.error());
  if (!c.Admit()) return;
  c.cp().CreateJoinToken(c.caller(), std::move(request->description), request->expires_in_ms,
                         Render<server::NewJoinToken>(c.reply, 201));
}

void ListJoinTokens(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  Result<std::vector<server::JoinTokenView>> tokens = c.cp().ListJoinTokens(c.caller());
  if (!tokens) return c.reply.Fail(tokens.error());
  api::Json list = api::Json::array();
  for (const server::JoinTokenView& t : *tokens) list.push_back(ToJson(t));
  c.reply.Json(200, {{"join_tokens", std::move(list)}});
}

void RevokeJoinToken(Call& c) {
  std::optional<std::string> id = c.Param("id");
  if (!id || !c.NoBody() || !c.Admit()) return;
  c.cp().RevokeJoinToken(c.caller(), *id, Render<server::JoinTokenView>(c.reply));
}

// Public: the join token in the body is the credential.
void JoinNode(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<JoinRequest> join = ParseJoinRequest(*body);
  if (!join) return c.reply.Fail(join.error());
  c.cp().JoinNode(join->token, join->node, Render<server::AgentCredentials>(c.reply, 201));
}

// An agent's own credential acts through the agent routes and its tasks' file routes only (the
// control plane then checks that it acts for its own node).
bool AgentMayCall(const server::Caller& caller, std::string_view pattern) {
  // Besides its own routes, an agent moves the files of the tasks on its node (inputs in,
  // outputs out); the control plane shows it those tasks only.
  return !caller.IsAgent() || pattern.starts_with("/v1/agent/") ||
         pattern.starts_with("/v1/tasks/{id}/files") ||
         pattern.starts_with("/v1/tasks/{id}/uploads");
}

// --- prices ---

void ListPrices(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  Result<std::vector<Price>> prices = c.cp().ListPrices(c.caller());
  if (!prices) return c.reply.Fail(prices.error());
  api::Json list = api::Json::array();
  for (const Price& p : *prices) list.push_back(ToJson(p));
  c.reply.Json(200, {{"prices", std::move(list)}});
}

void SetPrice(Call& c) {
  std::optional<api::Json> body = c.Body(true);
  if (!body) return;
  Result<Price> price = ParsePrice(*body, c.now_ms());
  if (!price) return c.reply.Fail(price.error());
  if (!c.Admit()) return;
  c.cp().SetPrice(c.caller(), std::move(*price), Render<Price>(c.reply));
}

// --- identity ---

void WhoAmI(Call& c) {
  if (!c.NoBody() || !c.Admit()) return;
  const server::Caller& who = c.caller();
  c.reply.Json(200, {{"user", who.user_id},
                     {"access_key", who.access_key},
                     {"role", RoleName(who.role)},
                     {"projects", who.projects}});
}

}  // namespace

struct Api::Impl {
  using RouteFn = void (*)(Call&);
  struct Route {
    std::string method;
    std::string pattern;
    bool public_route;
    RouteFn fn;
  };

  Impl(ControlPlane& control_plane, ApiOptions options)
      : state{control_plane, std::move(options.now_ms), options.task_files} {
    for (size_t i = 0; i < Routes().size(); ++i) {
      const Route& r = Routes()[i];
      // The table is static and well formed; a failure here is a programming error.
      if (Status s = router.Add(r.method, r.pattern, static_cast<int>(i)); !s) std::abort();
    }
  }

  void Handle(HttpRequest request, Responder respond);

  static const std::vector<Route>& Routes();

  State state;
  Router router;
};

const std::vector<Api::Impl::Route>& Api::Impl::Routes() {
  // Static, so the patterns outlive every Reply that names one.
  static const std::vector<Route> kRoutes = {
      {"GET", "/healthz", true, &Healthz},
      {"GET", "/metrics", true, &Metrics},
      {"GET", "/v1/whoami", false, &WhoAmI},
      {"POST", "/v1/tasks", false, &SubmitTask},
      {"GET", "/v1/tasks", false, &ListTasks},
      {"GET", "/v1/tasks/{id}", false, &GetTask},
      {"DELETE", "/v1/tasks/{id}", false, &DeleteTask},
      {"POST", "/v1/tasks/{id}/stop", false, &StopTask},
      {"POST", "/v1/tasks/{id}/release", false, &ReleaseTask},
      {"GET", "/v1/tasks/{id}/events", false, &TaskEvents},
      {"GET", "/v1/tasks/{id}/cost", false, &TaskCost},
      {"GET", "/v1/tasks/{id}/files", false, &ListFiles},
      {"GET", "/v1/tasks/{id}/files/content", false, &ReadFileContent},
      {"GET", "/v1/tasks/{id}/uploads", false, &UploadStatus},
      {"PUT", "/v1/tasks/{id}/uploads", false, &PutUploadChunk},
      {"POST", "/v1/tasks/{id}/uploads/commit", false, &CommitUpload},
      {"GET", "/v1/nodes", false, &ListNodes},
      {"GET", "/v1/nodes/{name}", false, &GetNode},
      {"POST", "/v1/nodes/{name}/cordon", false, &Cordon},
      {"POST", "/v1/nodes/{name}/uncordon", false, &Uncordon},
      {"POST", "/v1/nodes/{name}/drain", false, &Drain},
      {"POST", "/v1/agent/nodes", false, &RegisterNode},
      {"POST", "/v1/agent/nodes/{name}/heartbeat", false, &Heartbeat},
      {"GET", "/v1/agent/nodes/{name}/assignments", false, &WatchAssignments},
      {"POST", "/v1/agent/tasks/{id}/status", false, &ReportTask},
      {"POST", "/v1/agent/nodes/{name}/telemetry", false, &PushTelemetry},
      {"GET", "/v1/tasks/{id}/logs", false, &TaskLogs},
      {"GET", "/v1/tasks/{id}/metrics", false, &GetTaskMetrics},
      {"GET", "/v1/nodes/{name}/metrics", false, &GetNodeMetrics},
      {"GET", "/v1/usage", false, &GetUsage},
      {"POST", "/v1/projects", false, &CreateProject},
      {"GET", "/v1/projects", false, &ListProjects},
      {"GET", "/v1/projects/{id}", false, &GetProject},
      {"PATCH", "/v1/projects/{id}", false, &PatchProject},
      {"GET", "/v1/projects/{id}/balance", false, &GetBalance},
      {"POST", "/v1/projects/{id}/credits", false, &AddCredit},
      {"GET", "/v1/projects/{id}/ledger", false, &Ledger},
      {"GET", "/v1/projects/{id}/statement", false, &GetStatement},
      {"POST", "/v1/users", false, &CreateUser},
      {"GET", "/v1/users", false, &ListUsers},
      {"PATCH", "/v1/users/{id}", false, &PatchUser},
      {"POST", "/v1/users/{id}/keys", false, &CreateKey},
      {"GET", "/v1/users/{id}/keys", false, &ListKeys},
      {"DELETE", "/v1/keys/{access_key}", false, &RevokeKey},
      {"GET", "/v1/prices", false, &ListPrices},
      {"PUT", "/v1/prices", false, &SetPrice},
      {"POST", "/v1/join-tokens", false, &CreateJoinToken},
      {"GET", "/v1/join-tokens", false, &ListJoinTokens},
      {"DELETE", "/v1/join-tokens/{id}", false, &RevokeJoinToken},
      {"POST", "/v1/agent/join", true, &JoinNode},
  };
  return kRoutes;
}

void Api::Impl::Handle(HttpRequest request, Responder respond) {
  const Clock::time_point start = Clock::now();
  const Router::Match match = router.Find(request.method, request.Path());
  ControlPlane& cp = state.cp;
  Reply reply(&cp, match.pattern, start, std::move(respond));
  switch (match.outcome) {
    case Router::Outcome::kNotFound:
      return reply.Fail(ErrorCode::kNotFound,
                        "no route for " + request.method + " " + std::string(request.Path()));
    case Router::Outcome::kMethodNotAllowed: {
      HttpResponse r = ErrorResponse(405, ErrorCodeName(ErrorCode::kInvalidArgument),
                                     "method " + request.method + " is not allowed on " +
                                         *match.pattern + "; allowed: " + match.allow);
      r.headers.emplace_back("Allow", match.allow);
      return reply.Send(std::move(r));
    }
    case Router::Outcome::kBadPath:
      return reply.Fail(match.error);
    case Router::Outcome::kFound:
      break;
  }
  const Route& route = Routes()[static_cast<size_t>(match.id)];
  Call call{state, request, match.params, std::move(reply), std::nullopt};
  if (!route.public_route) {
    Result<Verified> verified = VerifyRequest(cp, request, state.now_ms());
    if (!verified) return call.reply.Fail(verified.error());
    if (!AgentMayCall(verified->caller, route.pattern)) {
      return call.reply.Fail(ErrorCode::kPermissionDenied,
                             "access key " + verified->caller.access_key +
                                 " is the agent credential of node " + verified->caller.agent_node +
                                 ": it may call only the agent routes (/v1/agent/…)");
    }
    call.verified = std::move(*verified);
  }
  route.fn(call);
}

Api::Api(ControlPlane& control_plane, ApiOptions options)
    : impl_(std::make_unique<Impl>(control_plane, std::move(options))) {}

Api::~Api() = default;

void Api::Handle(HttpRequest request, Responder respond) {
  impl_->Handle(std::move(request), std::move(respond));
}

Handler Api::AsHandler() {
  return [this](HttpRequest request, Responder respond) {
    Handle(std::move(request), std::move(respond));
  };
}

}  // namespace gpupool::api
