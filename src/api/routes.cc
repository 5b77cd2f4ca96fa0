// The REST routes (docs/api.md): each operation of proto/operations.h bound to its handler. The
// binding decodes the path parameters, the query and the body into the operation's wire types
// (strictly: a malformed request is answered 400 before anything else happens); the handler runs
// the checks only it can make, admits the request (consumes the nonce), calls the service
// and answers with the operation's response type. So a malformed request changes nothing.
#include "api/routes.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "api/gateway.h"
#include "api/live_files.h"
#include "api/router.h"
#include "api/signing.h"
#include "api/tunnel_hub.h"
#include "api/url.h"
#include "api/wire.h"
#include "core/hex.h"
#include "core/task_path.h"
#include "core/task_ports.h"
#include "core/text.h"
#include "proto/json_codec.h"
#include "proto/openapi.h"
#include "proto/operations.h"
#include "proto/query_codec.h"

namespace gpupool::api {
namespace {

namespace ops = proto::ops;
using Clock = std::chrono::steady_clock;

// What a raw history query shows by default: the last 5 minutes (raw), 24 hours (1m).
constexpr int64_t kRawWindowMs = 5 * 60'000;
constexpr int64_t kMinuteWindowMs = 24 * 3'600'000;

int64_t SystemNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Answers a request once: reports its latency to the operations service, then sends it.
// Copyable, so the services' callbacks can carry it; needs only the services to be alive.
class Reply {
 public:
  Reply(server::OperationsService* ops, const std::string* route, Clock::time_point start,
        Responder respond)
      : ops_(ops), route_(route), start_(start), respond_(std::move(respond)) {}

  void Send(HttpResponse response) const {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    ops_->ObserveRequest(*route_, response.status, micros);
    respond_(std::move(response));
  }
  // Op's answer (its response type, its success status unless `status` says otherwise).
  template <typename Op>
  void Answer(const typename Op::Response& body, int status = Op::kInfo.status,
              std::vector<std::pair<std::string, std::string>> headers = {}) const {
    HttpResponse r;
    r.status = status;
    r.body = proto::Dump(proto::Encode(body));
    r.headers = std::move(headers);
    Send(std::move(r));
  }
  void Fail(const Error& error) const { Send(ErrorResponse(error)); }
  void Fail(ErrorCode code, std::string message) const {
    Send(ErrorResponse(code, std::move(message)));
  }
  // Tells the HTTP server who the request authenticated (before the answer); an error when the
  // user has all its connections open (the answer must then be that refusal).
  Status Authenticated(const std::string& user, bool privileged) const {
    return respond_.Authenticated(user, privileged);
  }
  // Answers with a stream (its latency: until the head was handed over); null when it cannot.
  std::shared_ptr<ResponseStream> Stream(HttpResponse head) const {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    ops_->ObserveRequest(*route_, head.status, micros);
    return respond_.Stream(std::move(head));
  }
  // Switches to a WebSocket (its latency: until the handshake was handed over); null when the
  // request is no handshake or cannot be answered.
  std::shared_ptr<Duplex> AcceptWebSocket() const {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
    ops_->ObserveRequest(*route_, 101, micros);
    return respond_.AcceptWebSocket();
  }

 private:
  server::OperationsService* ops_;
  const std::string* route_;
  Clock::time_point start_;
  Responder respond_;
};

// A Done<T> that answers Op with ToWire of the value, or the error.
template <typename Op, typename T>
server::Done<T> Render(const Reply& reply) {
  static_assert(std::is_same_v<decltype(ToWire(std::declval<const T&>())), typename Op::Response>,
                "the control plane's value must render as the operation's response type");
  return [reply](Result<T> result) {
    if (!result) return reply.Fail(result.error());
    reply.Answer<Op>(ToWire(*result));
  };
}

// What the routes share: the services, the clock and the console's files.
struct State {
  server::Services svc;
  std::function<int64_t()> clock;
  std::function<HttpResponse(const HttpRequest&)> console;
  TunnelHub* tunnels;          // the nodes' tunnels (the Api owns it)
  std::string gateway_origin;  // ApiOptions::gateway_origin

  int64_t now_ms() const { return clock ? clock() : SystemNowMs(); }
};

// One request being handled. Lives on the stack of Handle; handlers copy what they keep.
struct Call {
  State& api;
  HttpRequest& request;  // a handler may take its body
  const PathParams& params;
  Reply reply;
  // How the caller authenticated: by signature or by console session (neither on public routes).
  std::optional<Verified> verified;
  std::optional<server::SessionGrant> session;
  std::optional<server::Caller> task;  // a task's own token (kTaskTokenScheme)

  const server::Caller& caller() const {
    return verified ? verified->caller : session ? session->caller : *task;
  }
  const server::Services& svc() const { return api.svc; }
  int64_t now_ms() const { return api.now_ms(); }
  // A path parameter (already checked to be an identifier).
  std::string Path(std::string_view name) const { return std::string(params.Get(name)); }

  // Whether the caller is an agent or an admin (by signature or session).
  bool Privileged() const {
    return (verified || session) && (caller().IsAdmin() || caller().IsAgent());
  }

