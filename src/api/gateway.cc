// The gateway (see gateway.h): authentication, the task's port through its node's tunnel, the
// request passed on, the connection handed over to the stream.
#include "api/gateway.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <utility>

#include "api/signing.h"
#include "api/url.h"
#include "core/task_ports.h"
#include "core/text.h"
#include "proto/describe.h"

namespace gpupool::api {
namespace {

using Clock = std::chrono::steady_clock;

// How long the cookie a signed link's exchange sets lives.
constexpr int64_t kGatewaySessionS = 12 * 3600;

const std::string& GatewayRoute() {
  static const std::string kName = "(gateway)";
  return kName;
}

// A gateway path's parts: /t/<task>/<port><rest>.
struct Target {
  std::string task;
  int32_t port = 0;
  std::string_view rest;  // "" or starting with '/'
};

Result<Target> ParseTarget(std::string_view path) {
  std::string_view p = path.substr(3);  // after "/t/"
  const size_t slash = p.find('/');
  Target t;
  t.task = std::string(p.substr(0, slash));
  if (Status ok = proto::CheckStringValue("the gateway path's task", t.task,
                                          {.max_bytes = 128, .format = proto::Format::kIdentifier});
      !ok) {
    return NotFound(ok.error().message);
  }
  if (slash == std::string_view::npos)
    return NotFound("no port in gateway path " + std::string(path));
  p.remove_prefix(slash + 1);
  const size_t end = std::min(p.find('/'), p.size());
  const std::string_view digits = p.substr(0, end);
  const auto [last, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), t.port);
  if (ec != std::errc() || last != digits.data() + digits.size() || t.port < 1 || t.port > 65535) {
    return NotFound("gateway path " + std::string(path) + ": '" + std::string(digits) +
                    "' is not a port (1..65535)");
  }
  t.rest = p.substr(end);
  return t;
}

// The header `name` of a request whose headers were all kept; empty when absent.
std::string_view Header(const HttpRequest& request, std::string_view name) {
  for (const auto& [n, v] : request.headers) {
    if (EqualsIgnoringCase(n, name)) return v;
  }
  return {};
}

// `cookie_header` without the pool's own cookies (the app never sees the user's credentials).
std::string WithoutPoolCookies(std::string_view cookie_header) {
  std::string out;
  while (!cookie_header.empty()) {
    const size_t semi = cookie_header.find(';');
    std::string_view pair = TrimBlanks(cookie_header.substr(0, semi));
    cookie_header =
        semi == std::string_view::npos ? std::string_view() : cookie_header.substr(semi + 1);
    const std::string_view name = TrimBlanks(pair.substr(0, pair.find('=')));
    if (pair.empty() || name == kSessionCookie || name == kGatewayCookie) continue;
    if (!out.empty()) out += "; ";
    out += pair;
  }
  return out;
}

// The request as the app gets it.
std::string Forwarded(const HttpRequest& request, std::string_view base_path) {
  static constexpr std::string_view kHopByHop[] = {"connection",
                                                   "keep-alive",
                                                   "proxy-connection",
                                                   "transfer-encoding",
                                                   "te",
                                                   "trailer",
                                                   "upgrade",
                                                   "content-length",
                                                   "x-forwarded-proto",
                                                   "x-forwarded-host",
                                                   "x-forwarded-prefix"};
  std::string out = request.method + " " + request.target + " HTTP/1.1\r\n";
  for (const auto& [name, value] : request.headers) {
    if (std::any_of(std::begin(kHopByHop), std::end(kHopByHop),
                    [&](std::string_view h) { return EqualsIgnoringCase(name, h); })) {
      continue;
    }
    std::string v = value;
    if (EqualsIgnoringCase(name, "cookie")) {
      v = WithoutPoolCookies(value);
      if (v.empty()) continue;
    }
    if (EqualsIgnoringCase(name, "authorization") && value.starts_with(kAuthScheme)) continue;
    out += name + ": " + v + "\r\n";
  }
  if (request.websocket_upgrade) {
    out += "Connection: Upgrade\r\nUpgrade: " + std::string(Header(request, "upgrade")) + "\r\n";
  } else {
    out += "Connection: close\r\n";
  }
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT" ||
      request.method == "PATCH") {
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  out += "X-Forwarded-Proto: http\r\n";
  if (!request.host.empty()) out += "X-Forwarded-Host: " + request.host + "\r\n";
  out += "X-Forwarded-Prefix: " + std::string(base_path) + "\r\n\r\n";
  out += request.body;
  return out;
}

}  // namespace

bool IsGatewayPath(std::string_view path) { return path.starts_with("/t/"); }

namespace {

// kFailedPrecondition unless `t` runs on a node now; `what` is what only a running task offers.
Status RunsNow(const Task& t, const std::string& what) {
  if (t.state == TaskState::kRunning && t.placement) return {};
  return MakeError(ErrorCode::kFailedPrecondition, "task " + t.id + " is " +
                                                       std::string(TaskStateName(t.state)) + ": " +
                                                       what + " while it runs");
}

}  // namespace

