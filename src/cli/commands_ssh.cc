// SSH into running tasks from the user's machine (docs/api.md "SSH"): `gpupool ssh-key
// add|ls|rm` registers the public keys that log in; `gpupool ssh-config` prints OpenSSH `Host`
// entries for the user's running tasks, whose ProxyCommand is `gpupool tunnel %h`, and writes the
// host keys of their nodes to the known_hosts file those entries name; `gpupool tunnel HOST`
// carries one SSH connection between stdin/stdout and the task's SSH server through the server
// (GET /v1/tasks/{id}/ssh, a WebSocket). VS Code Remote-SSH, ssh, scp and rsync use the entries.
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "os/files.h"

namespace gpupool::cli {
namespace {

// The suffix that makes a task's SSH host name (t-1.gpupool); `gpupool tunnel` takes it off.
constexpr std::string_view kHostSuffix = ".gpupool";
// The account a task's SSH server logs into: the task's own user (agent/runtime/task_runtime.h's
// kTaskUser).
constexpr const char* kTaskUser = "gpupool";
// How many bytes `gpupool tunnel` lets wait to be sent before it reads stdin again.
constexpr size_t kMaxUnsent = 4 << 20;

struct KeyFlags {
  std::string user;
  std::string file;
  std::string name;
  CommonFlags common;
};

// A .pub file's text without the line end (and blanks) around it.
std::string TrimLine(std::string text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r\n") + 1 - first);
}

// The public key file to add: `file`, "-" for stdin, else the first of the usual ones that exists.
Result<std::string> ReadPublicKey(const std::string& file) {
  if (file == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return TrimLine(text.str());
  }
  std::vector<std::string> candidates;
  if (!file.empty()) {
    candidates.push_back(file);
  } else {
    const char* home = std::getenv("HOME");
    for (const char* name : {"id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub"}) {
      candidates.push_back(std::string(home != nullptr ? home : ".") + "/.ssh/" + name);
    }
  }
  for (const std::string& path : candidates) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    return TrimLine(text.str());
  }
  if (!file.empty()) return NotFound("cannot read " + file);
  return NotFound(
      "no public key in ~/.ssh (id_ed25519.pub, id_ecdsa.pub, id_rsa.pub): make one "
      "with ssh-keygen -t ed25519, or name the file");
}

void AddKeyCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand(
      "ssh-key", "SSH public keys that log into your tasks (gpupool ssh-config): add, ls, rm");
  group->alias("ssh-keys");
  group->require_subcommand(1);

  auto add = std::make_shared<KeyFlags>();
  CLI::App* a = group->add_subcommand("add", "Register an SSH public key");
  a->add_option("file", add->file,
                "The public key file (default: ~/.ssh/id_ed25519.pub, id_ecdsa.pub or "
                "id_rsa.pub; - reads stdin)")
      ->type_name("FILE");
  a->add_option("--name", add->name, "What to call it (default: the key's comment)")
      ->type_name("NAME");
  a->add_option("--user", add->user, "Whose key (default: yours)")->type_name("USER");
  AddCommonFlags(a, &add->common);
  OnRun(a, exit_code, [f = add] {
    Result<std::string> text = ReadPublicKey(f->file);
    if (!text) return Failure(text.error().message);
    return WithSession(f->common, [&](Session& s) {
      std::string user;
      if (int code = ResolveUser(s, f->user, &user); code != kExitOk) return code;
      return PrintAnswer(
          s.client().Accounts().AddSshKey(user, {.name = f->name, .public_key = *text}),
          f->common.json, [](const proto::SshKeyView& k) {
            std::cout << "added " << k.name << " " << k.fingerprint << " for " << k.user << "\n";
          });
    });
  });

  auto ls = std::make_shared<KeyFlags>();
  CLI::App* l = group->add_subcommand("ls", "A user's SSH public keys");
  l->add_option("--user", ls->user, "Whose keys (default: yours)")->type_name("USER");
  AddCommonFlags(l, &ls->common);
  OnRun(l, exit_code, [f = ls] {
    return WithSession(f->common, [&](Session& s) {
      std::string user;
      if (int code = ResolveUser(s, f->user, &user); code != kExitOk) return code;
      return PrintAnswer(s.client().Accounts().ListSshKeys(user), f->common.json,
                         [](const proto::SshKeyList& answer) {
                           Table table({"NAME", "TYPE", "FINGERPRINT", "ADDED"});
                           for (const proto::SshKeyView& k : answer.keys) {
                             table.AddRow({k.name, k.public_key.substr(0, k.public_key.find(' ')),
                                           k.fingerprint, FormatTime(k.created_ms)});
                           }
                           std::cout << table.Render();
                         });
    });
  });