  // The last step before a handler acts, once the input is known to be well formed: a write is
  // refused (507) while the server's disk is below its reserve (proto::RefusedOnFullDisk says
  // which), then a signed request's nonce is consumed (durably for write methods; a session's or
  // a task token's requests have none), then the HTTP server is told the connection is no
  // longer anonymous. On failure it has answered and returns false.
  bool Admit() {
    if (proto::RefusedOnFullDisk(request.method, request.Path())) {
      if (Status room = api.svc.operations.CheckDiskSpace(); !room) {
        reply.Fail(room.error());
        return false;
      }
    }
    if (verified) {
      if (Status s = ConsumeNonce(api.svc.auth, *verified, IsWriteMethod(request.method)); !s) {
        reply.Fail(s.error());
        return false;
      }
    }
    if (verified || session || task) {
      if (Status admitted = reply.Authenticated(caller().user_id, Privileged()); !admitted) {
        reply.Fail(admitted.error());
        return false;
      }
    }
    return true;
  }
};

// An operation's decoded input.
template <typename Op>
struct Input {
  typename Op::Query query;
  typename Op::Request body;  // proto::Bytes: left empty, the handler reads the request body
};

template <typename Op>
using HandlerFn = void (*)(Call&, Input<Op>&);

// Decodes Op's path parameters, query and body (in that order; the first problem is answered
// 400), then runs the handler.
template <typename Op, HandlerFn<Op> Handler>
void Run(Call& c) {
  const std::string_view path = Op::kInfo.path;
  for (size_t open = path.find('{'); open != std::string_view::npos;
       open = path.find('{', open + 1)) {
    const std::string_view name = path.substr(open + 1, path.find('}', open) - open - 1);
    const std::string value(c.params.Get(name));
    if (Status ok =
            proto::CheckStringValue("path parameter '" + std::string(name) + "'", value,
                                    {.max_bytes = 128, .format = proto::Format::kIdentifier});
        !ok) {
      return c.reply.Fail(ok.error());
    }
  }
  Input<Op> in;
  // Every route reads its query strictly: one that takes none (proto::Empty) refuses any.
  auto pairs = ParseQueryString(c.request.RawQuery());
  if (!pairs) return c.reply.Fail(pairs.error());
  auto query = proto::DecodeQuery<typename Op::Query>(*pairs);
  if (!query) return c.reply.Fail(query.error());
  in.query = std::move(*query);
  using Request = typename Op::Request;
  if constexpr (std::is_same_v<Request, proto::Empty>) {
    auto body = proto::DecodeBody<proto::Empty>(c.request.body, /*required=*/false);
    if (!body) {
      return c.reply.Fail(ErrorCode::kInvalidArgument,
                          c.request.method + " " + std::string(c.request.Path()) +
                              " takes no request body (" + body.error().message + ")");
    }
  } else if constexpr (!std::is_same_v<Request, proto::Bytes>) {
    auto body = proto::DecodeBody<Request>(c.request.body, !Op::kInfo.body_optional);
    if (!body) return c.reply.Fail(body.error());
    in.body = std::move(*body);
  }
  Handler(c, in);
}

// ------------------------------------------------------------------------------------------
// Operations

void Healthz(Call& c, Input<ops::Healthz>&) {
  const bool healthy = c.svc().operations.Healthy();
  c.reply.Answer<ops::Healthz>({healthy ? "ok" : "unhealthy"}, healthy ? 200 : 503);
}

void Metrics(Call& c, Input<ops::Metrics>&) {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4";
  r.body = c.svc().operations.MetricsText();
  c.reply.Send(std::move(r));
}

void GetOpenApi(Call& c, Input<ops::GetOpenApi>&) {
  static const std::string kDocument = proto::OpenApiText();
  HttpResponse r;
  r.body = kDocument;
  c.reply.Send(std::move(r));
}

void WhoAmI(Call& c, Input<ops::GetWhoAmI>&) {
  if (!c.Admit()) return;
  const server::Caller& who = c.caller();
  c.reply.Answer<ops::GetWhoAmI>(
      {who.user_id, who.access_key, std::string(RoleName(who.role)), who.projects});
}

// --- tasks ---

void SubmitTask(Call& c, Input<ops::SubmitTask>& in) {
  Result<server::TaskSpec> spec = FromWire(std::move(in.body));
  if (!spec) return c.reply.Fail(spec.error());
  if (!c.Admit()) return;
  c.svc().tasks.SubmitTask(c.caller(), std::move(*spec), Render<ops::SubmitTask, Task>(c.reply));
}

void ListTasks(Call& c, Input<ops::ListTasks>& in) {
  server::TaskFilter filter;
  filter.project_id = in.query.project;
  filter.node = in.query.node;
  filter.array_id = in.query.array;
  filter.metrics = in.query.metrics;
  filter.limit = in.query.limit;
  if (in.query.after) {
    const std::string& cursor = *in.query.after;
    int64_t seq = -1;
    const auto [end, ec] = std::from_chars(cursor.data(), cursor.data() + cursor.size(), seq);
    if (cursor.empty() || ec != std::errc() || end != cursor.data() + cursor.size() || seq < 0) {
      return c.reply.Fail(ErrorCode::kInvalidArgument,
                          "after must be a cursor returned as next_after, got '" + cursor + "'");
    }
    filter.after_seq = seq;
  }
  for (const std::string& name : in.query.state) {
    const std::optional<TaskState> s = ParseTaskState(name);  // the decoder checked the name
    if (s && std::find(filter.states.begin(), filter.states.end(), *s) == filter.states.end()) {
      filter.states.push_back(*s);
    }
  }
  if (!c.Admit()) return;
  c.svc().tasks.ListTasks(c.caller(), filter, [reply = c.reply](Result<server::TaskPage> page) {
    if (!page) return reply.Fail(page.error());
    proto::TaskList list;
    for (const Task& t : page->tasks) {
      list.tasks.push_back(ToWire(t));
      if (auto m = page->metrics.find(t.id); m != page->metrics.end()) {
        list.metrics.push_back({t.id, {m->second.begin(), m->second.end()}});
      }
    }
    if (page->next_after_seq > 0) list.next_after = std::to_string(page->next_after_seq);
    reply.Answer<ops::ListTasks>(list);
  });
}

void SubmitTaskArray(Call& c, Input<ops::SubmitTaskArray>& in) {
  Result<ArraySpec> array = ParseArraySpec(in.body.array);
  if (!array) return c.reply.Fail(ErrorCode::kInvalidArgument, "array " + array.error().message);
  Result<server::TaskSpec> spec = FromWire(std::move(static_cast<proto::TaskSubmit&>(in.body)));
  if (!spec) return c.reply.Fail(spec.error());
  if (!c.Admit()) return;
  c.svc().tasks.SubmitArray(c.caller(), std::move(*spec), std::move(*array),
                            Render<ops::SubmitTaskArray, server::TaskArrayView>(c.reply));
}

void GetTaskArray(Call& c, Input<ops::GetTaskArray>&) {
  if (!c.Admit()) return;
  c.svc().tasks.GetArray(c.caller(), c.Path("id"),
                         Render<ops::GetTaskArray, server::TaskArrayView>(c.reply));
}

void StopTaskArray(Call& c, Input<ops::StopTaskArray>&) {
  if (!c.Admit()) return;
  c.svc().tasks.StopArray(c.caller(), c.Path("id"),
                          Render<ops::StopTaskArray, server::TaskArrayView>(c.reply));
}

void ReleaseTaskArray(Call& c, Input<ops::ReleaseTaskArray>&) {
  if (!c.Admit()) return;
  c.svc().tasks.ReleaseArray(c.caller(), c.Path("id"),
                             Render<ops::ReleaseTaskArray, server::TaskArrayView>(c.reply));
}

void SubmitJob(Call& c, Input<ops::SubmitJob>& in) {
  auto spec = FromWire(std::move(in.body));
  if (!spec) return c.reply.Fail(spec.error());
  if (!c.Admit()) return;
  c.svc().tasks.SubmitJob(c.caller(), std::move(spec->first), std::move(spec->second),
                          Render<ops::SubmitJob, server::JobView>(c.reply));
}

void GetJob(Call& c, Input<ops::GetJob>&) {
  if (!c.Admit()) return;
  c.svc().tasks.GetJob(c.caller(), c.Path("id"), Render<ops::GetJob, server::JobView>(c.reply));
}

void StopJob(Call& c, Input<ops::StopJob>&) {
  if (!c.Admit()) return;
  c.svc().tasks.StopJob(c.caller(), c.Path("id"), Render<ops::StopJob, server::JobView>(c.reply));
}

void ReleaseJob(Call& c, Input<ops::ReleaseJob>&) {
  if (!c.Admit()) return;
  c.svc().tasks.ReleaseJob(c.caller(), c.Path("id"),
                           Render<ops::ReleaseJob, server::JobView>(c.reply));
}

void GetTask(Call& c, Input<ops::GetTask>&) {
  if (!c.Admit()) return;
  c.svc().tasks.GetTask(
      c.caller(), c.Path("id"),
      [reply = c.reply, origin = c.api.gateway_origin](Result<server::TaskView> view) {
        if (!view) return reply.Fail(view.error());
        proto::TaskDetail detail = ToWire(*view);
        for (int32_t port : view->task.ports) {
          detail.port_urls[std::to_string(port)] = GatewayPortUrl(origin, view->task.id, port);
        }
        reply.Answer<ops::GetTask>(detail);
      });
}

void StopTask(Call& c, Input<ops::StopTask>& in) {
  if (!c.Admit()) return;
  c.svc().tasks.StopTask(c.caller(), c.Path("id"), in.body.discard,
                         Render<ops::StopTask, Task>(c.reply));
}

// --- snapshots ---

void SnapshotTask(Call& c, Input<ops::SnapshotTask>& in) {
  if (!c.Admit()) return;
  c.svc().snapshots.SnapshotTask(c.caller(), c.Path("id"), in.body.image,
                                 Render<ops::SnapshotTask, TaskSnapshot>(c.reply));
}

void ResumeTask(Call& c, Input<ops::ResumeTask>& in) {
  if (!c.Admit()) return;
  c.svc().snapshots.ResumeTask(c.caller(), c.Path("id"), in.body.snapshot.value_or(""),
                               Render<ops::ResumeTask, Task>(c.reply));
}

void ListSnapshots(Call& c, Input<ops::ListSnapshots>& in) {
  if (!c.Admit()) return;
  c.svc().snapshots.ListSnapshots(c.caller(), in.query.task, in.query.project,
                                  [reply = c.reply](Result<std::vector<TaskSnapshot>> snapshots) {
                                    if (!snapshots) return reply.Fail(snapshots.error());
                                    proto::SnapshotList list;
                                    for (const TaskSnapshot& s : *snapshots)
                                      list.snapshots.push_back(ToWire(s));
                                    reply.Answer<ops::ListSnapshots>(list);
                                  });
}

void GetSnapshot(Call& c, Input<ops::GetSnapshot>&) {
  if (!c.Admit()) return;
  c.svc().snapshots.GetSnapshot(c.caller(), c.Path("id"),
                                Render<ops::GetSnapshot, TaskSnapshot>(c.reply));
}

void DeleteSnapshot(Call& c, Input<ops::DeleteSnapshot>&) {
  if (!c.Admit()) return;
  const std::string id = c.Path("id");
  c.svc().snapshots.DeleteSnapshot(c.caller(), id, [reply = c.reply, id](Status s) {
    if (!s) return reply.Fail(s.error());
    reply.Answer<ops::DeleteSnapshot>({id, true});
  });
}

// --- volumes ---

void CreateVolume(Call& c, Input<ops::CreateVolume>& in) {
  if (!c.Admit()) return;
  c.svc().volumes.CreateVolume(c.caller(), FromWire(std::move(in.body)),
                               Render<ops::CreateVolume, server::VolumeInfo>(c.reply));
}

void ListVolumes(Call& c, Input<ops::ListVolumes>& in) {
  if (!c.Admit()) return;
  c.svc().volumes.ListVolumes(c.caller(), in.query.project,
                              [reply = c.reply](Result<std::vector<server::VolumeInfo>> volumes) {
                                if (!volumes) return reply.Fail(volumes.error());
                                proto::VolumeList list;
                                for (const server::VolumeInfo& v : *volumes) {
                                  list.volumes.push_back(ToWire(v));
                                }
                                reply.Answer<ops::ListVolumes>(list);
                              });
}

void GetVolume(Call& c, Input<ops::GetVolume>&) {
  if (!c.Admit()) return;
  c.svc().volumes.GetVolume(c.caller(), c.Path("id"),
                            Render<ops::GetVolume, server::VolumeInfo>(c.reply));
}

void UpdateVolume(Call& c, Input<ops::UpdateVolume>& in) {
  if (!in.body.size_bytes) {
    return c.reply.Fail(ErrorCode::kInvalidArgument, "size_bytes is required");
  }
  if (!c.Admit()) return;
  c.svc().volumes.ResizeVolume(c.caller(), c.Path("id"), *in.body.size_bytes,
                               Render<ops::UpdateVolume, server::VolumeInfo>(c.reply));
}

void DeleteVolume(Call& c, Input<ops::DeleteVolume>&) {
  if (!c.Admit()) return;
  c.svc().volumes.DeleteVolume(c.caller(), c.Path("id"), [reply = c.reply](Result<std::string> id) {
    if (!id) return reply.Fail(id.error());
    reply.Answer<ops::DeleteVolume>({*id, true});
  });
}

void VolumeRemoved(Call& c, Input<ops::VolumeRemoved>&) {
  if (!c.Admit()) return;
  c.svc().volumes.VolumeRemoved(c.caller(), c.Path("id"), [reply = c.reply](Status s) {
    if (!s) return reply.Fail(s.error());
    reply.Answer<ops::VolumeRemoved>({});
  });
}

void ReleaseTask(Call& c, Input<ops::ReleaseTask>&) {
  if (!c.Admit()) return;
  c.svc().tasks.ReleaseTask(c.caller(), c.Path("id"), Render<ops::ReleaseTask, Task>(c.reply));
}

void DeleteTask(Call& c, Input<ops::DeleteTask>&) {
  if (!c.Admit()) return;
  const std::string id = c.Path("id");
  c.svc().tasks.DeleteTask(c.caller(), id, [reply = c.reply, id](Status s) {
    if (!s) return reply.Fail(s.error());
    reply.Answer<ops::DeleteTask>({id, true});
  });
}

void TaskEvents(Call& c, Input<ops::ListTaskEvents>&) {
  if (!c.Admit()) return;
  c.svc().tasks.TaskEvents(c.caller(), c.Path("id"),
                           [reply = c.reply](Result<std::vector<TaskEvent>> events) {
                             if (!events) return reply.Fail(events.error());
                             proto::TaskEventList list;
                             for (const TaskEvent& e : *events) list.events.push_back(ToWire(e));
                             reply.Answer<ops::ListTaskEvents>(list);
                           });
}

void TaskCost(Call& c, Input<ops::GetTaskCost>&) {
  if (!c.Admit()) return;
  c.svc().billing.GetTaskCost(c.caller(), c.Path("id"),
                              Render<ops::GetTaskCost, server::TaskCost>(c.reply));
}

// --- task files (docs/api.md "Task files") ---

// A file service error: a size limit is 413, the rest as usual.
void FailFiles(const Reply& reply, const Error& error) {
  if (error.code != ErrorCode::kResourceExhausted) return reply.Fail(error);
  reply.Send(ErrorResponse(413, ErrorCodeName(error.code), error.message));
}

// A `path` parameter as the task path it names (TaskPathFromUser: "/root/x" and "x" alike; ""
// is the task's root where `root_ok`); on failure it has answered (400).
bool CheckTaskPath(Call& c, std::string& path, bool root_ok) {
  Result<std::string> p = TaskPathFromUser(path);
  if (p && p->empty() && !root_ok) p = tl::unexpected(ValidateTaskPath("").error());
  if (!p) {
    c.reply.Fail(p.error());
    return false;
  }
  path = std::move(*p);
  return true;
}

void ListFiles(Call& c, Input<ops::ListFiles>& in) {
  const std::string id = c.Path("id");
  if (!CheckTaskPath(c, in.query.path, /*root_ok=*/true) || !c.Admit()) return;
  c.svc().files.ListFiles(
      c.caller(), id, in.query.path, in.query.node,
      [reply = c.reply, id, path = in.query.path](Result<server::FileListing> listing) {
        if (!listing) return FailFiles(reply, listing.error());
        proto::FileListing out;
        out.task = id;
        out.path = path;
        out.type = listing->is_dir ? "dir" : "file";
        for (const server::StoredFile& f : listing->files)
          out.files.push_back({f.path, f.size, f.sha256});
        out.max_file_bytes = listing->max_file_bytes;
        out.max_task_bytes = listing->max_task_bytes;
        reply.Answer<ops::ListFiles>(out);
      });
}

void ReadFileContent(Call& c, Input<ops::ReadFile>& in) {
  const std::string id = c.Path("id");
  if (!CheckTaskPath(c, in.query.path, /*root_ok=*/false) || !c.Admit()) return;
  c.svc().files.ReadFile(c.caller(), id, in.query.path, in.query.offset, in.query.length,
                         [reply = c.reply](Result<server::FileChunk> chunk) {
                           if (!chunk) return FailFiles(reply, chunk.error());
                           HttpResponse r;
                           r.content_type = "application/octet-stream";
                           r.body = std::move(chunk->bytes);
                           r.headers.emplace_back("X-Gpupool-File-Size",
                                                  std::to_string(chunk->size));
                           // A running task's node sends it when it has it at hand.
                           if (!chunk->sha256.empty()) {
                             r.headers.emplace_back("X-Gpupool-File-Sha256", chunk->sha256);
                           }
                           reply.Send(std::move(r));
                         });
}

void UploadStatus(Call& c, Input<ops::GetUpload>& in) {
  const std::string id = c.Path("id");
  if (!CheckTaskPath(c, in.query.path, /*root_ok=*/false) || !c.Admit()) return;
  c.svc().files.UploadStatus(c.caller(), id, in.query.path, in.query.node,
                             [reply = c.reply, id, path = in.query.path](Result<int64_t> received) {
                               if (!received) return FailFiles(reply, received.error());
                               reply.Answer<ops::GetUpload>({id, path, *received});
                             });
}

void PutUploadChunk(Call& c, Input<ops::PutUploadChunk>& in) {
  const std::string id = c.Path("id");
  if (!CheckTaskPath(c, in.query.path, /*root_ok=*/false) || !c.Admit()) return;
  c.svc().files.AppendUpload(c.caller(), id, in.query.path, in.query.node, in.query.offset,
                             in.query.size, std::move(c.request.body),
                             [reply = c.reply, id, path = in.query.path](Result<int64_t> received) {
                               if (!received) return FailFiles(reply, received.error());
                               reply.Answer<ops::PutUploadChunk>({id, path, *received});
                             });
}

void CommitUpload(Call& c, Input<ops::CommitUpload>& in) {
  const std::string id = c.Path("id");
  if (!CheckTaskPath(c, in.body.path, /*root_ok=*/false) || !c.Admit()) return;
  c.svc().files.CommitUpload(c.caller(), id, in.body.path, in.query.node, in.body.size,
                             std::move(in.body.sha256),
                             [reply = c.reply, id](Result<server::StoredFile> stored) {
                               if (!stored) return FailFiles(reply, stored.error());
                               proto::CommittedFile out;
                               out.task = id;
                               out.path = stored->path;
                               out.size = stored->size;
                               out.sha256 = stored->sha256;
                               reply.Answer<ops::CommitUpload>(out);
                             });
}

// --- nodes ---

void ListNodes(Call& c, Input<ops::ListNodes>&) {
  if (!c.Admit()) return;
  proto::NodeList list;
  for (const server::NodeView& n : c.svc().nodes.ListNodes(c.caller()))
    list.nodes.push_back(ToWire(n));
  c.reply.Answer<ops::ListNodes>(list);
}

void GetNode(Call& c, Input<ops::GetNode>&) {
  if (!c.Admit()) return;
  Result<server::NodeView> node = c.svc().nodes.GetNode(c.caller(), c.Path("name"));
  if (!node) return c.reply.Fail(node.error());
  c.reply.Answer<ops::GetNode>(ToWire(*node));
}

void Cordon(Call& c, Input<ops::CordonNode>&) {
  if (!c.Admit()) return;
  c.svc().nodes.SetCordon(c.caller(), c.Path("name"), true,
                          Render<ops::CordonNode, server::NodeView>(c.reply));
}

void Uncordon(Call& c, Input<ops::UncordonNode>&) {
  if (!c.Admit()) return;
  c.svc().nodes.SetCordon(c.caller(), c.Path("name"), false,
                          Render<ops::UncordonNode, server::NodeView>(c.reply));
}

void Drain(Call& c, Input<ops::DrainNode>&) {
  if (!c.Admit()) return;
  c.svc().nodes.DrainNode(c.caller(), c.Path("name"),
                          Render<ops::DrainNode, server::NodeView>(c.reply));
}

// --- agent-facing ---

void RegisterNode(Call& c, Input<ops::RegisterNode>& in) {
  Result<Node> node = FromWire(std::move(in.body));
  if (!node) return c.reply.Fail(node.error());
  if (!c.Admit()) return;
  c.svc().agents.RegisterNode(c.caller(), std::move(*node),
                              Render<ops::RegisterNode, server::NodeView>(c.reply));
}

bool CheckSha256(Call& c, const std::string& text, const char* what) {
  if (IsLowerHex(text) && text.size() == proto::kSha256HexBytes) return true;
  c.reply.Fail(ErrorCode::kInvalidArgument,
               std::string(what) + " must be a SHA-256: 64 lower-case hex digits, got '" +
                   text.substr(0, 80) + "'");
  return false;
}

void Heartbeat(Call& c, Input<ops::Heartbeat>& in) {
  for (const std::string& sha : in.body.datasets) {
    if (!CheckSha256(c, sha, "each of datasets")) return;
  }
  if (!c.Admit()) return;
  const std::string name = c.Path("name");
  auto timeout = c.svc().agents.Heartbeat(c.caller(), name, std::move(in.body.datasets));
  if (!timeout) return c.reply.Fail(timeout.error());
  c.reply.Answer<ops::Heartbeat>({name, true, *timeout});
}

void WatchAssignments(Call& c, Input<ops::WatchAssignments>& in) {
  if (!c.Admit()) return;
  c.svc().agents.WatchAssignments(
      c.caller(), c.Path("name"), in.query.after, in.query.wait_ms,
      [reply = c.reply, origin = c.api.gateway_origin](Result<server::NodeAssignments> a) {
        if (!a) return reply.Fail(a.error());
        proto::Assignments wire = ToWire(*a);
        wire.gateway_origin = origin;
        reply.Answer<ops::WatchAssignments>(wire);
      });
}

void ReportTask(Call& c, Input<ops::ReportTask>& in) {
  const proto::TaskReport& report = in.body;
  // The decoder checked the state's name.
  const TaskState state = ParseTaskState(report.state).value_or(TaskState::kRunning);
  if (!c.Admit()) return;
  c.svc().agents.ReportTask(c.caller(), c.Path("id"), state, report.time_ms.value_or(c.now_ms()),
                            report.exit_code, report.reason, report.bound_ms,
                            Render<ops::ReportTask, Task>(c.reply));
}

// An image's id as Docker names it: "sha256:" and a SHA-256.
bool CheckImageId(Call& c, const std::string& id, const char* what) {
  constexpr std::string_view kPrefix = "sha256:";
  if (id.starts_with(kPrefix)) return CheckSha256(c, id.substr(kPrefix.size()), what);
  c.reply.Fail(ErrorCode::kInvalidArgument,
               std::string(what) + " must be sha256:<64 lower-case hex digits>, got '" +
                   id.substr(0, 80) + "'");
  return false;
}

void CommitSnapshot(Call& c, Input<ops::CommitSnapshot>& in) {
  proto::SnapshotCommit& w = in.body;
  if (!CheckSha256(c, w.manifest, "manifest") || !c.Admit()) return;
  server::SnapshotCapture capture;
  capture.run = w.run;
  capture.trigger = ParseSnapshotTrigger(w.trigger).value_or(SnapshotTrigger::kManual);
  capture.request = w.request;
  capture.consistency = ParseConsistency(w.consistency).value_or(Consistency::kCrash);
  capture.manifest = std::move(w.manifest);
  capture.files = w.files;
  capture.bytes = w.bytes;
  capture.new_bytes = w.new_bytes;
  capture.taken_ms = w.taken_ms;
  capture.frozen_ms = w.frozen_ms;
  capture.duration_ms = w.duration_ms;
  if (w.image) {
    if (!CheckImageId(c, w.image->id, "image.id")) return;
    capture.image = SavedImage{w.image->id, w.image->base, w.image->bytes, w.image->saved};
  }
  c.svc().snapshots.CommitSnapshot(c.caller(), c.Path("id"), std::move(capture),
                                   Render<ops::CommitSnapshot, TaskSnapshot>(c.reply));
}

void FailSnapshot(Call& c, Input<ops::FailSnapshot>& in) {
  proto::SnapshotFailure& w = in.body;
  if (!c.Admit()) return;
  c.svc().snapshots.FailSnapshot(c.caller(), c.Path("id"), w.run,
                                 ParseSnapshotTrigger(w.trigger).value_or(SnapshotTrigger::kManual),
                                 w.request, std::move(w.error), [reply = c.reply](Status s) {
                                   if (!s) return reply.Fail(s.error());
                                   reply.Answer<ops::FailSnapshot>({});
                                 });
}

void FindMissingChunks(Call& c, Input<ops::FindMissingChunks>& in) {
  for (const std::string& sha : in.body.chunks) {
    if (!CheckSha256(c, sha, "each of chunks")) return;
  }
  if (!c.Admit()) return;
  c.svc().snapshots.FindMissingChunks(c.caller(), c.Path("id"), std::move(in.body.chunks),
                                      [reply = c.reply](Result<std::vector<std::string>> missing) {
                                        if (!missing) return reply.Fail(missing.error());
                                        reply.Answer<ops::FindMissingChunks>({std::move(*missing)});
                                      });
}

void PutChunk(Call& c, Input<ops::PutChunk>&) {
  const std::string sha = c.Path("sha256");
  if (!CheckSha256(c, sha, "sha256") || !c.Admit()) return;
  c.svc().snapshots.PutChunk(c.caller(), c.Path("id"), sha, std::move(c.request.body),
                             [reply = c.reply](Result<bool> added) {
                               if (!added) return reply.Fail(added.error());
                               reply.Answer<ops::PutChunk>({});
                             });
}

// A Done that answers with the bytes as application/octet-stream (a chunk), or the error.
server::Done<std::string> SendBytes(const Reply& reply) {
  return [reply](Result<std::string> bytes) {
    if (!bytes) return reply.Fail(bytes.error());
    HttpResponse r;
    r.content_type = "application/octet-stream";
    r.body = std::move(*bytes);
    reply.Send(std::move(r));
  };
}

void GetChunk(Call& c, Input<ops::GetChunk>&) {
  const std::string sha = c.Path("sha256");
  if (!CheckSha256(c, sha, "sha256") || !c.Admit()) return;
  c.svc().snapshots.GetChunk(c.caller(), c.Path("id"), sha, SendBytes(c.reply));
}

// --- datasets ---

void CreateDataset(Call& c, Input<ops::CreateDataset>& in) {
  if (!c.Admit()) return;
  c.svc().datasets.CreateDataset(c.caller(), in.body.name, in.body.project.value_or(""),
                                 Render<ops::CreateDataset, server::DatasetInfo>(c.reply));
}

void ListDatasets(Call& c, Input<ops::ListDatasets>& in) {
  if (!c.Admit()) return;
  c.svc().datasets.ListDatasets(
      c.caller(), in.query.project,
      [reply = c.reply](Result<std::vector<server::DatasetInfo>> datasets) {
        if (!datasets) return reply.Fail(datasets.error());
        proto::DatasetList list;
        for (const server::DatasetInfo& d : *datasets) list.datasets.push_back(ToWire(d));
        reply.Answer<ops::ListDatasets>(list);
      });
}

void GetDataset(Call& c, Input<ops::GetDataset>&) {
  if (!c.Admit()) return;
  c.svc().datasets.GetDataset(c.caller(), c.Path("id"),
                              Render<ops::GetDataset, server::DatasetInfo>(c.reply));
}

void UpdateDataset(Call& c, Input<ops::UpdateDataset>& in) {
  if (!in.body.published) {
    return c.reply.Fail(ErrorCode::kInvalidArgument, "published is required");
  }
  if (!c.Admit()) return;
  c.svc().datasets.PublishDataset(c.caller(), c.Path("id"), *in.body.published,
                                  Render<ops::UpdateDataset, server::DatasetInfo>(c.reply));
}

void DeleteDataset(Call& c, Input<ops::DeleteDataset>&) {
  if (!c.Admit()) return;
  c.svc().datasets.DeleteDataset(c.caller(), c.Path("id"),
                                 [reply = c.reply](Result<std::string> id) {
                                   if (!id) return reply.Fail(id.error());
                                   reply.Answer<ops::DeleteDataset>({*id, true});
                                 });
}

// The path's {version}; false, having answered 400, when it is no version number (≥ 1).
bool PathVersion(Call& c, int32_t* version) {
  const std::string text = c.Path("version");
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *version);
  if (ec != std::errc() || end != text.data() + text.size() || *version < 1) {
    c.reply.Fail(ErrorCode::kInvalidArgument,
                 "path parameter 'version' must be a version number (≥ 1), got '" +
                     text.substr(0, 80) + "'");
    return false;
  }
  return true;
}

void DeleteDatasetVersion(Call& c, Input<ops::DeleteDatasetVersion>&) {
  int32_t version = 0;
  if (!PathVersion(c, &version) || !c.Admit()) return;
  c.svc().datasets.DeleteDatasetVersion(
      c.caller(), c.Path("id"), version,
      Render<ops::DeleteDatasetVersion, server::DatasetInfo>(c.reply));
}

void FindDatasetChunks(Call& c, Input<ops::FindDatasetChunks>& in) {
  for (const std::string& sha : in.body.chunks) {
    if (!CheckSha256(c, sha, "each of chunks")) return;
  }
  if (!c.Admit()) return;
  c.svc().datasets.FindDatasetChunks(c.caller(), c.Path("id"), std::move(in.body.chunks),
                                     [reply = c.reply](Result<std::vector<std::string>> missing) {
                                       if (!missing) return reply.Fail(missing.error());
                                       reply.Answer<ops::FindDatasetChunks>({std::move(*missing)});
                                     });
}

void PutDatasetChunk(Call& c, Input<ops::PutDatasetChunk>&) {
  const std::string sha = c.Path("sha256");
  if (!CheckSha256(c, sha, "sha256") || !c.Admit()) return;
  c.svc().datasets.PutDatasetChunk(c.caller(), c.Path("id"), sha, std::move(c.request.body),
                                   [reply = c.reply](Result<bool> added) {
                                     if (!added) return reply.Fail(added.error());
                                     reply.Answer<ops::PutDatasetChunk>({});
                                   });
}

void PushDatasetVersion(Call& c, Input<ops::PushDatasetVersion>& in) {
  proto::DatasetVersionPush& w = in.body;
  if (!CheckSha256(c, w.manifest, "manifest") || !c.Admit()) return;
  c.svc().datasets.PushDatasetVersion(
      c.caller(), c.Path("id"),
      server::DatasetPush{std::move(w.manifest), w.files, w.bytes, w.new_bytes},
      Render<ops::PushDatasetVersion, server::DatasetInfo>(c.reply));
}

void GetDatasetChunk(Call& c, Input<ops::GetDatasetChunk>&) {
  const std::string sha = c.Path("sha256");
  if (!CheckSha256(c, sha, "sha256") || !c.Admit()) return;
  c.svc().datasets.GetDatasetChunk(c.caller(), c.Path("id"), sha, SendBytes(c.reply));
}

// --- telemetry ---

void PushTelemetry(Call& c, Input<ops::PushTelemetry>& in) {
  Result<server::NodeTelemetry> batch = FromWire(std::move(in.body), c.Path("name"));
  if (!batch) return c.reply.Fail(batch.error());
  if (!c.Admit()) return;
  c.svc().telemetry.PushTelemetry(
      c.caller(), std::move(*batch),
      Render<ops::PushTelemetry, std::vector<server::OutputOffsets>>(c.reply));
}

void TaskLogs(Call& c, Input<ops::ReadTaskLogs>& in) {
  const proto::LogQuery& q = in.query;
  if (q.tail && q.offset) {
    return c.reply.Fail(ErrorCode::kInvalidArgument, "give either offset or tail, not both");
  }
  server::LogRequest request;
  request.stream = server::ParseOutputStream(q.stream).value_or(server::OutputStream::kStdout);
  request.offset = q.offset.value_or(0);
  request.tail_lines = q.tail.value_or(-1);
  request.max_bytes = q.max_bytes;
  request.wait_ms = q.wait_ms;
  if (!c.Admit()) return;
  const server::OutputStream stream = request.stream;
  c.svc().telemetry.ReadTaskLog(c.caller(), c.Path("id"), request,
                                [reply = c.reply, stream](Result<server::LogSlice> slice) {
                                  if (!slice) return reply.Fail(slice.error());
                                  reply.Answer<ops::ReadTaskLogs>(ToWire(*slice, stream));
                                });
}

// The span and resolution of a history query (proto::HistoryQuery's defaults); on failure it has
// answered.
bool ReadHistory(Call& c, const proto::HistoryQuery& q, int64_t* from_ms, int64_t* to_ms,
                 server::Resolution* resolution) {
  *resolution = q.resolution == "1m" ? server::Resolution::kMinute : server::Resolution::kRaw;
  *to_ms = q.to_ms.value_or(c.now_ms());
  *from_ms = q.from_ms.value_or(
      *to_ms - (*resolution == server::Resolution::kRaw ? kRawWindowMs : kMinuteWindowMs));
  if (*from_ms > *to_ms) {
    c.reply.Fail(ErrorCode::kInvalidArgument, "from_ms must not be after to_ms");
    return false;
  }
  return true;
}

void GetTaskMetrics(Call& c, Input<ops::GetTaskMetrics>& in) {
  int64_t from_ms = 0, to_ms = 0;
  server::Resolution resolution;
  if (!ReadHistory(c, in.query, &from_ms, &to_ms, &resolution) || !c.Admit()) return;
  c.svc().telemetry.GetTaskMetrics(c.caller(), c.Path("id"), from_ms, to_ms, resolution,
                                   Render<ops::GetTaskMetrics, server::TaskMetrics>(c.reply));
}

void GetNodeMetrics(Call& c, Input<ops::GetNodeMetrics>& in) {
  int64_t from_ms = 0, to_ms = 0;
  server::Resolution resolution;
  if (!ReadHistory(c, in.query, &from_ms, &to_ms, &resolution) || !c.Admit()) return;
  auto metrics =
      c.svc().telemetry.GetNodeMetrics(c.caller(), c.Path("name"), from_ms, to_ms, resolution);
  if (!metrics) return c.reply.Fail(metrics.error());
  c.reply.Answer<ops::GetNodeMetrics>(ToWire(*metrics));
}

void GetUsage(Call& c, Input<ops::GetUsage>&) {
  if (!c.Admit()) return;
  auto usage = c.svc().telemetry.GetUsage(c.caller());
  if (!usage) return c.reply.Fail(usage.error());
  c.reply.Answer<ops::GetUsage>(ToWire(*usage));
}

// --- projects ---

void CreateProject(Call& c, Input<ops::CreateProject>& in) {
  Result<Project> project = FromWire(std::move(in.body));
  if (!project) return c.reply.Fail(project.error());
  if (!c.Admit()) return;
  c.svc().accounts.CreateProject(c.caller(), std::move(*project),
                                 Render<ops::CreateProject, Project>(c.reply));
}

void ListProjects(Call& c, Input<ops::ListProjects>&) {
  if (!c.Admit()) return;
  Result<std::vector<Project>> projects = c.svc().accounts.ListProjects(c.caller());
  if (!projects) return c.reply.Fail(projects.error());
  proto::ProjectList list;
  for (const Project& p : *projects) list.projects.push_back(ToWire(p));
  c.reply.Answer<ops::ListProjects>(list);
}

void GetProject(Call& c, Input<ops::GetProject>&) {
  if (!c.Admit()) return;
  Result<Project> project = c.svc().accounts.GetProject(c.caller(), c.Path("id"));
  if (!project) return c.reply.Fail(project.error());
  c.reply.Answer<ops::GetProject>(ToWire(*project));
}

void PatchProject(Call& c, Input<ops::PatchProject>& in) {
  // The patch is checked on its own first, so a bad one never reaches the control plane.
  Project scratch;
  if (Status s = ApplyPatch(in.body, &scratch); !s) return c.reply.Fail(s.error());
  if (!c.Admit()) return;
  Result<Project> project = c.svc().accounts.GetProject(c.caller(), c.Path("id"));
  if (!project) return c.reply.Fail(project.error());
  if (Status s = ApplyPatch(in.body, &*project); !s) return c.reply.Fail(s.error());
  c.svc().accounts.UpdateProject(c.caller(), std::move(*project),
                                 Render<ops::PatchProject, Project>(c.reply));
}

void GetBalance(Call& c, Input<ops::GetBalance>&) {
  if (!c.Admit()) return;
  Result<server::Balance> balance = c.svc().billing.GetBalance(c.caller(), c.Path("id"));
  if (!balance) return c.reply.Fail(balance.error());
  c.reply.Answer<ops::GetBalance>(ToWire(*balance));
}

void AddCredit(Call& c, Input<ops::AddCredit>& in) {
  if (!c.Admit()) return;
  c.svc().billing.Credit(c.caller(), c.Path("id"), in.body.amount_micros, std::move(in.body.note),
                         Render<ops::AddCredit, LedgerEntry>(c.reply));
}

// from_ms / to_ms of a period (to_ms defaults to now); on failure it has answered.
bool ReadPeriod(Call& c, const proto::PeriodQuery& q, int64_t* from_ms, int64_t* to_ms) {
  *from_ms = q.from_ms.value_or(0);
  *to_ms = q.to_ms.value_or(c.now_ms());
  if (*from_ms > *to_ms) {
    c.reply.Fail(ErrorCode::kInvalidArgument,
                 "from_ms must be <= to_ms, got from_ms=" + std::to_string(*from_ms) +
                     " to_ms=" + std::to_string(*to_ms));
    return false;
  }
  return true;
}

void Ledger(Call& c, Input<ops::GetLedger>& in) {
  int64_t from_ms = 0, to_ms = 0;
  if (!ReadPeriod(c, in.query, &from_ms, &to_ms) || !c.Admit()) return;
  const int64_t offset = in.query.offset, limit = in.query.limit;
  c.svc().billing.Ledger(
      c.caller(), c.Path("id"), from_ms, to_ms, offset, limit,
      [reply = c.reply, offset, limit](Result<std::vector<LedgerEntry>> entries) {
        if (!entries) return reply.Fail(entries.error());
        proto::LedgerPage page;
        for (const LedgerEntry& e : *entries) page.entries.push_back(ToWire(e));
        if (static_cast<int64_t>(entries->size()) >= limit) page.next_offset = offset + limit;
        reply.Answer<ops::GetLedger>(page);
      });
}

void GetStatement(Call& c, Input<ops::GetStatement>& in) {
  int64_t from_ms = 0, to_ms = 0;
  if (!ReadPeriod(c, in.query, &from_ms, &to_ms) || !c.Admit()) return;
  c.svc().billing.GetStatement(c.caller(), c.Path("id"), from_ms, to_ms,
                               Render<ops::GetStatement, server::Statement>(c.reply));
}

// --- users and keys ---

void CreateUser(Call& c, Input<ops::CreateUser>& in) {
  Result<User> user = FromWire(std::move(in.body));
  if (!user) return c.reply.Fail(user.error());
  if (!c.Admit()) return;
  c.svc().accounts.CreateUser(c.caller(), std::move(*user), Render<ops::CreateUser, User>(c.reply));
}

void ListUsers(Call& c, Input<ops::ListUsers>&) {
  if (!c.Admit()) return;
  Result<std::vector<User>> users = c.svc().accounts.ListUsers(c.caller());
  if (!users) return c.reply.Fail(users.error());
  proto::UserList list;
  for (const User& u : *users) list.users.push_back(ToWire(u));
  c.reply.Answer<ops::ListUsers>(list);
}

void PatchUser(Call& c, Input<ops::PatchUser>& in) {
  const std::string id = c.Path("id");
  if (!c.Admit()) return;
  // The control plane has no GetUser: find the user in the caller's view of the users.
  Result<std::vector<User>> users = c.svc().accounts.ListUsers(c.caller());
  if (!users) return c.reply.Fail(users.error());
  auto it = std::find_if(users->begin(), users->end(), [&](const User& u) { return u.id == id; });
  if (it == users->end()) return c.reply.Fail(ErrorCode::kNotFound, "user '" + id + "' not found");
  User user = std::move(*it);
  if (Status s = ApplyPatch(in.body, &user); !s) return c.reply.Fail(s.error());
  c.svc().accounts.UpdateUser(c.caller(), std::move(user), Render<ops::PatchUser, User>(c.reply));
}

void CreateKey(Call& c, Input<ops::CreateKey>& in) {
  if (!c.Admit()) return;
  c.svc().accounts.CreateAccessKey(c.caller(), c.Path("id"), std::move(in.body.description),
                                   Render<ops::CreateKey, server::NewAccessKey>(c.reply));
}

void ListKeys(Call& c, Input<ops::ListKeys>&) {
  if (!c.Admit()) return;
  Result<std::vector<AccessKey>> keys = c.svc().accounts.ListAccessKeys(c.caller(), c.Path("id"));
  if (!keys) return c.reply.Fail(keys.error());
  proto::AccessKeyList list;
  for (const AccessKey& k : *keys) list.keys.push_back(ToWire(k));
  c.reply.Answer<ops::ListKeys>(list);
}

void RevokeKey(Call& c, Input<ops::RevokeKey>&) {
  if (!c.Admit()) return;
  c.svc().accounts.RevokeAccessKey(c.caller(), c.Path("access_key"),
                                   Render<ops::RevokeKey, AccessKey>(c.reply));
}

// An SSH key as the answer of Op, or the error.
template <typename Op>
server::Done<SshKey> RenderSshKey(const Reply& reply, std::string user) {
  return [reply, user = std::move(user)](Result<SshKey> key) {
    if (!key) return reply.Fail(key.error());
    reply.Answer<Op>(ToWire(user, *key));
  };
}

void AddSshKey(Call& c, Input<ops::AddSshKey>& in) {
  if (!c.Admit()) return;
  const std::string user = c.Path("id");
  c.svc().accounts.AddSshKey(c.caller(), user, std::move(in.body.name), in.body.public_key,
                             RenderSshKey<ops::AddSshKey>(c.reply, user));
}

void ListSshKeys(Call& c, Input<ops::ListSshKeys>&) {
  if (!c.Admit()) return;
  const std::string user = c.Path("id");
  Result<std::vector<SshKey>> keys = c.svc().accounts.ListSshKeys(c.caller(), user);
  if (!keys) return c.reply.Fail(keys.error());
  proto::SshKeyList list;
  for (const SshKey& k : *keys) list.keys.push_back(ToWire(user, k));
  c.reply.Answer<ops::ListSshKeys>(list);
}

void RemoveSshKey(Call& c, Input<ops::RemoveSshKey>&) {
  if (!c.Admit()) return;
  const std::string user = c.Path("id");
  c.svc().accounts.RemoveSshKey(c.caller(), user, c.Path("name"),
                                RenderSshKey<ops::RemoveSshKey>(c.reply, user));
}

// --- prices ---

void ListPrices(Call& c, Input<ops::ListPrices>&) {
  if (!c.Admit()) return;
  Result<std::vector<Price>> prices = c.svc().billing.ListPrices(c.caller());
  if (!prices) return c.reply.Fail(prices.error());
  proto::PriceList list;
  for (const Price& p : *prices) list.prices.push_back(ToWire(p));
  c.reply.Answer<ops::ListPrices>(list);
}

void SetPrice(Call& c, Input<ops::SetPrice>& in) {
  Result<Price> price = FromWire(std::move(in.body), c.now_ms());
  if (!price) return c.reply.Fail(price.error());
  if (!c.Admit()) return;
  c.svc().billing.SetPrice(c.caller(), std::move(*price), Render<ops::SetPrice, Price>(c.reply));
}

// --- join tokens and agents' own credentials ---

void CreateJoinToken(Call& c, Input<ops::CreateJoinToken>& in) {
  if (!c.Admit()) return;
  c.svc().accounts.CreateJoinToken(c.caller(), std::move(in.body.description),
                                   in.body.expires_in_ms,
                                   Render<ops::CreateJoinToken, server::NewJoinToken>(c.reply));
}

void ListJoinTokens(Call& c, Input<ops::ListJoinTokens>&) {
  if (!c.Admit()) return;
  Result<std::vector<server::JoinTokenView>> tokens = c.svc().accounts.ListJoinTokens(c.caller());
  if (!tokens) return c.reply.Fail(tokens.error());
  proto::JoinTokenList list;
  for (const server::JoinTokenView& t : *tokens) list.join_tokens.push_back(ToWire(t));
  c.reply.Answer<ops::ListJoinTokens>(list);
}

void ListAudit(Call& c, Input<ops::ListAudit>& in) {
  if (!c.Admit()) return;
  const int64_t limit = in.query.limit;
  server::AuditFilter filter{.after_seq = in.query.after,
                             .limit = limit,
                             .actor = std::move(in.query.actor),
                             .target = std::move(in.query.target)};
  c.svc().accounts.ListAudit(c.caller(), filter,
                             [reply = c.reply, limit](Result<std::vector<AuditEntry>> entries) {
                               if (!entries) return reply.Fail(entries.error());
                               proto::AuditPage page;
                               for (const AuditEntry& e : *entries)
                                 page.entries.push_back(ToWire(e));
                               if (static_cast<int64_t>(entries->size()) >= limit)
                                 page.next_after = entries->back().seq;
                               reply.Answer<ops::ListAudit>(page);
                             });
}

void RevokeJoinToken(Call& c, Input<ops::RevokeJoinToken>&) {
  if (!c.Admit()) return;
  c.svc().accounts.RevokeJoinToken(c.caller(), c.Path("id"),
                                   Render<ops::RevokeJoinToken, server::JoinTokenView>(c.reply));
}

// Public: the join token in the body is the credential.
void JoinNode(Call& c, Input<ops::JoinNode>& in) {
  c.svc().agents.JoinNode(in.body.token, in.body.node,
                          Render<ops::JoinNode, server::AgentCredentials>(c.reply));
}

// The node's agent opens its tunnel (docs/api.md "The tunnel"): admins and the node's own agent.
void OpenTunnel(Call& c, Input<ops::OpenTunnel>&) {
  const std::string node = c.Path("name");
  if (!c.caller().IsAdmin() && c.caller().agent_node != node) {
    return c.reply.Fail(ErrorCode::kPermissionDenied,
                        "only node " + node + "'s agent (or an admin) may open its tunnel");
  }
  if (!c.request.websocket_upgrade) {
    return c.reply.Fail(ErrorCode::kInvalidArgument,
                        "GET " + std::string(c.request.Path()) +
                            " is a WebSocket: send the handshake (Upgrade: websocket)");
  }
  if (!c.Admit()) return;
  std::shared_ptr<Duplex> websocket = c.reply.AcceptWebSocket();
  if (!websocket) return;  // the client went away
  c.api.tunnels->Attach(node, std::move(websocket));
}

// A raw byte stream to a task's port (gpupool port-forward), over a WebSocket.
// False, having answered 400, when the request is no WebSocket handshake.
bool RequireWebSocket(Call& c) {
  if (c.request.websocket_upgrade) return true;
  c.reply.Fail(ErrorCode::kInvalidArgument,
               "GET " + std::string(c.request.Path()) +
                   " is a WebSocket: send the handshake (Upgrade: websocket)");
  return false;
}

// What joins a stream into a task, once open, to the caller's WebSocket (or answers its error);
// the opening and what the caller sends are the user's activity on the task.
std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> PipeToWebSocket(Call& c) {
  return [reply = c.reply, activity = ActivityNoter(c.api.svc, c.Path("id"))](
             Result<std::shared_ptr<tunnel::Stream>> stream) {
    if (!stream) return reply.Fail(stream.error());
    std::shared_ptr<Duplex> websocket = reply.AcceptWebSocket();
    if (!websocket) return (*stream)->Reset("the client went away");
    activity();
    tunnel::Pipe(*stream, std::move(websocket), activity);
  };
}

// The path's {port}; false, having answered 400, when it is no TCP port.
bool PathPort(Call& c, int32_t* port) {
  const std::string text = c.Path("port");
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *port);
  if (ec != std::errc() || end != text.data() + text.size() || *port < 1 || *port > 65535) {
    c.reply.Fail(ErrorCode::kInvalidArgument,
                 "path parameter 'port' must be a TCP port (1..65535), got '" + text + "'");
    return false;
  }
  return true;
}

