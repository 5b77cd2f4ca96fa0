// A task's ports through the pool's gateway, end to end: a real `gpupool up` (server and agent in
// one process, the agent's tunnel over loopback), tasks running a real HTTP server (Python's) on
// their declared port, requests through /t/<task>/<port>/ — signed, by console session, by the
// cookie a `gpupool open` link sets — and through `gpupool port-forward`; and who is refused:
// anonymous clients (401, or the login page for a browser), another project's user, a port the
// task does not declare, and a task declaring a port another task listens on. And Jupyter
// Notebook (Debian's) started by `gpupool submit --jupyter`, used through the gateway as a
// browser uses it: its tree page, a notebook made through the contents API, a kernel started,
// `print(6*7)` run over the kernel's WebSocket, the kernel shut down.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "api/client.h"
#include "api/signing.h"
#include "api/socket_testing.h"
#include "tests/cli_process.h"
#include "tests/up_fixture.h"

namespace gpupool {
namespace {

using nlohmann::json;
using testing::Eventually;

// A TCP port free now (the task binds it a moment later).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// An HTTP app that answers every path with what it saw: the path, the Cookie and Authorization
// headers, and the body of a POST.
std::vector<std::string> EchoApp(int port) {
  return {"/usr/bin/python3", "-c",
          "import http.server, sys\n"
          "class H(http.server.BaseHTTPRequestHandler):\n"
          "  def answer(self, extra=b''):\n"
          "    body = ('path=%s cookie=%s auth=%s ' % (self.path, self.headers.get('Cookie'),"
          " self.headers.get('Authorization'))).encode() + extra\n"
          "    self.send_response(200)\n"
          "    self.send_header('Content-Length', str(len(body)))\n"
          "    self.end_headers()\n"
          "    self.wfile.write(body)\n"
          "  def do_GET(self): self.answer()\n"
          "  def do_POST(self): self.answer(self.rfile.read(int(self.headers['Content-Length'])))\n"
          "  def log_message(self, *a): pass\n"
          "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n",
          std::to_string(port)};
}

class GatewayTest : public testing::UpTest {
 protected:
  void SetUp() override {
    UpTest::SetUp();
    port_ =
        static_cast<uint16_t>(std::stoi(up_->endpoint().substr(up_->endpoint().rfind(':') + 1)));
  }

  // Submits `command` serving `port` and waits until the app answers through the gateway.
  std::string Serve(const std::vector<std::string>& command, std::vector<int> ports,
                    int wait_port) {
    json task = Call("POST", "/v1/tasks", {{"command", command}, {"ports", ports}});
    const std::string id = task["id"];
    EXPECT_TRUE(Eventually(
        [&] {
          auto r = client_->Call("GET", "/t/" + id + "/" + std::to_string(wait_port) + "/ready");
          return r && r->status == 200;
        },
        std::chrono::seconds(30)))
        << "the app of " << id << " answers through the gateway";
    return id;
  }

  uint16_t port_ = 0;
};

TEST_F(GatewayTest, PassesRequestsToTheTasksPortWithThePathKeptAndThePoolsCredentialsRemoved) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);
  const std::string base = "/t/" + id + "/" + std::to_string(app) + "/";

  auto get = client_->Call("GET", base + "api/contents?x=1");
  ASSERT_TRUE(get) << get.error().message;
  EXPECT_EQ(get->status, 200);
  EXPECT_EQ(get->body.find("path=" + base + "api/contents?x=1 "), 0u) << get->body;
  EXPECT_NE(get->body.find("auth=None"), std::string::npos) << "the signature stays with the pool";

  auto post = client_->Call("POST", base + "echo", R"({"hello":"world"})");
  ASSERT_TRUE(post) << post.error().message;
  EXPECT_EQ(post->status, 200);
  EXPECT_NE(post->body.find(R"({"hello":"world"})"), std::string::npos) << post->body;

  // The task shows its ports and their paths.
  json shown = Call("GET", "/v1/tasks/" + id);
  EXPECT_EQ(shown["ports"], json::array({app}));

  // A port the task does not declare, a path that is not one.
  auto undeclared = client_->Call("GET", "/t/" + id + "/1/");
  ASSERT_TRUE(undeclared);
  EXPECT_EQ(undeclared->status, 404) << undeclared->body;
  EXPECT_NE(undeclared->body.find("declares no port 1"), std::string::npos) << undeclared->body;
  auto no_slash = client_->Call("GET", "/t/" + id + "/" + std::to_string(app));
  ASSERT_TRUE(no_slash);
  EXPECT_EQ(no_slash->status, 301);
}