Status DeclaresPort(const Task& t, int32_t port) {
  if (std::find(t.ports.begin(), t.ports.end(), port) != t.ports.end()) return {};
  return NotFound("task " + t.id + " declares no port " + std::to_string(port) +
                  (t.ports.empty() ? std::string(" (it declares none; submit with --port)")
                                   : " (its ports: " + FormatPortList(t.ports) + ")"));
}

void OpenTaskPort(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                  const std::string& task_id, int32_t port,
                  std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done) {
  services.tasks.GetTask(
      caller, task_id,
      [&tunnels, task_id, port, done = std::move(done)](Result<server::TaskView> view) {
        if (!view) return done(tl::unexpected(view.error()));
        const Task& t = view->task;
        if (Status declared = DeclaresPort(t, port); !declared) {
          return done(tl::unexpected(declared.error()));
        }
        if (Status runs = RunsNow(t, "its ports are served"); !runs) {
          return done(tl::unexpected(runs.error()));
        }
        tunnels.Open(t.placement->node, proto::TunnelOpen{task_id, "port", port, {}}, done);
      });
}

void OpenTaskExec(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                  const std::string& task_id,
                  std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done) {
  services.tasks.GetTask(
      caller, task_id, [&tunnels, task_id, done = std::move(done)](Result<server::TaskView> view) {
        if (!view) return done(tl::unexpected(view.error()));
        const Task& t = view->task;
        if (Status runs = RunsNow(t, "commands run in it"); !runs) {
          return done(tl::unexpected(runs.error()));
        }
        tunnels.Open(t.placement->node, proto::TunnelOpen{task_id, "exec", 0, {}}, done);
      });
}

void OpenTaskSsh(server::Services& services, TunnelHub& tunnels, const server::Caller& caller,
                 const std::string& task_id,
                 std::function<void(Result<std::shared_ptr<tunnel::Stream>>)> done) {
  Result<std::vector<SshKey>> own = services.accounts.ListSshKeys(caller, caller.user_id);
  if (own && own->empty()) {
    return done(MakeError(ErrorCode::kFailedPrecondition,
                          "you have no SSH key: add your public key first (gpupool ssh-key add "
                          "~/.ssh/id_ed25519.pub)"));
  }
  services.tasks.GetTask(caller, task_id,
                         [&services, &tunnels, caller, task_id,
                          done = std::move(done)](Result<server::TaskView> view) {
                           if (!view) return done(tl::unexpected(view.error()));
                           const Task& t = view->task;
                           if (Status runs = RunsNow(t, "SSH logs into it"); !runs) {
                             return done(tl::unexpected(runs.error()));
                           }
                           proto::TunnelOpen open{task_id, "ssh", 0, {}};
                           open.keys = services.accounts.SshKeysOfProject(caller, t.project_id);
                           tunnels.Open(t.placement->node, open, done);
                         });
}

std::function<void()> ActivityNoter(server::Services& services, const std::string& task_id) {
  auto last = std::make_shared<std::atomic<int64_t>>(0);
  server::TelemetryService* telemetry = &services.telemetry;
  return [telemetry, task_id, last] {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
            .count();
    int64_t before = last->load(std::memory_order_relaxed);
    if (now - before < 1000 || !last->compare_exchange_strong(before, now)) return;
    telemetry->NoteActivity(task_id);
  };
}

bool IsGatewayHost(std::string_view origin, std::string_view host) {
  return ParseGatewayHost(origin, host).has_value();
}

Gateway::Gateway(server::Services services, TunnelHub& tunnels, std::function<int64_t()> now_ms,
                 std::string origin)
    : services_(services),
      tunnels_(tunnels),
      now_ms_(std::move(now_ms)),
      origin_(std::move(origin)) {}

bool Gateway::Serves(const HttpRequest& request) const {
  return IsGatewayPath(request.Path()) || IsGatewayHost(origin_, request.host);
}

