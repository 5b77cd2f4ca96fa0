// What the CLI's commands share: the --profile/--json flags, the exit codes and error printing
// ("gpupool: <message>" on stderr), the signed session to the server (its typed client,
// api/resources.h), printing an answer (its wire JSON with --json) and the caller's default
// project.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/client.h"
#include "api/resources.h"
#include "cli/config.h"
#include "core/result.h"
#include "proto/json_codec.h"

namespace gpupool::cli {

using Json = proto::Json;  // what proto::Encode gives; printed by --json

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

// Print "gpupool: <message>" to stderr — with --json, an ErrorOutput (cli/output.h) — and return
// the exit code.
int UsageError(const std::string& message);
int Failure(const std::string& message);
// Whether errors print as JSON: AddCommonFlags' --json turns it on, for the whole process.
void SetJsonErrors(bool on);

// Makes `run` the command's callback; what it returns becomes `exit_code`.
void OnRun(CLI::App* cmd, int& exit_code, std::function<int()> run);

// One command's connection to the server: the resolved profile and a signed client.
class Session {
 public:
  // Resolves the configuration (see ResolveProfile); on failure prints why, sets *exit_code and
  // returns null.
  static std::unique_ptr<Session> Open(const CommonFlags& flags, int* exit_code);
  explicit Session(Profile profile);

  const Profile& profile() const { return profile_; }
  // The signed client: its typed calls (client().Tasks().Get(id)) and file transfers.
  api::Client& client() { return client_; }
  // A WebSocket to `path` of the server, signed with the session's key (and its CA).
  api::WebSocketDial Dial(std::string path) const;

 private:
  Profile profile_;
  api::Client client_;
};

// Opens a session (see Session::Open) and runs `run` with it; returns its exit code.
int WithSession(const CommonFlags& flags, const std::function<int(Session&)>& run);

// Prints a server error (exit 1), with its canonical code under --json.
int ApiFailure(const Error& error);

// Pretty JSON on stdout (two-space indent, invalid UTF-8 replaced).
void PrintJson(const Json& value);

// Prints an answer: its wire JSON with --json (what the server sent), else what `human` prints;
// a failed call prints the server's error (exit 1).
template <typename T, typename Human>
int PrintAnswer(const Result<T>& answer, bool json, Human&& human) {
  if (!answer) return ApiFailure(answer.error());
  if (json) {
    PrintJson(proto::Encode(*answer));
  } else {
    human(*answer);
  }
  return kExitOk;
}

// The first page of a paged list at `cursor`, or with `all` every page after it too, their
// items gathered into one (whose `next` is then the last page's: none). `fetch(cursor)` reads a
// page; `next` is its cursor field (an offset or a seq; nullopt: the last page).
template <typename Page, typename Item>
Result<Page> ReadPages(bool all, int64_t cursor, const std::function<Result<Page>(int64_t)>& fetch,
                       std::optional<int64_t> Page::*next, std::vector<Item> Page::*items) {
  Result<Page> listed = fetch(cursor);
  if (!listed || !all) return listed;
  while ((*listed).*next) {
    Result<Page> page = fetch(*((*listed).*next));
    if (!page) return page;
    for (Item& item : (*page).*items) ((*listed).*items).push_back(std::move(item));
    (*listed).*next = (*page).*next;
  }
  return listed;
}

int64_t NowMs();

// `flag` when given; otherwise the caller's only project (GET /v1/whoami). On failure prints
// why and returns the exit code (2 when the caller has several projects), else 0.
int ResolveProject(Session& session, const std::string& flag, std::string* project);

// The user named by --user (`flag`), or the one the session's own access key belongs to; an exit
// code, kExitOk once *user is set.
int ResolveUser(Session& session, const std::string& flag, std::string* user);

}  // namespace gpupool::cli