void ForwardPort(Call& c, Input<ops::ForwardPort>&) {
  int32_t port = 0;
  if (!PathPort(c, &port) || !RequireWebSocket(c) || !c.Admit()) return;
  OpenTaskPort(c.api.svc, *c.api.tunnels, c.caller(), c.Path("id"), port, PipeToWebSocket(c));
}

void CreatePortLink(Call& c, Input<ops::CreatePortLink>& in) {
  int32_t port = 0;
  if (!PathPort(c, &port) || !c.Admit()) return;
  const server::Caller caller = c.caller();
  if (caller.IsAgent() || caller.IsTask()) {
    return c.reply.Fail(ErrorCode::kPermissionDenied, "only users open tasks' ports");
  }
  const int64_t expires_ms = c.now_ms() + in.body.ttl_s * 1000;
  c.svc().tasks.GetTask(
      caller, c.Path("id"),
      [reply = c.reply, auth = &c.svc().auth, origin = c.api.gateway_origin, caller, port,
       expires_ms](Result<server::TaskView> view) {
        if (!view) return reply.Fail(view.error());
        const Task& t = view->task;
        if (Status declared = DeclaresPort(t, port); !declared) return reply.Fail(declared.error());
        // Signed with the caller's own key, as gpupool open signs it: the link is the caller's.
        Result<server::KeyGrant> key = auth->LookupKey(caller.access_key);
        if (!key) return reply.Fail(key.error());
        const std::string token =
            SignGatewayLink(caller.access_key, key->secret, t.id, port, expires_ms);
        reply.Answer<ops::CreatePortLink>(
            proto::GatewayLink{GatewayPortUrl(origin, t.id, port) + "?" +
                                   std::string(kGatewayLinkParam) + "=" + PercentEncode(token),
                               expires_ms});
      });
}