void Gateway::Handle(HttpRequest request, Responder respond) {
  const Clock::time_point start = Clock::now();
  server::OperationsService* ops = &services_.operations;
  const auto observe = [ops, start](int status) {
    ops->ObserveRequest(
        GatewayRoute(), status,
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  };
  const auto answer = [&observe, &respond](HttpResponse r) {
    observe(r.status);
    respond(std::move(r));
  };
  const std::string path(request.Path());
  // By host (<port>--<task>.<domain>: the app at the origin's root), else by path.
  const std::optional<GatewayHost> by_host = ParseGatewayHost(origin_, request.host);
  Result<Target> target =
      by_host ? Result<Target>(Target{by_host->task, by_host->port, path}) : ParseTarget(path);
  if (!target) return answer(ErrorResponse(ErrorCode::kNotFound, target.error().message));
  const std::string base_path = by_host ? "/" : GatewayBasePath(target->task, target->port);
  if (target->rest.empty()) {  // the app's root is below its base path
    HttpResponse r;
    r.status = 301;
    r.headers.emplace_back(
        "Location",
        base_path + (request.RawQuery().empty() ? "" : "?" + std::string(request.RawQuery())));
    return answer(std::move(r));
  }

  // A signed link: exchanged for a cookie of this port's path, then the same URL without it.
  auto pairs = ParseQueryString(request.RawQuery());
  if (!pairs) return answer(ErrorResponse(pairs.error()));
  const auto link = std::find_if(pairs->begin(), pairs->end(),
                                 [](const auto& p) { return p.first == kGatewayLinkParam; });
  if (link != pairs->end()) {
    Result<server::Caller> caller =
        VerifyGatewayLink(services_.auth, link->second, target->task, target->port, now_ms_());
    if (!caller) return answer(ErrorResponse(caller.error()));
    std::string rest_query;
    for (const auto& [name, value] : *pairs) {
      if (name == kGatewayLinkParam) continue;
      rest_query +=
          (rest_query.empty() ? "?" : "&") + PercentEncode(name) + "=" + PercentEncode(value);
    }
    std::string location = path + rest_query;
    services_.auth.CreateSession(
        *caller, kGatewaySessionS * 1000,
        [respond, observe, location, base_path,
         secure = request.tls](Result<server::NewSession> created) {
          if (!created) {
            HttpResponse r = ErrorResponse(created.error());
            observe(r.status);
            return respond(std::move(r));
          }
          HttpResponse r;
          r.status = 303;
          r.headers = {{"Location", location},
                       {"Set-Cookie",
                        GatewaySetCookie(created->cookie, base_path, kGatewaySessionS, secure)},
                       {"Cache-Control", "no-store"}};
          observe(r.status);
          respond(std::move(r));
        });
    return;
  }

  // Who asks: the link's cookie, the console's session, or a signature.
  Result<server::Caller> caller = tl::unexpected(Error{
      ErrorCode::kUnauthenticated, "sign in to the console, or open the port with `gpupool open " +
                                       target->task + " " + std::to_string(target->port) + "`"});
  bool anonymous = true;
  for (std::string_view name : {kGatewayCookie, kSessionCookie}) {
    if (std::optional<std::string_view> cookie = CookieValue(request.cookie, name)) {
      anonymous = false;
      Result<server::SessionGrant> session = services_.auth.LookupSession(std::string(*cookie));
      if (session) {
        caller = std::move(session->caller);
        break;
      }
      caller = tl::unexpected(session.error());
    }
  }
  if (!caller && !request.authorization.empty()) {
    anonymous = false;
    Result<Verified> verified = VerifyRequest(services_.auth, request, now_ms_());
    if (verified) {
      Status fresh = ConsumeNonce(services_.auth, *verified, IsWriteMethod(request.method));
      caller = fresh ? Result<server::Caller>(std::move(verified->caller))
                     : Result<server::Caller>(tl::unexpected(fresh.error()));
    } else {
      caller = tl::unexpected(verified.error());
    }
  }
  if (!caller) {
    // A browser goes to the console's login (on the server's origin: an app's own origin has
    // none, so it is told to open the port with a link); an API client is told why.
    const std::string_view accept = Header(request, "accept");
    if (!by_host && anonymous && request.method == "GET" &&
        accept.find("text/html") != std::string_view::npos) {
      HttpResponse r;
      r.status = 302;
      r.headers = {{"Location", "/login"}, {"Cache-Control", "no-store"}};
      return answer(std::move(r));
    }
    return answer(ErrorResponse(caller.error()));
  }
  if (caller->IsAgent()) {
    return answer(ErrorResponse(ErrorCode::kPermissionDenied,
                                "an agent's credential does not reach tasks' ports"));
  }
  // The connection is no longer anonymous for the HTTP server's limits, and counts against its
  // user (a gateway caller is never privileged: the reserve is for the API).
  if (Status admitted = respond.Authenticated(caller->user_id, false); !admitted) {
    return answer(ErrorResponse(admitted.error()));
  }

  auto held = std::make_shared<HttpRequest>(std::move(request));
  // A user's activity: what changes something, a WebSocket opened and what the user sends on it;
  // not reads (an open page polling its app).
  const bool read = held->method == "GET" || held->method == "HEAD" || held->method == "OPTIONS";
  std::function<void()> activity;
  if (!read || held->websocket_upgrade) activity = ActivityNoter(services_, target->task);
  OpenTaskPort(
      services_, tunnels_, *caller, target->task, target->port,
      [held, respond, observe, base_path, activity](Result<std::shared_ptr<tunnel::Stream>> s) {
        if (!s) {
          HttpResponse r = ErrorResponse(s.error());
          if (s.error().code == ErrorCode::kUnavailable) r.status = 502;
          observe(r.status);
          return respond(std::move(r));
        }
        std::shared_ptr<Duplex> client = respond.TakeOver();
        if (!client) return (*s)->Reset("the client went away");
        observe(200);
        if (activity) activity();
        (*s)->Write(Forwarded(*held, base_path));
        // A plain request's body went with its head: only a WebSocket sends more.
        tunnel::Pipe(*s, std::move(client),
                     held->websocket_upgrade ? activity : std::function<void()>());
      });
}

}  // namespace gpupool::api