  auto rm = std::make_shared<KeyFlags>();
  CLI::App* r = group->add_subcommand("rm", "Remove an SSH public key");
  r->add_option("name", rm->name, "The key's name (gpupool ssh-key ls)")
      ->required()
      ->type_name("NAME");
  r->add_option("--user", rm->user, "Whose key (default: yours)")->type_name("USER");
  AddCommonFlags(r, &rm->common);
  OnRun(r, exit_code, [f = rm] {
    return WithSession(f->common, [&](Session& s) {
      std::string user;
      if (int code = ResolveUser(s, f->user, &user); code != kExitOk) return code;
      return PrintAnswer(s.client().Accounts().RemoveSshKey(user, f->name), f->common.json,
                         [](const proto::SshKeyView& k) {
                           std::cout << "removed " << k.name << " " << k.fingerprint << "\n";
                         });
    });
  });
}

// --- ssh-config ---

struct ConfigFlags {
  std::vector<std::string> ids;
  CommonFlags common;
};

// This program's absolute path: VS Code runs the ProxyCommand without the user's PATH.
std::string SelfPath() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string("gpupool");
}

// Replaces the lines of `aliases` in the known_hosts file at `path` (WritePrivateFile), keeping
// every other line.
Status WriteKnownHosts(const std::string& path, const std::map<std::string, std::string>& keys) {
  std::string kept;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
      const std::string host = line.substr(0, line.find(' '));
      if (!keys.count(host)) kept += line + "\n";
    }
  }
  for (const auto& [alias, key] : keys) kept += alias + " " + key + "\n";
  return WritePrivateFile(path, kept);
}

int RunSshConfig(const ConfigFlags& f) {
  std::vector<std::string> ids;
  for (const std::string& text : f.ids) {
    Result<std::string> id = ParseTaskId(text);
    if (!id) return UsageError(id.error().message);
    ids.push_back(*id);
  }
  Result<std::string> config = ConfigPath(SystemEnv());
  if (!config) return Failure(config.error().message);
  const std::string known_hosts = config->substr(0, config->rfind('/') + 1) + "known_hosts";
  return WithSession(f.common, [&](Session& s) {
    std::vector<proto::Task> tasks;
    if (ids.empty()) {
      Result<proto::WhoAmI> me = s.client().Accounts().WhoAmI();
      if (!me) return ApiFailure(me.error());
      proto::TaskListQuery query;
      query.state = {"running"};
      query.limit = 1000;
      Result<proto::TaskList> running = s.client().Tasks().List(query);
      if (!running) return ApiFailure(running.error());
      for (proto::Task& t : running->tasks) {
        if (t.user == me->user && t.placement) tasks.push_back(std::move(t));
      }
      if (tasks.empty()) {
        std::cerr << "gpupool: you have no running task; run this again once one runs\n";
      }
    } else {
      for (const std::string& id : ids) {
        Result<proto::TaskDetail> t = s.client().Tasks().Get(id);
        if (!t) return ApiFailure(t.error());
        if (t->state != "running" || !t->placement) {
          return Failure("task " + id + " is " + t->state + ": SSH logs into a task while it runs");
        }
        tasks.push_back(std::move(*t));
      }
    }
    std::map<std::string, std::string> host_keys;  // alias -> key
    std::map<std::string, std::string> alias_of;   // node -> alias
    for (const proto::Task& t : tasks) {
      const std::string& name = t.placement->node;
      if (alias_of.count(name)) continue;
      Result<proto::NodeView> node = s.client().Nodes().Get(name);
      if (!node) return ApiFailure(node.error());
      if (node->ssh_host_key.empty()) {
        std::cerr << "gpupool: node " << name << " offers no SSH server (its agent found no "
                  << "dropbear); its tasks are left out\n";
        alias_of[name] = "";
        continue;
      }
      alias_of[name] = "gpupool-node-" + name;
      host_keys[alias_of[name]] = node->ssh_host_key;
    }
    if (!host_keys.empty()) {
      if (Status written = WriteKnownHosts(known_hosts, host_keys); !written) {
        return Failure(written.error().message);
      }
    }
    std::string proxy = ShellJoin({SelfPath()}) + " tunnel";
    if (!f.common.profile.empty()) proxy += " --profile " + ShellJoin({f.common.profile});
    std::cout << "# gpupool ssh-config for " << s.profile().endpoint
              << ": add it to ~/.ssh/config (gpupool ssh-config >> ~/.ssh/config), then\n"
              << "# ssh t-N" << kHostSuffix << ", or pick the host in VS Code Remote-SSH. The\n"
              << "# ProxyCommand signs with your saved profile (gpupool login): variables of this\n"
              << "# shell (GPUPOOL_ACCESS_KEY, …) do not reach an editor's ssh.\n";
    for (const proto::Task& t : tasks) {
      const std::string& alias = alias_of[t.placement->node];
      if (alias.empty()) continue;
      std::cout << "\nHost " << t.id << kHostSuffix << "\n"
                << "  HostName " << t.id << "\n"
                << "  User " << kTaskUser << "\n"
                << "  ProxyCommand " << proxy << " %h\n"
                << "  HostKeyAlias " << alias << "\n"
                << "  UserKnownHostsFile " << ShellJoin({known_hosts}) << "\n"
                << "  StrictHostKeyChecking yes\n";
    }
    return kExitOk;
  });
}