// interactive_idle_s of task `id` now (-1 when the server gives none).
double InteractiveIdle(api::Client& client, const std::string& id) {
  auto m = client.CallJson("GET", "/v1/tasks/" + id + "/metrics");
  return m ? m->value("/latest/interactive_idle_s"_json_pointer, -1.0) : -1.0;
}

TEST_F(GatewayTest, WhatTheUserSendsIsActivityAndReadsAreNot) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);
  const std::string base = "/t/" + id + "/" + std::to_string(app) + "/";
  ASSERT_TRUE(
      Eventually([&] { return InteractiveIdle(*client_, id) >= 2; }, std::chrono::seconds(30)));
  // A page polling its app (reads) leaves the task idle.
  auto get = client_->Call("GET", base + "poll");
  ASSERT_TRUE(get && get->status == 200);
  EXPECT_GE(InteractiveIdle(*client_, id), 2) << "a GET is no activity";
  // What changes something is.
  auto post = client_->Call("POST", base + "echo", "{}");
  ASSERT_TRUE(post && post->status == 200);
  EXPECT_LT(InteractiveIdle(*client_, id), 2) << "a POST is activity";
}

TEST_F(GatewayTest, RefusesAnonymousClientsAndOtherProjectsUsers) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);
  const std::string base = "/t/" + id + "/" + std::to_string(app) + "/";

  api::Client anonymous(admin_.endpoint, "", "");
  auto r = anonymous.Call("GET", base);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  EXPECT_NE(r->body.find("gpupool open " + id), std::string::npos) << r->body;

  // A browser without a session goes to the console's login page.
  api::testing::RawSocket browser(port_);
  browser.Write("GET " + base + " HTTP/1.1\r\nHost: x\r\nAccept: text/html,*/*\r\n\r\n");
  std::optional<std::string> page = browser.ReadResponse();
  ASSERT_TRUE(page);
  EXPECT_EQ(page->rfind("HTTP/1.1 302", 0), 0u) << *page;
  EXPECT_NE(page->find("Location: /login"), std::string::npos) << *page;

  // A forged cookie is no session.
  api::testing::RawSocket forged(port_);
  forged.Write("GET " + base + " HTTP/1.1\r\nHost: x\r\nCookie: gpupool_session=forged\r\n\r\n");
  page = forged.ReadResponse();
  ASSERT_TRUE(page);
  EXPECT_EQ(page->rfind("HTTP/1.1 401", 0), 0u) << *page;

  // Another project's member does not see the task at all.
  const testing::Credentials other = OtherProjectsMember();
  api::Client mallory(admin_.endpoint, other.access_key, other.secret_key);
  r = mallory.Call("GET", base);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  // Nor through port-forward's route.
  api::IoLoop loop;
  auto forwarded =
      api::DialWebSocket(loop, {admin_.endpoint, other.access_key, other.secret_key,
                                "/v1/tasks/" + id + "/ports/" + std::to_string(app) + "/stream"});
  ASSERT_FALSE(forwarded);
  EXPECT_EQ(forwarded.error().code, ErrorCode::kNotFound) << forwarded.error().message;
}

TEST_F(GatewayTest, ATaskCannotReachAnotherTasksPort) {
  const int app = FreePort();
  const std::string victim = Serve(EchoApp(app), {app}, app);
  // A second task declares the same port number and never listens on it.
  json thief = Call("POST", "/v1/tasks", {{"command", {"/bin/sleep", "600"}}, {"ports", {app}}});
  const std::string id = thief["id"];
  ASSERT_TRUE(Eventually([&] { return Call("GET", "/v1/tasks/" + id)["state"] == "running"; },
                         std::chrono::seconds(20)));
  auto r = client_->Call("GET", "/t/" + id + "/" + std::to_string(app) + "/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 502) << r->body;
  EXPECT_NE(r->body.find("nothing of task " + id + " listens on port"), std::string::npos)
      << r->body;
  EXPECT_EQ(r->body.find("path="), std::string::npos) << "the victim's app must not answer";
  // The victim's own port still answers.
  auto own = client_->Call("GET", "/t/" + victim + "/" + std::to_string(app) + "/");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, 200);
}

