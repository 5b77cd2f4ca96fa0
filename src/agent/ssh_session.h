// The agent's end of SSH into a task (docs/api.md "SSH"): the tunnel's `ssh` streams. Each one
// gets an SSH server of its own, Debian's dropbear in inetd mode (`dropbear -i`), started inside
// the task like a command of `gpupool exec` — as the task's user, in its cgroup and mount
// namespace, with its environment — whose stdin and stdout are one end of a socket pair; the
// stream's bytes go to the other end and back. Before it starts, the keys the OPEN names (those
// of the task's project's members) are written into the task's ~/.ssh/authorized_keys, as the
// task's user, on lines of their own that each connection rewrites (the user's own lines stay).
// The node's host key is made once (PrepareSshServer) and handed to each server as descriptor 3,
// never as a file a task could read; the server's node registers its public half, which
// `gpupool ssh-config` pins.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/exec_session.h"
#include "agent/tunnel_agent.h"
#include "core/result.h"

namespace gpupool::agent {

// What marks the authorized_keys lines the agent manages (the end of each line).
inline constexpr const char* kManagedKeyMark = "gpupool-managed";

struct SshServer {
  std::string dropbear;    // the server's path
  std::string host_key;    // the private host key, dropbear's format
  std::string public_key;  // "ssh-ed25519 BASE64": what the node registers
  std::string fingerprint;  // its SHA256:… (os::SshFingerprint), for the agent's banner
};

// Finds dropbear and dropbearkey (PATH, /usr/sbin, /usr/bin) and reads the node's ed25519 host
// key at dir/ssh_host_ed25519_key, made there (0600, its directory 0700) the first time. An error
// says what is missing; the node then offers no SSH.
Result<SshServer> PrepareSshServer(const std::string& dir);

// Whether SSH may log into task `task` here: it runs here, under a uid of its own, as a process
// (an error is the OPEN's refusal).
using SshTaskCheck = std::function<Status(const std::string& task)>;

// The tunnel handler of kind `ssh`. `server` null: every OPEN is refused with `why_none`. Each
// accepted stream gets a thread of its own while its server runs; `log` gets the server's own
// lines (who logged in with which key, what failed).
TunnelHandler SshHandler(std::shared_ptr<const SshServer> server, std::string why_none,
                         SshTaskCheck check, ExecStarter start,
                         std::function<void(const std::string&)> log);

}  // namespace gpupool::agent
