// `gpupool login`: checks an endpoint and key pair against the server, then saves them as a named
// profile in the config file (atomically, mode 0600). Values come from the flags, else from the
// GPUPOOL_* environment, else from stdin (the secret without echo on a terminal).
#include <termios.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/config.h"
#include "cli/output.h"

namespace gpupool::cli {
namespace {

struct LoginState {
  std::string profile;
  std::optional<std::string> endpoint;
  std::optional<std::string> access_key;
  std::optional<std::string> secret_key;
  std::optional<std::string> ca_file;
  bool no_verify = false;
  bool json = false;
};

// One line from stdin after a prompt on stderr; nullopt at end of input.
std::optional<std::string> Prompt(const std::string& prompt, bool secret) {
  const bool tty = ::isatty(STDIN_FILENO) == 1;
  std::cerr << prompt << std::flush;
  termios saved{};
  const bool hide = secret && tty && ::tcgetattr(STDIN_FILENO, &saved) == 0;
  if (hide) {
    termios quiet = saved;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::string line;
  const bool got = static_cast<bool>(std::getline(std::cin, line));
  if (hide) {
    ::tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    std::cerr << "\n";
  } else if (!tty) {
    std::cerr << "\n";
  }
  if (!got) return std::nullopt;
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  while (!line.empty() && line.front() == ' ') line.erase(0, 1);
  return line;
}

int RunLogin(const LoginState& f) {
  const Getenv env = SystemEnv();
  const std::string name = ProfileName(env, f.profile);
  if (!ValidProfileName(name)) {
    return UsageError("profile name '" + name + "' must be 1..64 characters of A-Z a-z 0-9 - _ .");
  }
  Result<std::string> path = ConfigPath(env);
  if (!path) return Failure(path.error().message);
  Result<std::optional<ConfigFile>> existing = ReadConfig(*path);
  if (!existing) return Failure(existing.error().message);
  ConfigFile config = existing->value_or(ConfigFile{});
  const Profile* old = config.Find(name);

  Profile p;
  if (f.endpoint) {
    p.endpoint = *f.endpoint;
  } else if (auto e = env(kEndpointEnv)) {
    p.endpoint = *e;
  } else {
    const std::string fallback = old != nullptr ? old->endpoint : "";
    auto typed = Prompt("Endpoint (http(s)://host:port)" +
                            (fallback.empty() ? std::string() : " [" + fallback + "]") + ": ",
                        false);
    if (!typed) return UsageError("no endpoint: pass --endpoint or type it");
    p.endpoint = typed->empty() ? fallback : *typed;
  }
  while (!p.endpoint.empty() && p.endpoint.back() == '/') p.endpoint.pop_back();
  const bool http = p.endpoint.rfind("http://", 0) == 0 && p.endpoint.size() > 7;
  const bool https = p.endpoint.rfind("https://", 0) == 0 && p.endpoint.size() > 8;
  if (!http && !https) {
    return UsageError("endpoint must look like http://host:port or https://host:port, got '" +
                      p.endpoint + "'");
  }
  if (f.ca_file) {
    p.ca_file = *f.ca_file;
  } else if (auto e = env(kCaFileEnv)) {
    p.ca_file = *e;
  }
  if (!p.ca_file.empty()) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(p.ca_file, ec);
    if (!ec) p.ca_file = absolute.string();  // the profile is used from any directory
  }
  const std::optional<std::string> env_ak = env(kAccessKeyEnv);
  const std::optional<std::string> env_sk = env(kSecretKeyEnv);
  const bool keys_from_env = !f.access_key && !f.secret_key && env_ak && env_sk;
  if (f.access_key) {
    p.access_key = *f.access_key;
  } else if (keys_from_env) {
    p.access_key = *env_ak;
  } else {
    auto typed = Prompt("Access key: ", false);
    if (!typed || typed->empty()) return UsageError("no access key: pass --access-key or type it");
    p.access_key = *typed;
  }
  if (f.secret_key) {
    p.secret_key = *f.secret_key;
  } else if (keys_from_env) {
    p.secret_key = *env_sk;
  } else {
    auto typed = Prompt("Secret key: ", true);
    if (!typed || typed->empty()) {
      return UsageError("no secret key: type it, pipe it on stdin, or pass --secret-key");
    }
    p.secret_key = *typed;
  }
  if (p.access_key.empty() || p.secret_key.empty()) {
    return UsageError("the access key and the secret key must not be empty");
  }

  if (!f.no_verify) {
    Session session(p);
    proto::TaskListQuery one;
    one.limit = 1;
    Result<proto::TaskList> check = session.client().Tasks().List(one);
    if (!check) {
      return Failure("login to " + p.endpoint + " failed: " + check.error().message +
                     " (nothing saved)");
    }
  }
  config.Set(name, p);
  if (Status ok = WriteConfig(*path, config); !ok) return Failure(ok.error().message);
  if (f.json) {
    PrintJson(proto::Encode(LoginOutput{.profile = name,
                                        .path = *path,
                                        .endpoint = p.endpoint,
                                        .access_key = p.access_key,
                                        .verified = !f.no_verify}));
  } else {
    std::cout << "Saved profile '" << name << "' (" << p.endpoint << ", " << p.access_key << ") to "
              << *path << "\n";
  }
  return kExitOk;
}

}  // namespace

void AddLoginCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<LoginState>();
  CLI::App* cmd =
      app.add_subcommand("login",
                         "Check credentials against the server and save them as a profile in "
                         "~/.config/gpupool/config (mode 0600)");
  cmd->add_option("--profile", f->profile,
                  "Profile to write (default: $GPUPOOL_PROFILE or 'default')")
      ->type_name("NAME");
  AddOptional(cmd, "--endpoint", &f->endpoint, "URL",
              "http://host:port or https://host:port (default: $GPUPOOL_ENDPOINT, else asked)");
  AddOptional(cmd, "--access-key", &f->access_key, "AK",
              "Access key (default: $GPUPOOL_ACCESS_KEY, else asked)");
  AddOptional(cmd, "--secret-key", &f->secret_key, "SECRET",
              "Secret key (default: $GPUPOOL_SECRET_KEY, else read from stdin; a flag shows "
              "it to other users of the machine)");
  AddOptional(cmd, "--ca-file", &f->ca_file, "FILE",
              "https: the PEM CA certificate(s) the server's certificate must chain to "
              "(default: $GPUPOOL_CA_FILE, else the system's store)");
  cmd->add_flag("--no-verify", f->no_verify, "Save without checking against the server");
  cmd->add_flag("--json", f->json, "Print what was saved as JSON (never the secret)");
  OnRun(cmd, exit_code, [f] { return RunLogin(*f); });
}

}  // namespace gpupool::cli