void ExecTask(Call& c, Input<ops::ExecTask>&) {
  if (!RequireWebSocket(c) || !c.Admit()) return;
  OpenTaskExec(c.api.svc, *c.api.tunnels, c.caller(), c.Path("id"), PipeToWebSocket(c));
}

void SshTask(Call& c, Input<ops::SshTask>&) {
  if (!RequireWebSocket(c) || !c.Admit()) return;
  OpenTaskSsh(c.api.svc, *c.api.tunnels, c.caller(), c.Path("id"), PipeToWebSocket(c));
}

// --- console sessions (docs/api.md "Console sessions") ---

std::vector<std::pair<std::string, std::string>> SessionHeaders(std::string set_cookie) {
  // The answer names the session's CSRF token: no cache may keep it.
  return {{"Set-Cookie", std::move(set_cookie)}, {"Cache-Control", "no-store"}};
}

void CreateSession(Call& c, Input<ops::CreateSession>& in) {
  if (!c.Admit()) return;
  const int64_t ttl_s = in.body.ttl_s;
  c.svc().auth.CreateSession(
      c.caller(), ttl_s * 1000,
      [reply = c.reply, ttl_s, secure = c.request.tls](Result<server::NewSession> created) {
        if (!created) return reply.Fail(created.error());
        reply.Answer<ops::CreateSession>(
            ToWire(created->grant), ops::CreateSession::kInfo.status,
            SessionHeaders(SessionSetCookie(created->cookie, ttl_s, secure)));
      });
}

