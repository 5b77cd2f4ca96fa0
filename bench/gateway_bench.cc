// The gateway's and tunnel's goals, measured (not a test), against a real `gpupool up` (server
// and agent in one process, the tunnel over loopback) and a task running a Tornado app on its
// declared port: the latency an HTTP request gains through the gateway and tunnel over the same
// request sent to the app directly (both signed-client requests; the gateway's own answers close
// their connection, so each of its requests also opens one), one stream's throughput (a 1 GiB
// download through the gateway, and directly), the round trip of a key typed into `gpupool
// shell` (exec with a terminal), the process's resident memory with 1,000 idle WebSockets
// open through the gateway, and a 1 GiB file put into the running task's workspace and taken out
// again through the file routes (`gpupool cp`'s code: api/file_transfer.h, over the `files`
// streams of the tunnel), and the same file copied in and out by scp (OpenSSH's, through
// `gpupool tunnel` and the agent's dropbear in the task).
//   gateway_bench [--requests 2000] [--mib 1024] [--websockets 1000]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/client.h"
#include "api/file_transfer.h"
#include "api/signing.h"
#include "api/socket_testing.h"
#include "bench/submit_load.h"
#include "core/unique_fd.h"
#include "proto/exec.h"
#include "proto/json_codec.h"
#include "tests/cli_process.h"
#include "tests/server_process.h"

namespace gpupool {
namespace {

using bench::Clock;
using bench::Percentile;

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

// /small answers 100 bytes, /big?mib=N streams N MiB, /ws is an idle WebSocket.
std::vector<std::string> App(int port) {
  return {
      "/usr/bin/python3", "-c",
      "import sys, tornado.ioloop, tornado.web, tornado.websocket\n"
      "class Small(tornado.web.RequestHandler):\n"
      "  def get(self, *a): self.write(b'x' * 100)\n"
      "class Big(tornado.web.RequestHandler):\n"
      "  async def get(self, *a):\n"
      "    chunk = b'y' * (1 << 20)\n"
      "    n = int(self.get_argument('mib'))\n"
      "    self.set_header('Content-Length', str(n << 20))\n"
      "    for i in range(n):\n"
      "      self.write(chunk)\n"
      "      await self.flush()\n"
      "class Ws(tornado.websocket.WebSocketHandler):\n"
      "  def check_origin(self, origin): return True\n"
      "app = tornado.web.Application([(r'.*/small', Small), (r'.*/big', Big), (r'.*/ws', Ws)])\n"
      "app.listen(int(sys.argv[1]), address='127.0.0.1')\n"
      "tornado.ioloop.IOLoop.current().start()\n",
      std::to_string(port)};
}

void Latency(api::Client& through, api::Client& direct, const std::string& base, int requests) {
  for (auto [name, client, prefix] :
       {std::tuple{"direct", &direct, std::string("/")}, std::tuple{"gateway", &through, base}}) {
    std::vector<double> ms;
    for (int i = 0; i < requests; ++i) {
      const auto start = Clock::now();
      auto r = client->Call("GET", prefix + "small");
      if (!r || r->status != 200) {
        std::printf("%s: request %d failed\n", name, i);
        return;
      }
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::printf("latency %-8s %d requests: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", name, requests,
                Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100));
  }
}

// Sends `request` on a new connection and reads the answer's head and `body_bytes` of body
// without keeping them: MB/s of the body, 0 when it broke off.
double Download(uint16_t port, const std::string& request, int64_t body_bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return 0;
  const auto start = Clock::now();
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return 0;
  }
  std::vector<char> buffer(1 << 20);
  std::string head;
  int64_t body = 0;
  while (body < body_bytes) {
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), 0);
    if (n <= 0) break;
    if (head.find("\r\n\r\n") == std::string::npos) {
      head.append(buffer.data(), static_cast<size_t>(n));
      const size_t end = head.find("\r\n\r\n");
      if (end != std::string::npos) body += static_cast<int64_t>(head.size() - end - 4);
    } else {
      body += n;
    }
  }
  close(fd);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  return body >= body_bytes ? static_cast<double>(body) / 1e6 / s : 0;
}