TEST_F(GatewayTest, ASignedLinkFromGpupoolOpenSetsACookieForThatPort) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);
  const testing::CliRun open = Cli({"open", id, std::to_string(app)});
  ASSERT_EQ(open.exit_code, 0) << open;
  const std::string url = open.out.substr(0, open.out.find('\n'));
  ASSERT_EQ(url.rfind(admin_.endpoint + "/t/" + id + "/", 0), 0u) << url;
  const std::string target = url.substr(admin_.endpoint.size());

  api::testing::RawSocket exchange(port_);
  exchange.Write("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
  std::optional<std::string> answer = exchange.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 303", 0), 0u) << *answer;
  const std::smatch cookie = [&] {
    std::smatch m;
    std::regex_search(*answer, m,
                      std::regex("Set-Cookie: gpupool_gateway=([A-Za-z0-9_-]+); Path=(/t/[^;]+);"));
    return m;
  }();
  ASSERT_EQ(cookie.size(), 3u) << *answer;
  EXPECT_EQ(cookie[2].str(), "/t/" + id + "/" + std::to_string(app) + "/");

  api::testing::RawSocket browser(port_);
  browser.Write("GET /t/" + id + "/" + std::to_string(app) +
                "/tree HTTP/1.1\r\nHost: x\r\nCookie: a=1; gpupool_gateway=" + cookie[1].str() +
                "\r\n\r\n");
  answer = browser.ReadResponse();
  ASSERT_TRUE(answer);
  // The app's own status line, as it sent it (Python's server speaks HTTP/1.0).
  EXPECT_EQ(answer->rfind("HTTP/1.0 200", 0), 0u) << *answer;
  EXPECT_NE(answer->find("cookie=a=1 "), std::string::npos)
      << "the pool's cookie is not passed on: " << *answer;

  // A link for another port is refused.
  std::string tampered = target;
  tampered.replace(tampered.find("/" + std::to_string(app) + "/"), std::to_string(app).size() + 2,
                   "/" + std::to_string(app + 1) + "/");
  auto r = api::Client(admin_.endpoint, "", "").Call("GET", tampered);
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, 200) << r->body;

  // The server mints the same link for a caller without the secret at hand (the console).
  const json minted =
      Call("POST", "/v1/tasks/" + id + "/ports/" + std::to_string(app) + "/link", {{"ttl_s", 60}});
  const std::string link = minted["url"];
  ASSERT_EQ(link.rfind("/t/" + id + "/" + std::to_string(app) + "/?gpupool_link=", 0), 0u) << link;
  api::testing::RawSocket console(port_);
  console.Write("GET " + link + " HTTP/1.1\r\nHost: x\r\n\r\n");
  answer = console.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 303", 0), 0u) << *answer;
  auto undeclared = client_->Call("POST", "/v1/tasks/" + id + "/ports/1/link", "{}");
  ASSERT_TRUE(undeclared);
  EXPECT_EQ(undeclared->status, 404) << undeclared->body;
}

TEST_F(GatewayTest, PortForwardCarriesLocalConnectionsToTheTasksPort) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);
  testing::CliProcess forward({"port-forward", id, std::to_string(app) + ":0"}, CliEnv());
  ASSERT_TRUE(forward.WaitForStdout("\n")) << forward.Output();
  // The match points into the text it searched, which must outlive it (AddressSanitizer).
  const std::string out = forward.Output().out;
  std::smatch listening;
  std::regex_search(out, listening, std::regex("Forwarding from 127\\.0\\.0\\.1:([0-9]+) -> "));
  ASSERT_EQ(listening.size(), 2u) << forward.Output();
  const auto local = static_cast<uint16_t>(std::stoi(listening[1].str()));
  for (int i = 0; i < 3; ++i) {  // each connection is a stream of its own
    api::testing::RawSocket socket(local);
    ASSERT_TRUE(socket.connected());
    socket.Write("GET /direct/" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    std::optional<std::string> answer = socket.ReadResponse();
    ASSERT_TRUE(answer) << forward.Output();
    EXPECT_NE(answer->find("path=/direct/" + std::to_string(i) + " "), std::string::npos)
        << *answer;
  }
}

TEST_F(GatewayTest, TheTaskKnowsItsBasePathAndURL) {
  const std::string p = std::to_string(FreePort());
  json task = Call("POST", "/v1/tasks",
                   {{"command",
                     {"/bin/sh", "-c",
                      "echo \"$GPUPOOL_BASE_PATH_" + p + " $GPUPOOL_URL_" + p +
                          "\" > env.txt; exec /bin/sleep 600"}},
                    {"ports", {std::stoi(p)}}});
  const std::string id = task["id"];
  ASSERT_TRUE(Eventually([&] { return Call("GET", "/v1/tasks/" + id)["state"] == "running"; },
                         std::chrono::seconds(20)));
  // The task wrote its variables into its workspace, which comes back to the server at its end.
  Call("POST", "/v1/tasks/" + id + "/stop");
  std::optional<api::ClientResponse> file;
  ASSERT_TRUE(Eventually(
      [&] {
        auto r = client_->Call("GET", "/v1/tasks/" + id + "/files/content?path=env.txt");
        if (r && r->status == 200) file = *r;
        return file.has_value();
      },
      std::chrono::seconds(30)));
  const std::string base = "/t/" + id + "/" + p + "/";
  EXPECT_EQ(file->body, base + " " + admin_.endpoint + base + "\n");
}