void GetSession(Call& c, Input<ops::GetSession>&) {
  c.reply.Answer<ops::GetSession>(ToWire(*c.session), ops::GetSession::kInfo.status,
                                  {{"Cache-Control", "no-store"}});
}

void DeleteSession(Call& c, Input<ops::DeleteSession>&) {
  c.svc().auth.DeleteSession(std::string(*CookieValue(c.request.cookie, kSessionCookie)));
  c.reply.Answer<ops::DeleteSession>({true}, ops::DeleteSession::kInfo.status,
                                     SessionHeaders(ClearedSessionSetCookie(c.request.tls)));
}

// --- console: live events (docs/api.md "Live events") ---

// One event as its frame on the stream (proto/events.h names each event's type).
std::string EventFrameOf(const server::Event& event) {
  namespace events = proto::events;
  struct Frame {
    std::string operator()(const server::StreamStarted& e) const {
      return proto::EventFrame<events::Hello>(ToWire(e));
    }
    std::string operator()(const Task& t) const {
      return proto::EventFrame<events::TaskChanged>(ToWire(t));
    }
    std::string operator()(const server::TaskDeletedEvent& e) const {
      return proto::EventFrame<events::TaskDeleted>(ToWire(e));
    }
    std::string operator()(const server::TaskUsageEvent& e) const {
      return proto::EventFrame<events::Usage>(ToWire(e));
    }
    std::string operator()(const server::TaskLogEvent& e) const {
      return proto::EventFrame<events::Log>(ToWire(e));
    }
    std::string operator()(const server::TaskMetricsEvent& e) const {
      return proto::EventFrame<events::Metrics>(ToWire(e));
    }
    std::string operator()(const server::NodeUsageEvent& e) const {
      return proto::EventFrame<events::NodeUsage>(ToWire(e));
    }
    std::string operator()(const server::NodeView& n) const {
      return proto::EventFrame<events::NodeChanged>(ToWire(n));
    }
  };
  return std::visit(Frame{}, event);
}

