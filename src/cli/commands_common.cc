// The CLI commands' shared plumbing (see commands_common.h).
#include "cli/commands_common.h"

#include <chrono>
#include <iostream>

#include "cli/format.h"
#include "cli/output.h"

namespace gpupool::cli {

void AddCommonFlags(CLI::App* cmd, CommonFlags* flags) {
  cmd->add_option("--profile", flags->profile,
                  "Profile of the config file to use (default: $GPUPOOL_PROFILE or 'default'); "
                  "when given, GPUPOOL_* credentials in the environment are ignored")
      ->type_name("NAME");
  cmd->add_flag_callback(
      "--json",
      [flags] {
        flags->json = true;
        SetJsonErrors(true);
      },
      "Print the server's JSON instead of a table (and errors as JSON on stderr)");
}

CLI::Option* AddOptional(CLI::App* cmd, const std::string& name, std::optional<std::string>* out,
                         const std::string& type, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          name, [out](const std::string& v) { *out = v; }, help)
      ->type_name(type);
}

namespace {

bool json_errors = false;

int PrintError(std::string code, const std::string& message, int exit_code) {
  if (json_errors) {
    const ErrorOutput out{.code = std::move(code), .message = message, .exit_code = exit_code};
    std::cerr << proto::Encode(out).dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    std::cerr << "gpupool: " << message << "\n";
  }
  return exit_code;
}

}  // namespace

void SetJsonErrors(bool on) { json_errors = on; }

int UsageError(const std::string& message) { return PrintError("usage", message, kExitUsage); }

int Failure(const std::string& message) { return PrintError("failed", message, kExitFailure); }

int ApiFailure(const Error& error) {
  return PrintError(std::string(ErrorCodeName(error.code)), error.message, kExitFailure);
}

void OnRun(CLI::App* cmd, int& exit_code, std::function<int()> run) {
  cmd->callback([&exit_code, run = std::move(run)] {
    exit_code = run();
    std::cout.flush();
  });
}

Session::Session(Profile profile)
    : profile_(std::move(profile)),
      // A request turned away for the key's rate waits as the server says and goes again: a
      // dataset push or a large copy makes thousands.
      client_(profile_.endpoint, profile_.access_key, profile_.secret_key,
              {.ca_file = profile_.ca_file, .throttled_wait = std::chrono::minutes(10)}) {}

std::unique_ptr<Session> Session::Open(const CommonFlags& flags, int* exit_code) {
  Result<Profile> profile = ResolveProfile(SystemEnv(), flags.profile);
  if (!profile) {
    *exit_code = Failure(profile.error().message);
    return nullptr;
  }
  return std::make_unique<Session>(std::move(*profile));
}

api::WebSocketDial Session::Dial(std::string path) const {
  api::WebSocketDial dial;
  dial.endpoint = profile_.endpoint;
  dial.access_key = profile_.access_key;
  dial.secret_key = profile_.secret_key;
  dial.ca_file = profile_.ca_file;
  dial.path_with_query = std::move(path);
  return dial;
}

int WithSession(const CommonFlags& flags, const std::function<int(Session&)>& run) {
  int code = kExitOk;
  std::unique_ptr<Session> session = Session::Open(flags, &code);
  if (!session) return code;
  return run(*session);
}

void PrintJson(const Json& value) {
  std::cout << value.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int ResolveProject(Session& session, const std::string& flag, std::string* project) {
  if (!flag.empty()) {
    *project = flag;
    return kExitOk;
  }
  // The caller's own projects (an admin sees every project but belongs to a few), the same
  // default the server applies to a submission without a project.
  Result<proto::WhoAmI> me = session.client().Accounts().WhoAmI();
  if (!me) return ApiFailure(me.error());
  const std::vector<std::string>& ids = me->projects;
  if (ids.size() == 1) {
    *project = ids.front();
    return kExitOk;
  }
  if (ids.empty()) return Failure("you belong to no project; ask an admin to add you to one");
  return UsageError("--project is required: you belong to " + std::to_string(ids.size()) +
                    " projects (" + JoinList(ids, ", ") + ")");
}

int ResolveUser(Session& session, const std::string& flag, std::string* user) {
  if (!flag.empty()) {
    if (Status ok = CheckIdentifier("--user", flag); !ok) return UsageError(ok.error().message);
    *user = flag;
    return kExitOk;
  }
  Result<proto::WhoAmI> me = session.client().Accounts().WhoAmI();
  if (!me) return ApiFailure(me.error());
  *user = me->user;
  return kExitOk;
}

}  // namespace gpupool::cli