// `gpupool shell`'s echo: a key sent into `cat` on a terminal inside the task (exec, tty) and
// its echo back — the keystroke's round trip through the server, the tunnel, the agent and the
// task's pty.
void EchoRoundTrip(const testing::Credentials& admin, const std::string& task, int rounds) {
  api::IoLoop loop(1);
  auto session = api::DialWebSocket(
      loop, {admin.endpoint, admin.access_key, admin.secret_key, "/v1/tasks/" + task + "/exec"});
  if (!session) {
    std::printf("exec: %s\n", session.error().message.c_str());
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  proto::ExecFrameReader reader;
  std::string echoed;
  api::DuplexHandlers h;
  h.on_data = [&](std::string bytes) {
    std::lock_guard lock(mu);
    reader.Feed(bytes);
    while (auto frame = reader.Next()) {
      if (*frame && (*frame)->channel == proto::ExecChannel::kStdout) echoed += (*frame)->payload;
    }
    cv.notify_all();
    return true;
  };
  (*session)->Start(std::move(h));
  proto::ExecStart start;
  start.command = {"/bin/sh", "-c", "stty raw -echo; exec cat"};  // each byte back, once
  start.tty = true;
  (*session)->Send(
      proto::EncodeExecFrame(proto::ExecChannel::kStart, proto::Dump(proto::Encode(start))));
  std::vector<double> ms;
  for (int i = 0; i < rounds; ++i) {
    const char key = static_cast<char>('a' + i % 26);
    const auto t0 = Clock::now();
    (*session)->Send(proto::EncodeExecFrame(proto::ExecChannel::kStdin, std::string(1, key)));
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(10),
                     [&] { return echoed.find(key) != std::string::npos; })) {
      std::printf("exec: no echo of key %d\n", i);
      return;
    }
    echoed.clear();
    if (i >= 10) {  // the first ones wait for the shell's stty
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
  }
  (*session)->Close("done");
  std::printf("shell echo round trip, %zu keys: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", ms.size(),
              Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100));
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A `mib` MiB file uploaded into the running task `task` and downloaded back, each verified by
// SHA-256 (the upload at its commit, the download against the listing).
// Writes `mib` MiB of varied bytes to `path`; false (said) when it cannot.
bool MakeFile(const std::string& path, int mib) {
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  std::string block(1 << 20, '\0');
  for (int i = 0; i < mib; ++i) {
    for (size_t j = 0; j < block.size(); j += 8) block[j] = static_cast<char>(i * 131 + j);
    if (::write(out.get(), block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
      std::printf("cannot write %s\n", path.c_str());
      return false;
    }
  }
  return true;
}

void RunningTaskFile(api::Client& client, const std::string& task, const std::string& dir,
                     int mib) {
  const std::string local = dir + "/file.bin";
  const std::string back = dir + "/file.back";
  if (!MakeFile(local, mib)) return;
  const double bytes = static_cast<double>(mib) * (1 << 20);
  UniqueFd in(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  Clock::time_point start = Clock::now();
  auto up = api::UploadTaskFile(client, task, "bench/file.bin", in.get());
  const double up_s = Seconds(start);
  if (!up) {
    std::printf("files: upload: %s\n", up.error().message.c_str());
    return;
  }
  start = Clock::now();
  auto listing = api::ListTaskFiles(client, task, "bench/file.bin");
  const double list_s = Seconds(start);
  if (!listing) {
    std::printf("files: list: %s\n", listing.error().message.c_str());
    return;
  }
  UniqueFd out(::open(back.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  start = Clock::now();
  Status down = api::DownloadTaskFile(client, task, listing->files.at(0), out.get());
  const double down_s = Seconds(start);
  if (!down) {
    std::printf("files: download: %s\n", down.error().message.c_str());
    return;
  }
  std::printf(
      "a running task's file, %d MiB: upload %.0f MB/s, listing %.1f ms, download %.0f MB/s\n", mib,
      bytes / up_s / 1e6, list_s * 1e3, bytes / down_s / 1e6);
  std::filesystem::remove(local);
  std::filesystem::remove(back);
}

// scp into the task and back: a key registered, `gpupool ssh-config`, OpenSSH's scp (SFTP).
void ScpCopy(const testing::Credentials& admin, const std::string& task, const std::string& dir,
             int mib) {
  const std::map<std::string, std::string> env = {{"GPUPOOL_ENDPOINT", admin.endpoint},
                                                  {"GPUPOOL_ACCESS_KEY", admin.access_key},
                                                  {"GPUPOOL_SECRET_KEY", admin.secret_key},
                                                  {"HOME", dir},
                                                  {"PATH", "/usr/bin:/bin"}};
  const std::string key = dir + "/id_bench";
  const std::string config = dir + "/ssh_config";
  testing::CliRun r =
      testing::RunProgram({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key}, env);
  if (r.exit_code == 0) r = testing::RunCli({"ssh-key", "add", key + ".pub"}, env);
  if (r.exit_code == 0) r = testing::RunCli({"ssh-config", task}, env);
  if (r.exit_code != 0) {
    std::printf("scp: setting up: %s\n", r.err.c_str());
    return;
  }
  std::ofstream(config) << r.out;
  const std::string local = dir + "/scp.bin";
  if (!MakeFile(local, mib)) return;
  const auto scp = [&](const std::string& from, const std::string& to) {
    const Clock::time_point start = Clock::now();
    const testing::CliRun copy =
        testing::RunProgram({"/usr/bin/scp", "-F", config, "-i", key, "-o", "IdentitiesOnly=yes",
                             "-o", "BatchMode=yes", from, to},
                            env);
    if (copy.exit_code != 0)
      std::printf("scp %s %s: %s\n", from.c_str(), to.c_str(), copy.err.c_str());
    return copy.exit_code == 0 ? static_cast<double>(mib) * (1 << 20) / Seconds(start) / 1e6 : 0;
  };
  const std::string remote = task + ".gpupool:scp.bin";
  const double in = scp(local, remote);
  const double out = scp(remote, dir + "/scp.back");
  std::printf(
      "scp, %d MiB (SFTP through gpupool tunnel and dropbear): into the task %.0f MB/s, "
      "out of it %.0f MB/s\n",
      mib, in, out);
  std::filesystem::remove(local);
  std::filesystem::remove(dir + "/scp.back");
}

int Run(int argc, char** argv) {
  const int requests = bench::Flag(argc, argv, "--requests", 2000);
  const int mib = bench::Flag(argc, argv, "--mib", 1024);
  const int websockets = bench::Flag(argc, argv, "--websockets", 1000);
  const std::string dir = testing::MakeTempDir("gpupool-gateway-bench");
  {
    // One user opens every WebSocket: the per-user connection limit (256 by default) and the
    // key's request rate (100/s) are lifted.
    testing::ServerProcess up(dir,
                              {"--simulate-gpus", "A100-80GB:1", "--node-name", "local",
                               "--max-connections-per-user", "0", "--key-rate", "0"},
                              "up");
    const testing::Credentials admin = up.ReadCredentials();
    api::Client client(admin.endpoint, admin.access_key, admin.secret_key);
    if (!testing::Eventually([&] { return client.Call("GET", "/v1/nodes/local").has_value(); })) {
      std::printf("the local agent did not register\n");
      return 1;
    }
    const int app = FreePort();
    auto task = client.CallJson("POST", "/v1/tasks",
                                nlohmann::json{{"command", App(app)}, {"ports", {app}}}.dump());
    if (!task) {
      std::printf("submit: %s\n", task.error().message.c_str());
      return 1;
    }
    const std::string id = (*task)["id"];
    const std::string base = "/t/" + id + "/" + std::to_string(app) + "/";
    if (!testing::Eventually(
            [&] {
              auto r = client.Call("GET", base + "small");
              return r && r->status == 200;
            },
            std::chrono::seconds(60))) {
      std::printf("the app did not answer through the gateway\n");
      return 1;
    }
    api::Client direct("http://127.0.0.1:" + std::to_string(app), "", "");
    Latency(client, direct, base, requests);

    const uint16_t server_port =
        static_cast<uint16_t>(std::stoi(admin.endpoint.substr(admin.endpoint.rfind(':') + 1)));
    const int64_t bytes = static_cast<int64_t>(mib) << 20;
    const std::string big = "big?mib=" + std::to_string(mib);
    const double direct_mbs =
        Download(static_cast<uint16_t>(app), "GET /" + big + " HTTP/1.1\r\nHost: x\r\n\r\n", bytes);
    const double gateway_mbs =
        Download(server_port,
                 api::testing::SignedGet(base + big, admin.access_key, admin.secret_key), bytes);
    std::printf("one stream, %d MiB: direct %.0f MB/s, through the gateway %.0f MB/s\n", mib,
                direct_mbs, gateway_mbs);

    EchoRoundTrip(admin, id, requests);

    const bench::Rss before = bench::ProcessRss(up.pid());
    std::vector<std::unique_ptr<api::testing::RawSocket>> open;
    for (int i = 0; i < websockets; ++i) {
      auto socket = std::make_unique<api::testing::RawSocket>(server_port);
      const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
      Result<std::string> auth = api::SignRequest(admin.access_key, admin.secret_key, "GET",
                                                  base + "ws", "", now, api::NewNonce());
      socket->Write("GET " + base +
                    "ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: " +
                    auth.value_or("") + "\r\n\r\n");
      std::optional<std::string> head = socket->ReadUntil("\r\n\r\n");
      if (!head || head->rfind("HTTP/1.1 101", 0) != 0) {
        std::printf("websocket %d: %s\n", i, head ? head->c_str() : "no answer");
        return 1;
      }
      open.push_back(std::move(socket));
    }
    const bench::Rss after = bench::ProcessRss(up.pid());
    std::printf(
        "%d idle WebSockets through the gateway: server+agent RSS %.1f -> %.1f MiB "
        "(+%.1f MiB, %.1f KiB each)\n",
        websockets, before.rss_mib, after.rss_mib, after.rss_mib - before.rss_mib,
        (after.rss_mib - before.rss_mib) * 1024 / websockets);
    open.clear();
    // Last: its megabytes of buffers would stay in the RSS measured above.
    RunningTaskFile(client, id, dir, mib);
    ScpCopy(admin, id, dir, mib);
    up.Terminate();
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace gpupool

int main(int argc, char** argv) { return gpupool::Run(argc, argv); }
