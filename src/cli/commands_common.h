// What the CLI's commands share: the --profile/--json flags, the exit codes and error printing
// ("gpupool: <message>" on stderr), the signed session to the server, lenient readers of the
// server's JSON, query strings and the caller's default project.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/client.h"
#include "cli/config.h"
#include "core/result.h"

namespace gpupool::cli {

using Json = nlohmann::json;

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the API, the network or the configuration failed
inline constexpr int kExitUsage = 2;    // the command line is wrong

struct CommonFlags {
  std::string profile;
  bool json = false;
};

// Adds --profile and --json to a command.
void AddCommonFlags(CLI::App* cmd, CommonFlags* flags);

// An option whose presence matters (PATCH bodies, submit): sets *out when given.
CLI::Option* AddOptional(CLI::App* cmd, const std::string& name, std::optional<std::string>* out,
                         const std::string& type, const std::string& help);

// Print "gpupool: <message>" to stderr and return the exit code.
int UsageError(const std::string& message);
int Failure(const std::string& message);

// Makes `run` the command's callback; what it returns becomes `exit_code`. Unexpected JSON from
// the server (a missing or mistyped field) is reported as a failure instead of escaping.
void OnRun(CLI::App* cmd, int& exit_code, std::function<int()> run);

// One command's connection to the server: the resolved profile and a signed client.
class Session {
 public:
  // Resolves the configuration (see ResolveProfile); on failure prints why, sets *exit_code and
  // returns null.
  static std::unique_ptr<Session> Open(const CommonFlags& flags, int* exit_code);
  explicit Session(Profile profile);

  // Sends one request (a JSON body when `body` is not null) and returns the parsed answer.
  Result<Json> Call(std::string_view method, const std::string& path, const Json* body = nullptr);
  const Profile& profile() const { return profile_; }
  // The signed client itself, for requests that are not JSON (file transfers).
  api::Client& client() { return client_; }

 private:
  Profile profile_;
  api::Client client_;
};

// Opens a session (see Session::Open) and runs `run` with it; returns its exit code.
int WithSession(const CommonFlags& flags, const std::function<int(Session&)>& run);

// Runs one request and prints the answer: its JSON with --json, else what `human` prints.
int CallAndPrint(Session& session, std::string_view method, const std::string& path,
                 const Json* body, bool json, const std::function<void(const Json&)>& human);

// Prints a server error (exit 1).
int ApiFailure(const Error& error);

// Pretty JSON on stdout (two-space indent, invalid UTF-8 replaced).
void PrintJson(const Json& value);

// Lenient readers: a missing or null field reads as empty / 0 / false.
std::string Str(const Json& j, std::string_view key);
int64_t Int(const Json& j, std::string_view key);
bool Bool(const Json& j, std::string_view key);
const Json& Array(const Json& j, std::string_view key);  // an empty array when not one

// "?a=1&b=x" (percent-encoded), or "" when empty.
class Query {
 public:
  Query& Add(std::string_view name, std::string_view value);
  std::string String() const;

 private:
  std::vector<std::pair<std::string, std::string>> params_;
};

// "/v1/tasks/" + encoded id.
std::string PathPart(std::string_view segment);

int64_t NowMs();

// `flag` when given; otherwise the caller's only project (GET /v1/projects). On failure prints
// why and returns the exit code (2 when the caller has several projects), else 0.
int ResolveProject(Session& session, const std::string& flag, std::string* project);

}  // namespace gpupool::cli