// A subscriber's events, framed into its HTTP stream. A client that reads too slowly — the
// hub's queue or the stream's buffer is full — gets `overflow` as the stream's last event.
class StreamSink final : public server::EventSink {
 public:
  // `api` is copied (its clock): the hub's thread calls the sink long after the request.
  StreamSink(std::shared_ptr<ResponseStream> stream, const State& api)
      : stream_(std::move(stream)), api_(api) {}

  bool Deliver(const server::Event& event) override { return Send(EventFrameOf(event)); }
  bool KeepAlive() override { return Send(std::string(proto::kKeepAliveFrame)); }
  void Overflowed(size_t limit) override {
    EndWithOverflow("more than " + std::to_string(limit) + " events waited for this client");
  }

 private:
  bool Send(std::string frame) {
    if (stream_->Write(std::move(frame))) return true;
    // The stream's buffer is full (or the client is gone, and End does nothing).
    EndWithOverflow("the client read too slowly: its stream's buffer is full");
    return false;
  }
  void EndWithOverflow(std::string why) {
    stream_->End(proto::EventFrame<proto::events::Overflow>(
        {api_.now_ms(), std::move(why) + "; reconnect and read the current state again"}));
  }

  const std::shared_ptr<ResponseStream> stream_;
  const State api_;
};

