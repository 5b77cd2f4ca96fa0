// The CLI commands' shared plumbing (see commands_common.h).
#include "cli/commands_common.h"

#include <chrono>
#include <iostream>

#include "api/url.h"

namespace gpupool::cli {

void AddCommonFlags(CLI::App* cmd, CommonFlags* flags) {
  cmd->add_option("--profile", flags->profile,
                  "Profile of the config file to use (default: $GPUPOOL_PROFILE or 'default'); "
                  "when given, GPUPOOL_* credentials in the environment are ignored")
      ->type_name("NAME");
  cmd->add_flag("--json", flags->json, "Print the server's JSON instead of a table");
}

CLI::Option* AddOptional(CLI::App* cmd, const std::string& name, std::optional<std::string>* out,
                         const std::string& type, const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          name, [out](const std::string& v) { *out = v; }, help)
      ->type_name(type);
}

int UsageError(const std::string& message) {
  std::cerr << "gpupool: " << message << "\n";
  return kExitUsage;
}

int Failure(const std::string& message) {
  std::cerr << "gpupool: " << message << "\n";
  return kExitFailure;
}

int ApiFailure(const Error& error) { return Failure(error.message); }

void OnRun(CLI::App* cmd, int& exit_code, std::function<int()> run) {
  cmd->callback([&exit_code, run = std::move(run)] {
    try {
      exit_code = run();
    } catch (const nlohmann::json::exception& e) {
      exit_code = Failure(std::string("unexpected answer from the server: ") + e.what());
    }
    std::cout.flush();
  });
}

Session::Session(Profile profile)
    : profile_(std::move(profile)),
      client_(profile_.endpoint, profile_.access_key, profile_.secret_key) {}

std::unique_ptr<Session> Session::Open(const CommonFlags& flags, int* exit_code) {
  Result<Profile> profile = ResolveProfile(SystemEnv(), flags.profile);
  if (!profile) {
    *exit_code = Failure(profile.error().message);
    return nullptr;
  }
  return std::make_unique<Session>(std::move(*profile));
}

Result<Json> Session::Call(std::string_view method, const std::string& path, const Json* body) {
  const std::string text =
      body == nullptr ? std::string() : body->dump(-1, ' ', false, Json::error_handler_t::replace);
  return client_.CallJson(method, path, text);
}

int WithSession(const CommonFlags& flags, const std::function<int(Session&)>& run) {
  int code = kExitOk;
  std::unique_ptr<Session> session = Session::Open(flags, &code);
  if (!session) return code;
  return run(*session);
}

int CallAndPrint(Session& session, std::string_view method, const std::string& path,
                 const Json* body, bool json, const std::function<void(const Json&)>& human) {
  Result<Json> answer = session.Call(method, path, body);
  if (!answer) return ApiFailure(answer.error());
  if (json) {
    PrintJson(*answer);
  } else {
    human(*answer);
  }
  return kExitOk;
}

void PrintJson(const Json& value) {
  std::cout << value.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
}

std::string Str(const Json& j, std::string_view key) {
  if (!j.is_object()) return "";
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

int64_t Int(const Json& j, std::string_view key) {
  if (!j.is_object()) return 0;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return 0;
  return it->get<int64_t>();
}

bool Bool(const Json& j, std::string_view key) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

const Json& Array(const Json& j, std::string_view key) {
  static const Json kEmpty = Json::array();
  if (!j.is_object()) return kEmpty;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return kEmpty;
  return *it;
}

Query& Query::Add(std::string_view name, std::string_view value) {
  params_.emplace_back(name, value);
  return *this;
}

std::string Query::String() const {
  std::string out;
  for (const auto& [name, value] : params_) {
    out += (out.empty() ? "?" : "&") + api::PercentEncode(name) + "=" + api::PercentEncode(value);
  }
  return out;
}

std::string PathPart(std::string_view segment) { return api::PercentEncode(segment); }

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
  Result<Json> me = session.Call("GET", "/v1/whoami");
  if (!me) return ApiFailure(me.error());
  std::vector<std::string> ids;
  for (const Json& p : Array(*me, "projects")) {
    if (p.is_string()) ids.push_back(p.get<std::string>());
  }
  if (ids.size() == 1) {
    *project = ids.front();
    return kExitOk;
  }
  if (ids.empty()) return Failure("you belong to no project; ask an admin to add you to one");
  std::string list;
  for (const std::string& id : ids) list += (list.empty() ? "" : ", ") + id;
  return UsageError("--project is required: you belong to " + std::to_string(ids.size()) +
                    " projects (" + list + ")");
}

}  // namespace gpupool::cli