// One signed request through a fresh connection, read to the end (the gateway closes after it).
std::string SignedRequest(uint16_t port, const testing::Credentials& who, const std::string& method,
                          const std::string& target, const std::string& body,
                          const std::string& extra_headers = "") {
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  Result<std::string> auth =
      api::SignRequest(who.access_key, who.secret_key, method, target, body, now, api::NewNonce());
  EXPECT_TRUE(auth) << auth.error().message;
  api::testing::RawSocket socket(port);
  socket.Write(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
               "\r\nAuthorization: " + auth.value_or("") + "\r\nContent-Type: application/json" +
               "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra_headers +
               "\r\n" + body);
  return socket.ReadToEof().value_or("");
}

std::string BodyOf(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

TEST_F(GatewayTest, JupyterNotebookRunsCodeThroughTheGateway) {
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/jupyter-notebook"))
      << "Debian's jupyter-notebook is missing: run scripts/install-deps.sh --test";
  const int port = FreePort();
  const testing::CliRun submitted = Cli({"submit", "--jupyter", "--port", std::to_string(port)});
  ASSERT_EQ(submitted.exit_code, 0) << submitted;
  const std::string id = submitted.out.substr(0, submitted.out.find('\n'));
  const std::string base = "/t/" + id + "/" + std::to_string(port) + "/";

  // The tree page, as a browser first loads it; it sets Jupyter's own XSRF cookie.
  std::string tree;
  ASSERT_TRUE(Eventually(
      [&] {
        tree = SignedRequest(port_, admin_, "GET", base + "tree", "");
        return tree.rfind("HTTP/1.1 200", 0) == 0;
      },
      std::chrono::seconds(60)))
      << "the notebook answers through the gateway; last answer: " << tree.substr(0, 400);
  EXPECT_NE(tree.find("<title>Home Page - Select or create a notebook</title>"), std::string::npos)
      << tree.substr(0, 2000);
  std::smatch xsrf;
  ASSERT_TRUE(std::regex_search(tree, xsrf, std::regex("Set-Cookie: _xsrf=([^;\r]+)"))) << tree;
  const std::string jupyter_headers =
      "Cookie: _xsrf=" + xsrf[1].str() + "\r\nX-XSRFToken: " + xsrf[1].str() + "\r\n";

  // A notebook, made through the contents API.
  const std::string made = SignedRequest(port_, admin_, "POST", base + "api/contents",
                                         R"({"type":"notebook"})", jupyter_headers);
  ASSERT_EQ(made.rfind("HTTP/1.1 201", 0), 0u) << made;
  EXPECT_EQ(json::parse(BodyOf(made))["path"], "Untitled.ipynb");

  // A kernel.
  const std::string started = SignedRequest(port_, admin_, "POST", base + "api/kernels",
                                            R"({"name":"python3"})", jupyter_headers);
  ASSERT_EQ(started.rfind("HTTP/1.1 201", 0), 0u) << started;
  const std::string kernel = json::parse(BodyOf(started))["id"];

  // Its channels over a WebSocket through the gateway: execute print(6*7), read 42.
  api::IoLoop loop;
  api::WebSocketDial dial{admin_.endpoint, admin_.access_key, admin_.secret_key,
                          base + "api/kernels/" + kernel + "/channels?session_id=s-1"};
  dial.text = true;
  auto channels = api::DialWebSocket(loop, dial);
  ASSERT_TRUE(channels) << channels.error().message;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<json> messages;
  api::DuplexHandlers handlers;
  handlers.on_data = [&](std::string text) {
    json m = json::parse(text, nullptr, false);
    std::lock_guard lock(mu);
    messages.push_back(std::move(m));
    cv.notify_all();
    return true;
  };
  (*channels)->Start(std::move(handlers));
  const json execute = {{"header",
                         {{"msg_id", "m-1"},
                          {"username", "test"},
                          {"session", "s-1"},
                          {"msg_type", "execute_request"},
                          {"version", "5.3"}}},
                        {"parent_header", json::object()},
                        {"metadata", json::object()},
                        {"content",
                         {{"code", "print(6*7)"},
                          {"silent", false},
                          {"store_history", true},
                          {"user_expressions", json::object()},
                          {"allow_stdin", false},
                          {"stop_on_error", true}}},
                        {"channel", "shell"},
                        {"buffers", json::array()}};
  ASSERT_TRUE((*channels)->Send(execute.dump()));
  std::string printed;
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] {
                              for (const json& m : messages) {
                                if (m.is_object() && m.value("msg_type", "") == "stream" &&
                                    m["parent_header"].value("msg_id", "") == "m-1") {
                                  printed = m["content"].value("text", "");
                                  return true;
                                }
                              }
                              return false;
                            }))
        << "no output of the execution; " << messages.size() << " messages";
  }
  EXPECT_EQ(printed, "42\n");
  (*channels)->Close("done");

  // The kernel shut down.
  const std::string shut =
      SignedRequest(port_, admin_, "DELETE", base + "api/kernels/" + kernel, "", jupyter_headers);
  EXPECT_EQ(shut.rfind("HTTP/1.1 204", 0), 0u) << shut;
  const std::string kernels = SignedRequest(port_, admin_, "GET", base + "api/kernels", "");
  EXPECT_EQ(json::parse(BodyOf(kernels)), json::array()) << kernels;
}