void WatchEvents(Call& c, Input<ops::WatchEvents>& in) {
  server::EventInterest interest;
  interest.task = in.query.task.value_or("");
  interest.logs_from = in.query.logs_from;
  interest.nodes = in.query.nodes;
  if (interest.logs_from && interest.task.empty()) {
    return c.reply.Fail(ErrorCode::kInvalidArgument, "logs_from needs task: whose log to start");
  }
  if (!c.Admit()) return;
  c.svc().events.CheckWatch(
      c.caller(), interest,
      [api = c.api, reply = c.reply, caller = c.caller(), interest](Status allowed) {
        if (!allowed) return reply.Fail(allowed.error());
        HttpResponse head;
        head.content_type = "text/event-stream";
        head.headers.emplace_back("Cache-Control", "no-store");
        std::shared_ptr<ResponseStream> stream = reply.Stream(std::move(head));
        if (!stream) return;  // the client went away
        server::EventService* events = &api.svc.events;
        const uint64_t id =
            events->Subscribe(caller, interest, std::make_shared<StreamSink>(stream, api));
        stream->OnClosed([events, id] { events->Unsubscribe(id); });
      });
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

// A task's own token reads that task's usage and metrics (and the task itself), nothing else.
bool TaskTokenMayCall(const Call& call, const proto::OperationInfo& op) {
  if (!call.task) return true;
  const bool read_of_its_task =
      op.method == std::string_view("GET") &&
      (op.path == ops::GetTaskMetrics::kInfo.path || op.path == ops::GetTask::kInfo.path);
  return read_of_its_task && call.params.Get("id") == call.task->task_id;
}

// One route: an operation and the binding that runs its handler.
struct Route {
  const proto::OperationInfo* info;
  std::string pattern;
  void (*run)(Call&);
};

template <typename Op, HandlerFn<Op> Handler>
Route Bind() {
  return {&Op::kInfo, std::string(Op::kInfo.path), &Run<Op, Handler>};
}

// Static, so the patterns outlive every Reply that names one.
const std::vector<Route>& Routes() {
  static const std::vector<Route> kRoutes = {
      Bind<ops::Healthz, &Healthz>(),
      Bind<ops::Metrics, &Metrics>(),
      Bind<ops::GetOpenApi, &GetOpenApi>(),
      Bind<ops::GetWhoAmI, &WhoAmI>(),
      Bind<ops::SubmitTask, &SubmitTask>(),
      Bind<ops::ListTasks, &ListTasks>(),
      Bind<ops::GetTask, &GetTask>(),
      Bind<ops::DeleteTask, &DeleteTask>(),
      Bind<ops::StopTask, &StopTask>(),
      Bind<ops::SubmitTaskArray, &SubmitTaskArray>(),
      Bind<ops::GetTaskArray, &GetTaskArray>(),
      Bind<ops::StopTaskArray, &StopTaskArray>(),
      Bind<ops::ReleaseTaskArray, &ReleaseTaskArray>(),
      Bind<ops::SubmitJob, &SubmitJob>(),
      Bind<ops::GetJob, &GetJob>(),
      Bind<ops::StopJob, &StopJob>(),
      Bind<ops::ReleaseJob, &ReleaseJob>(),
      Bind<ops::ReleaseTask, &ReleaseTask>(),
      Bind<ops::ListTaskEvents, &TaskEvents>(),
      Bind<ops::GetTaskCost, &TaskCost>(),
      Bind<ops::ListFiles, &ListFiles>(),
      Bind<ops::ReadFile, &ReadFileContent>(),
      Bind<ops::GetUpload, &UploadStatus>(),
      Bind<ops::PutUploadChunk, &PutUploadChunk>(),
      Bind<ops::SnapshotTask, &SnapshotTask>(),
      Bind<ops::ResumeTask, &ResumeTask>(),
      Bind<ops::ListSnapshots, &ListSnapshots>(),
      Bind<ops::GetSnapshot, &GetSnapshot>(),
      Bind<ops::DeleteSnapshot, &DeleteSnapshot>(),
      Bind<ops::CommitSnapshot, &CommitSnapshot>(),
      Bind<ops::FailSnapshot, &FailSnapshot>(),
      Bind<ops::CreateVolume, &CreateVolume>(),
      Bind<ops::ListVolumes, &ListVolumes>(),
      Bind<ops::GetVolume, &GetVolume>(),
      Bind<ops::UpdateVolume, &UpdateVolume>(),
      Bind<ops::DeleteVolume, &DeleteVolume>(),
      Bind<ops::VolumeRemoved, &VolumeRemoved>(),
      Bind<ops::FindMissingChunks, &FindMissingChunks>(),
      Bind<ops::PutChunk, &PutChunk>(),
      Bind<ops::GetChunk, &GetChunk>(),
      Bind<ops::CreateDataset, &CreateDataset>(),
      Bind<ops::ListDatasets, &ListDatasets>(),
      Bind<ops::GetDataset, &GetDataset>(),
      Bind<ops::UpdateDataset, &UpdateDataset>(),
      Bind<ops::DeleteDataset, &DeleteDataset>(),
      Bind<ops::DeleteDatasetVersion, &DeleteDatasetVersion>(),
      Bind<ops::FindDatasetChunks, &FindDatasetChunks>(),
      Bind<ops::PutDatasetChunk, &PutDatasetChunk>(),
      Bind<ops::PushDatasetVersion, &PushDatasetVersion>(),
      Bind<ops::GetDatasetChunk, &GetDatasetChunk>(),
      Bind<ops::CommitUpload, &CommitUpload>(),
      Bind<ops::ListNodes, &ListNodes>(),
      Bind<ops::GetNode, &GetNode>(),
      Bind<ops::CordonNode, &Cordon>(),
      Bind<ops::UncordonNode, &Uncordon>(),
      Bind<ops::DrainNode, &Drain>(),
      Bind<ops::RegisterNode, &RegisterNode>(),
      Bind<ops::Heartbeat, &Heartbeat>(),
      Bind<ops::WatchAssignments, &WatchAssignments>(),
      Bind<ops::ReportTask, &ReportTask>(),
      Bind<ops::PushTelemetry, &PushTelemetry>(),
      Bind<ops::ReadTaskLogs, &TaskLogs>(),
      Bind<ops::GetTaskMetrics, &GetTaskMetrics>(),
      Bind<ops::GetNodeMetrics, &GetNodeMetrics>(),
      Bind<ops::GetUsage, &GetUsage>(),
      Bind<ops::CreateProject, &CreateProject>(),
      Bind<ops::ListProjects, &ListProjects>(),
      Bind<ops::GetProject, &GetProject>(),
      Bind<ops::PatchProject, &PatchProject>(),
      Bind<ops::GetBalance, &GetBalance>(),
      Bind<ops::AddCredit, &AddCredit>(),
      Bind<ops::GetLedger, &Ledger>(),
      Bind<ops::GetStatement, &GetStatement>(),
      Bind<ops::CreateUser, &CreateUser>(),
      Bind<ops::ListUsers, &ListUsers>(),
      Bind<ops::PatchUser, &PatchUser>(),
      Bind<ops::CreateKey, &CreateKey>(),
      Bind<ops::ListKeys, &ListKeys>(),
      Bind<ops::RevokeKey, &RevokeKey>(),
      Bind<ops::AddSshKey, &AddSshKey>(),
      Bind<ops::ListSshKeys, &ListSshKeys>(),
      Bind<ops::RemoveSshKey, &RemoveSshKey>(),
      Bind<ops::ListPrices, &ListPrices>(),
      Bind<ops::SetPrice, &SetPrice>(),
      Bind<ops::CreateJoinToken, &CreateJoinToken>(),
      Bind<ops::ListJoinTokens, &ListJoinTokens>(),
      Bind<ops::ListAudit, &ListAudit>(),
      Bind<ops::RevokeJoinToken, &RevokeJoinToken>(),
      Bind<ops::OpenTunnel, &OpenTunnel>(),
      Bind<ops::JoinNode, &JoinNode>(),
      Bind<ops::ForwardPort, &ForwardPort>(),
      Bind<ops::CreatePortLink, &CreatePortLink>(),
      Bind<ops::ExecTask, &ExecTask>(),
      Bind<ops::SshTask, &SshTask>(),
      Bind<ops::CreateSession, &CreateSession>(),
      Bind<ops::GetSession, &GetSession>(),
      Bind<ops::DeleteSession, &DeleteSession>(),
      Bind<ops::WatchEvents, &WatchEvents>(),
  };
  return kRoutes;
}

// Whether a path belongs to the API (its routes, and 404 JSON for unknown ones) rather than to
// the console's files.
bool IsApiPath(std::string_view path) {
  return path == "/v1" || path.starts_with("/v1/") || path == "/healthz" || path == "/metrics";
}

// Who calls: by signature, or by console session where the route allows one (a signed route
// takes a session when the request has no Authorization header but the session's cookie). On
// failure the error to answer.
Status Authenticate(Call& call, proto::Auth auth, int64_t now_ms) {
  if (auth == proto::Auth::kPublic) return {};
  const HttpRequest& request = call.request;
  const bool by_session = auth == proto::Auth::kSession ||
                          (auth == proto::Auth::kSigned && request.authorization.empty() &&
                           CookieValue(request.cookie, kSessionCookie).has_value());
  if (auth == proto::Auth::kSigned && request.authorization.starts_with(kTaskTokenScheme) &&
      request.authorization.size() > kTaskTokenScheme.size() &&
      request.authorization[kTaskTokenScheme.size()] == ' ') {
    // A bearer credential with no nonce: only reads are open to it (TaskTokenMayCall).
    Result<server::Caller> task = call.api.svc.auth.LookupTaskToken(
        std::string(TrimBlanks(request.authorization.substr(kTaskTokenScheme.size()))));
    if (!task) return tl::unexpected(task.error());
    call.task = std::move(*task);
  } else if (by_session) {
    Result<server::SessionGrant> session = VerifySession(call.api.svc.auth, request);
    if (!session) return tl::unexpected(session.error());
    call.session = std::move(*session);
  } else {
    Result<Verified> verified = VerifyRequest(call.api.svc.auth, request, now_ms);
    if (!verified) return tl::unexpected(verified.error());
    call.verified = std::move(*verified);
  }
  return {};
}

// The answer to a request on a connection the HTTP server accepted past its general limit
// (HttpRequest::reserved) that is not an agent's or an admin's.
Error ReservedConnectionRefused() {
  Error e{ErrorCode::kUnavailable,
          "the server is at its connection limit: connections past it are kept for agents and "
          "admins; retry later"};
  e.retry_after_ms = 1000;
  return e;
}

// The route name the console's answers are reported under.
const std::string& ConsoleRoute() {
  static const std::string kName = "(console)";
  return kName;
}

}  // namespace

