// The agent's end of SSH into a task (see ssh_session.h).
#include "agent/ssh_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <filesystem>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "agent/programs.h"
#include "agent/runtime/linux_proc.h"
#include "agent/stream_worker.h"
#include "core/ssh_key.h"
#include "os/files.h"
#include "os/sha256.h"

namespace gpupool::agent {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr const char* kHostKeyName = "ssh_host_ed25519_key";

// Writes the managed lines of ~/.ssh/authorized_keys — in kTaskHome, the home the task's passwd
// entry gives dropbear, whatever the task's HOME says: the user's own lines stay, those ending
// in the mark are replaced by the keys given as arguments. Runs as the task's user (no link it made
// can send the agent's writes elsewhere); the file is replaced whole (a rename).
const std::string kAuthorizedKeysScript =
    std::string("umask 077; d=\"") + kTaskHome +
    "/.ssh\"; f=\"$d/authorized_keys\"; t=\"$d/.authorized_keys.$$\"\n"
    "mkdir -p \"$d\" || exit 1\n"
    "{ if [ -f \"$f\" ]; then grep -v ' " +
    kManagedKeyMark + "$' \"$f\" || :; fi\n  for k in \"$@\"; do printf '%s " + kManagedKeyMark +
    "\\n' \"$k\"; done; } > \"$t\" &&\nmv -f \"$t\" \"$f\"\n";

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

class Session : public StreamWorker {
 public:
  Session(std::shared_ptr<api::tunnel::Stream> stream, proto::TunnelOpen open,
          std::shared_ptr<const SshServer> server, ExecStarter start,
          std::function<void(const std::string&)> log)
      : StreamWorker(std::move(stream)),
        open_(std::move(open)),
        server_(std::move(server)),
        start_(std::move(start)),
        log_(std::move(log)) {}

 private:
  void OnData(std::string bytes) override {
    {
      std::lock_guard lock(mu_);
      inbox_.push_back(std::move(bytes));  // its credit returns once written to the server
    }
    Wake();
  }

  void OnEnd() override {
    {
      std::lock_guard lock(mu_);
      client_ended_ = true;
    }
    Wake();
  }

  void Log(const std::string& line) const {
    if (log_) log_("ssh " + open_.task + ": " + line);
  }

  // Writes the managed lines of the task's authorized_keys (kAuthorizedKeysScript).
  Status WriteAuthorizedKeys() {
    ExecSpec spec;
    spec.command = {"/bin/sh", "-c", kAuthorizedKeysScript, "gpupool-ssh-keys"};
    spec.command.insert(spec.command.end(), open_.keys.begin(), open_.keys.end());
    Result<ExecProcess> p = start_(open_.task, spec);
    if (!p) return tl::unexpected(p.error());
    p->input = UniqueFd();
    std::string said = ReadToEnd(p->error.get());
    ReadToEnd(p->output.get());
    const ExecStatus status = p->wait();
    if (status.exit_code != 0) {
      while (!said.empty() && said.back() == '\n') said.pop_back();
      return MakeError(ErrorCode::kInternal,
                       "cannot write the task's ~/.ssh/authorized_keys (exit " +
                           std::to_string(status.exit_code) + (said.empty() ? "" : ": " + said) +
                           ")");
    }
    return {};
  }

  void Run() override {
    if (Status keys = WriteAuthorizedKeys(); !keys) {
      Log(keys.error().message);
      return stream_->Reset(keys.error().message);
    }
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return stream_->Reset("socketpair: " + ErrnoText(errno));
    }
    UniqueFd ours(pair[0]);
    UniqueFd theirs(pair[1]);
    // The host key reaches the server as a descriptor only (a memfd: no file of it in the task).
    UniqueFd key(memfd_create("gpupool-ssh-host-key", MFD_CLOEXEC));
    if (!key.ok() || os::WriteAll(key.get(), server_->host_key) != 0) {
      return stream_->Reset("cannot hand the host key over: " + ErrnoText(errno));
    }
    ExecSpec spec;
    // -i: one connection on stdin/stdout (its log goes to syslog: inetd mode takes no -E); -e:
    // the task's environment in the sessions; -s: keys only; -w: no root; -k: no remote port
    // forwarding (local forwarding stays: VS Code needs it); -m: no motd; -W: a channel window
    // for the tunnel's round trip (dropbear's 24 KiB held an upload to a third of a download).
    spec.command = {server_->dropbear, "-i", "-e", "-s", "-w", "-k", "-m", "-W", "4194304", "-r",
                    "/proc/self/fd/3"};
    spec.stdio_socket = theirs.get();
    spec.fd3 = key.get();
    Result<ExecProcess> started = start_(open_.task, spec);
    theirs = UniqueFd();
    key = UniqueFd();
    if (!started) {
      Log("cannot start " + server_->dropbear + ": " + started.error().message);
      return stream_->Reset("cannot start the SSH server: " + started.error().message);
    }
    Pump(*started, ours);
  }