// --- tunnel ---

struct TunnelFlags {
  std::string host;
  CommonFlags common;
};

// What the WebSocket's end left: set once, waited for by the main thread.
struct TunnelEnd {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::string> closed;
  size_t unsent = 0;  // bytes of stdin sent and not yet written to the server
};

int RunTunnel(const TunnelFlags& f) {
  std::string host = f.host;
  if (host.ends_with(kHostSuffix)) host.resize(host.size() - kHostSuffix.size());
  Result<std::string> id = ParseTaskId(host);
  if (!id) return UsageError(id.error().message);
  return WithSession(f.common, [&](Session& s) {
    api::IoLoop loop(1);
    Result<std::shared_ptr<api::Duplex>> dialed =
        api::DialWebSocket(loop, s.Dial("/v1/tasks/" + *id + "/ssh"));
    if (!dialed) return ApiFailure(dialed.error());
    const std::shared_ptr<api::Duplex> ws = *dialed;
    auto end = std::make_shared<TunnelEnd>();
    api::DuplexHandlers h;
    h.on_data = [](std::string bytes) {
      // ssh reads its ProxyCommand's output as it comes: a blocking write is the back-pressure.
      return os::WriteAll(STDOUT_FILENO, bytes) == 0;
    };
    h.on_end = [] { close(STDOUT_FILENO); };
    h.on_sent = [end](size_t bytes) {
      std::lock_guard lock(end->mu);
      end->unsent -= std::min(bytes, end->unsent);
      end->cv.notify_all();
    };
    h.on_closed = [end](std::string why) {
      std::lock_guard lock(end->mu);
      end->closed = std::move(why);
      end->cv.notify_all();
    };
    ws->Start(std::move(h));
    // Ends with stdin (or with the process): a read cannot be interrupted portably.
    std::thread([ws, end] {
      std::string buffer(64 * 1024, '\0');
      while (true) {
        {
          std::unique_lock lock(end->mu);
          end->cv.wait(lock, [&] { return end->closed || end->unsent < kMaxUnsent; });
          if (end->closed) return;
        }
        const ssize_t n = read(STDIN_FILENO, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        {
          std::lock_guard lock(end->mu);
          end->unsent += static_cast<size_t>(n);
        }
        if (!ws->Send(std::string(buffer.data(), static_cast<size_t>(n)))) return;
      }
      ws->End();
    }).detach();
    std::unique_lock lock(end->mu);
    end->cv.wait(lock, [&] { return end->closed.has_value(); });
    if (!end->closed->empty())
      return Failure("the SSH stream of task " + *id + " broke: " + *end->closed);
    return kExitOk;
  });
}

}  // namespace

void AddSshCommands(CLI::App& app, int& exit_code) {
  AddKeyCommands(app, exit_code);

  auto config = std::make_shared<ConfigFlags>();
  CLI::App* c = app.add_subcommand(
      "ssh-config",
      "Print OpenSSH Host entries for your running tasks (ssh t-N.gpupool, VS Code Remote-SSH) "
      "and pin their nodes' host keys");
  c->add_option("ids", config->ids, "Only these tasks (default: your running ones)")
      ->type_name("ID");
  AddCommonFlags(c, &config->common);
  OnRun(c, exit_code, [config] { return RunSshConfig(*config); });

  auto tunnel = std::make_shared<TunnelFlags>();
  CLI::App* t = app.add_subcommand(
      "tunnel",
      "Carry one SSH connection between stdin/stdout and a running task (the ProxyCommand of "
      "gpupool ssh-config)");
  t->add_option("host", tunnel->host, "The task (t-42, 42 or t-42.gpupool)")
      ->required()
      ->type_name("HOST");
  AddCommonFlags(t, &tunnel->common);
  OnRun(t, exit_code, [tunnel] { return RunTunnel(*tunnel); });
}

}  // namespace gpupool::cli