// The gateway with a wildcard domain: each port at an origin of its own.
class GatewayHostTest : public GatewayTest {
 protected:
  std::vector<std::string> ExtraUpArgs() const override {
    return {"--gateway-domain", "apps.test"};
  }
};

TEST_F(GatewayHostTest, EachPortIsServedAtAnOriginOfItsOwn) {
  const int app = FreePort();
  const std::string id = Serve(EchoApp(app), {app}, app);  // by path, as before
  const std::string host = std::to_string(app) + "--" + id + ".apps.test";
  const std::string origin = "http://" + host + "/";

  // The task, its detail and `gpupool open` name the port's origin.
  EXPECT_EQ(Cli({"exec", id, "--", "printenv", "GPUPOOL_URL_" + std::to_string(app)}).out,
            origin + "\n");
  EXPECT_EQ(Cli({"exec", id, "--", "printenv", "GPUPOOL_BASE_PATH_" + std::to_string(app)}).out,
            "/\n");
  EXPECT_EQ(Call("GET", "/v1/tasks/" + id)["port_urls"], json({{std::to_string(app), origin}}));
  const testing::CliRun open = Cli({"open", id, std::to_string(app)});
  ASSERT_EQ(open.exit_code, 0) << open;
  ASSERT_EQ(open.out.rfind(origin + "?gpupool_link=", 0), 0u) << open;
  const json minted = Call("POST", "/v1/tasks/" + id + "/ports/" + std::to_string(app) + "/link");
  EXPECT_EQ(minted["url"].get<std::string>().rfind(origin + "?gpupool_link=", 0), 0u) << minted;

  // The link is exchanged for a cookie of that origin's whole path space.
  api::testing::RawSocket exchange(port_);
  exchange.Write("GET " +
                 open.out.substr(origin.size() - 1, open.out.find('\n') - origin.size() + 1) +
                 " HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  std::optional<std::string> answer = exchange.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 303", 0), 0u) << *answer;
  EXPECT_NE(answer->find("Location: /\r\n"), std::string::npos) << *answer;
  std::smatch cookie;
  ASSERT_TRUE(std::regex_search(
      *answer, cookie, std::regex("Set-Cookie: gpupool_gateway=([A-Za-z0-9_-]+); Path=/;")))
      << *answer;

  // With it, the app gets the path as the browser sent it, at its root.
  api::testing::RawSocket browser(port_);
  browser.Write("GET /tree?x=1 HTTP/1.1\r\nHost: " + host +
                ":8640\r\nCookie: gpupool_gateway=" + cookie[1].str() + "\r\n\r\n");
  answer = browser.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.0 200", 0), 0u) << *answer;
  EXPECT_NE(answer->find("path=/tree?x=1 cookie=None"), std::string::npos) << *answer;

  // Without credentials a browser is told to open the port with a link: the app's origin has no
  // login page of its own.
  api::testing::RawSocket anonymous(port_);
  anonymous.Write("GET / HTTP/1.1\r\nHost: " + host + "\r\nAccept: text/html\r\n\r\n");
  answer = anonymous.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 401", 0), 0u) << *answer;
  EXPECT_NE(answer->find("gpupool open " + id + " " + std::to_string(app)), std::string::npos)
      << *answer;

  // A name of the domain that is no port of a task is not the gateway's.
  api::testing::RawSocket other(port_);
  other.Write("GET /healthz HTTP/1.1\r\nHost: apps.test\r\n\r\n");
  answer = other.ReadResponse();
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->rfind("HTTP/1.1 200", 0), 0u) << *answer;
}

}  // namespace
}  // namespace gpupool