  // Carries the connection's bytes until the server ended and its last bytes are sent, or the
  // stream broke (then the server is killed).
  void Pump(ExecProcess& p, UniqueFd& socket) {
    SetNonBlocking(socket.get());
    SetNonBlocking(p.error.get());
    bool socket_open = true;  // the server still sends
    bool socket_writable = true;
    bool err_open = p.error.ok();
    bool exited = false;
    std::string pending;  // the front inbox chunk, partly written
    std::string log_line;
    std::string buffer(kReadChunk, '\0');
    while (true) {
      std::optional<std::string> broken;
      bool client_ended = false;
      {
        std::lock_guard lock(mu_);
        broken = broken_;
        if (pending.empty() && !inbox_.empty()) {
          pending = std::move(inbox_.front());
          inbox_.pop_front();
        }
        client_ended = client_ended_ && inbox_.empty();
      }
      if (broken) {
        p.kill();
        if (!exited) p.wait();
        return stream_->Reset(*broken);
      }
      if (socket_writable && pending.empty() && client_ended) {
        shutdown(socket.get(), SHUT_WR);  // the client sends no more
        socket_writable = false;
      }
      if (exited && !socket_open && !err_open) break;
      const bool saturated = stream_->Saturated();
      pollfd fds[4];
      nfds_t n = 0;
      fds[n++] = {wake(), POLLIN, 0};
      short socket_events = 0;
      if (socket_open && !saturated) socket_events |= POLLIN;
      if (socket_writable && !pending.empty()) socket_events |= POLLOUT;
      const int socket_at = socket_events != 0 ? static_cast<int>(n++) : -1;
      if (socket_at >= 0) fds[socket_at] = {socket.get(), socket_events, 0};
      const int err_at = err_open ? static_cast<int>(n++) : -1;
      if (err_at >= 0) fds[err_at] = {p.error.get(), POLLIN, 0};
      const int exit_at = !exited ? static_cast<int>(n++) : -1;
      if (exit_at >= 0) fds[exit_at] = {p.done.get(), POLLIN, 0};
      if (poll(fds, n, -1) < 0 && errno != EINTR) {
        p.kill();
        if (!exited) p.wait();
        return stream_->Reset("poll: " + ErrnoText(errno));
      }
      if (fds[0].revents != 0) Drain();
      if (socket_at >= 0 && fds[socket_at].revents != 0) {
        if ((socket_events & POLLIN) != 0) {
          const ssize_t got = read(socket.get(), buffer.data(), buffer.size());
          if (got > 0) {
            stream_->Write(std::string(buffer.data(), static_cast<size_t>(got)));
          } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
            socket_open = false;
            stream_->End();  // the server sends no more
          }
        }
        if ((socket_events & POLLOUT) != 0 && !pending.empty()) {
          const ssize_t w = send(socket.get(), pending.data(), pending.size(), MSG_NOSIGNAL);
          if (w > 0) {
            stream_->Consumed(static_cast<size_t>(w));
            pending.erase(0, static_cast<size_t>(w));
          } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
            socket_writable = false;  // the server closed its input: the rest is dropped
            stream_->Consumed(pending.size());
            pending.clear();
          }
        }
      }
      if (err_at >= 0 && fds[err_at].revents != 0) {
        const ssize_t got = read(p.error.get(), buffer.data(), buffer.size());
        if (got > 0) {
          log_line.append(buffer.data(), static_cast<size_t>(got));
          for (size_t end; (end = log_line.find('\n')) != std::string::npos;) {
            Log(log_line.substr(0, end));
            log_line.erase(0, end + 1);
          }
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          err_open = false;
        }
      }
      if (exit_at >= 0 && fds[exit_at].revents != 0) {
        exited = true;
        const ExecStatus status = p.wait();
        if (status.exit_code != 0) Log("the server " + ExitText(status));
      }
    }
    if (!log_line.empty()) Log(log_line);
  }

  static std::string ExitText(const ExecStatus& s) {
    return s.signal != 0 ? "was killed by signal " + std::to_string(s.signal)
                         : "exited with code " + std::to_string(s.exit_code);
  }

  const proto::TunnelOpen open_;
  const std::shared_ptr<const SshServer> server_;
  const ExecStarter start_;
  const std::function<void(const std::string&)> log_;

  // Under mu_ (StreamWorker's), with broken_:
  std::deque<std::string> inbox_;
  bool client_ended_ = false;
};

}  // namespace