struct Api::Impl {
  Impl(server::Services services, ApiOptions options)
      : state{services, std::move(options.now_ms), std::move(options.console), &tunnels,
              std::move(options.gateway_origin)} {
    for (size_t i = 0; i < Routes().size(); ++i) {
      const Route& r = Routes()[i];
      // The table is static and well formed; a failure here is a programming error.
      if (Status s = router.Add(std::string(r.info->method), r.pattern, static_cast<int>(i)); !s) {
        std::abort();
      }
    }
  }

  void Handle(HttpRequest request, Responder respond);

  TunnelHub tunnels;  // before state and gateway, which point to it
  // Running tasks' files through the tunnels (the FileService holds it weakly: gone with the Api).
  std::shared_ptr<TunnelNodeFiles> node_files = std::make_shared<TunnelNodeFiles>(tunnels);
  State state;
  Gateway gateway{state.svc, tunnels, [this] { return state.now_ms(); }, state.gateway_origin};
  Router router;
};

void Api::Impl::Handle(HttpRequest request, Responder respond) {
  const Clock::time_point start = Clock::now();
  if (request.reserved && !IsApiPath(request.Path())) {
    // The gateway's and the console's callers are no agents; an admin uses the API.
    return Reply(&state.svc.operations, &ConsoleRoute(), start, std::move(respond))
        .Fail(ReservedConnectionRefused());
  }
  if (gateway.Serves(request)) return gateway.Handle(std::move(request), std::move(respond));
  if (state.console && (request.method == "GET" || request.method == "HEAD") &&
      !IsApiPath(request.Path())) {
    return Reply(&state.svc.operations, &ConsoleRoute(), start, std::move(respond))
        .Send(state.console(request));
  }
  const Router::Match match = router.Find(request.method, request.Path());
  Reply reply(&state.svc.operations, match.pattern, start, std::move(respond));
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
  Call call{state,        request,      match.params, std::move(reply),
            std::nullopt, std::nullopt, std::nullopt};
  if (Status ok = Authenticate(call, route.info->auth, state.now_ms()); !ok) {
    return call.reply.Fail(ok.error());
  }
  if (request.reserved && !call.Privileged()) {
    return call.reply.Fail(ReservedConnectionRefused());
  }
  if (!TaskTokenMayCall(call, *route.info)) {
    return call.reply.Fail(ErrorCode::kPermissionDenied,
                           "the token of task " + call.task->task_id +
                               " reads only that task's usage and metrics (GET /v1/tasks/" +
                               call.task->task_id + "/metrics), not " + request.method + " " +
                               std::string(request.Path()));
  }
  if ((call.verified || call.session) && !AgentMayCall(call.caller(), route.pattern)) {
    return call.reply.Fail(ErrorCode::kPermissionDenied,
                           "access key " + call.caller().access_key +
                               " is the agent credential of node " + call.caller().agent_node +
                               ": it may call only the agent routes (/v1/agent/…)");
  }
  route.run(call);
}

Api::Api(server::Services services, ApiOptions options)
    : impl_(std::make_unique<Impl>(services, std::move(options))) {
  impl_->state.svc.files.AttachNodeFiles(impl_->node_files);  // running tasks' files
}

Api::~Api() = default;

void Api::Handle(HttpRequest request, Responder respond) {
  impl_->Handle(std::move(request), std::move(respond));
}

TunnelHub& Api::tunnels() { return impl_->tunnels; }

Handler Api::AsHandler() {
  return [this](HttpRequest request, Responder respond) {
    Handle(std::move(request), std::move(respond));
  };
}

std::vector<std::pair<std::string, std::string>> Api::RouteTable() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Route& r : Routes()) out.emplace_back(std::string(r.info->method), r.pattern);
  return out;
}

}  // namespace gpupool::api