Result<SshServer> PrepareSshServer(const std::string& dir) {
  SshServer server;
  server.dropbear = FindProgram("dropbear");
  const std::string keygen = FindProgram("dropbearkey");
  if (server.dropbear.empty() || keygen.empty()) {
    return NotFound("no dropbear on this node (install the dropbear-bin package)");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return MakeError(ErrorCode::kInternal, "cannot create " + dir + ": " + ec.message());
  chmod(dir.c_str(), 0700);
  const std::string path = dir + "/" + kHostKeyName;
  if (access(path.c_str(), F_OK) != 0) {
    // Made beside its place and renamed: an agent killed meanwhile leaves no half a key.
    const std::string temp = path + ".new";
    unlink(temp.c_str());
    Result<std::string> made = RunTool({keygen, "-t", "ed25519", "-f", temp});
    if (!made) return tl::unexpected(made.error());
    chmod(temp.c_str(), 0600);
    if (rename(temp.c_str(), path.c_str()) != 0) {
      return MakeError(ErrorCode::kInternal, "cannot rename " + temp + ": " + ErrnoText(errno));
    }
  }
  std::optional<std::string> key = ReadFile(path);
  if (!key || key->empty()) return MakeError(ErrorCode::kInternal, "cannot read " + path);
  server.host_key = std::move(*key);
  Result<std::string> shown = RunTool({keygen, "-y", "-f", path});
  if (!shown) return tl::unexpected(shown.error());
  // "Public key portion is:\nssh-ed25519 AAAA… root@host\nFingerprint: …"
  const size_t at = shown->find("ssh-ed25519 ");
  Result<SshPublicKey> key_line =
      at == std::string::npos
          ? Result<SshPublicKey>(InvalidArgument("no ed25519 key"))
          : ParseSshPublicKey(std::string_view(*shown).substr(at, shown->find('\n', at) - at));
  if (!key_line) {
    return MakeError(ErrorCode::kInternal, "dropbearkey -y printed no ed25519 public key (" +
                                               key_line.error().message + "): " + *shown);
  }
  server.public_key = key_line->Line();
  server.fingerprint = os::SshFingerprint(key_line->blob);
  return server;
}

TunnelHandler SshHandler(std::shared_ptr<const SshServer> server, std::string why_none,
                         SshTaskCheck check, ExecStarter start,
                         std::function<void(const std::string&)> log) {
  return [server = std::move(server), why_none = std::move(why_none), check = std::move(check),
          start = std::move(start), log = std::move(log)](
             const proto::TunnelOpen& open, std::shared_ptr<api::tunnel::Stream> stream) {
    if (!server) return stream->Refuse("this node offers no SSH server: " + why_none);
    if (Status st = check(open.task); !st) return stream->Refuse(st.error().message);
    if (open.keys.empty()) {
      return stream->Refuse("no SSH key may log into task " + open.task +
                            ": add yours with gpupool ssh-key add");
    }
    stream->Accept();
    std::make_shared<Session>(std::move(stream), open, server, start, log)->Begin();
  };
}

}  // namespace gpupool::agent
