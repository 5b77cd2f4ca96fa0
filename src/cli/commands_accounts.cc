// Account commands, mostly for admins: project create|ls|set-quota, user create|ls|set,
// key create|ls|revoke (the secret is printed once), price ls|set, credit add.
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string LimitCell(int64_t v, bool milli) {
  if (v < 0) return "unlimited";
  return milli ? FormatMilli(v) : std::to_string(v);
}

std::string JoinStrings(const Json& array, std::string_view separator) {
  std::string out;
  for (const Json& v : array) {
    if (v.is_string()) out += (out.empty() ? "" : std::string(separator)) + v.get<std::string>();
  }
  return out;
}

// --- projects ---

struct ProjectState {
  std::string id;
  std::optional<std::string> name;
  std::optional<std::string> max_gpus;
  std::optional<std::string> max_tasks;
  std::optional<std::string> stop_grace;
  CommonFlags common;
};

// The quota fields of a project body from the flags; false (and a printed usage error in *code)
// when one is malformed.
bool ReadQuotaFlags(const ProjectState& f, Json* body, int* code) {
  const auto unlimited = [](const std::string& v) { return v == "unlimited" || v == "-1"; };
  if (f.max_gpus) {
    if (unlimited(*f.max_gpus)) {
      (*body)["max_gpu_milli"] = -1;
    } else {
      Result<int64_t> milli = ParseMilli(*f.max_gpus);
      if (!milli) {
        *code = UsageError("--max-gpus: " + milli.error().message + " (or unlimited)");
        return false;
      }
      (*body)["max_gpu_milli"] = *milli;
    }
  }
  if (f.max_tasks) {
    if (unlimited(*f.max_tasks)) {
      (*body)["max_tasks"] = -1;
    } else {
      Result<int64_t> n = ParseInteger("--max-tasks (or unlimited)", *f.max_tasks, 0, kMax);
      if (!n) {
        *code = UsageError(n.error().message);
        return false;
      }
      (*body)["max_tasks"] = *n;
    }
  }
  if (f.stop_grace) {
    Result<int64_t> ms = ParseDurationMs(*f.stop_grace);
    if (!ms) {
      *code = UsageError("--stop-grace: " + ms.error().message);
      return false;
    }
    (*body)["stop_grace_ms"] = *ms;
  }
  if (f.name) {
    if (f.name->empty()) {
      *code = UsageError("--name must not be empty");
      return false;
    }
    (*body)["name"] = *f.name;
  }
  return true;
}

void AddQuotaFlags(CLI::App* cmd, ProjectState* f) {
  AddOptional(cmd, "--name", &f->name, "NAME", "Display name");
  AddOptional(cmd, "--max-gpus", &f->max_gpus, "GPUS",
              "GPUs the project may hold at once (2, 0.5, or unlimited)");
  AddOptional(cmd, "--max-tasks", &f->max_tasks, "N",
              "Unfinished tasks the project may have (or unlimited)");
  AddOptional(cmd, "--stop-grace", &f->stop_grace, "DURATION",
              "How long tasks keep running once the balance is spent (1m)");
}

void PrintProject(const Json& p) {
  std::cout << "project " << Str(p, "id") << " (" << Str(p, "name") << "): max GPUs "
            << LimitCell(Int(p, "max_gpu_milli"), true) << ", max tasks "
            << LimitCell(Int(p, "max_tasks"), false) << ", stop grace "
            << FormatDurationMs(Int(p, "stop_grace_ms")) << "\n";
}

void AddProjectCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("project", "Projects: create, ls, set-quota");
  group->alias("projects");
  group->require_subcommand(1);

  auto create = std::make_shared<ProjectState>();
  CLI::App* c = group->add_subcommand("create", "Create a project (admin)");
  c->add_option("id", create->id, "Project id")->required()->type_name("ID");
  AddQuotaFlags(c, create.get());
  AddCommonFlags(c, &create->common);
  OnRun(c, exit_code, [f = create] {
    if (Status ok = CheckIdentifier("project id", f->id); !ok) {
      return UsageError(ok.error().message);
    }
    Json body = {{"id", f->id}, {"name", f->id}};
    int code = kExitOk;
    if (!ReadQuotaFlags(*f, &body, &code)) return code;
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "POST", "/v1/projects", &body, f->common.json, [](const Json& p) {
        std::cout << "created ";
        PrintProject(p);
      });
    });
  });

  auto ls = std::make_shared<CommonFlags>();
  CLI::App* l = group->add_subcommand("ls", "Projects you can see");
  AddCommonFlags(l, ls.get());
  OnRun(l, exit_code, [f = ls] {
    return WithSession(*f, [&](Session& s) {
      return CallAndPrint(s, "GET", "/v1/projects", nullptr, f->json, [](const Json& answer) {
        Table table({"ID", "NAME", "MAX GPUS", "MAX TASKS", "STOP GRACE", "CREATED"});
        for (const Json& p : Array(answer, "projects")) {
          table.AddRow({Str(p, "id"), Str(p, "name"), LimitCell(Int(p, "max_gpu_milli"), true),
                        LimitCell(Int(p, "max_tasks"), false),
                        FormatDurationMs(Int(p, "stop_grace_ms")),
                        FormatTime(Int(p, "created_ms"))});
        }
        std::cout << table.Render();
      });
    });
  });

  auto set = std::make_shared<ProjectState>();
  CLI::App* q = group->add_subcommand("set-quota", "Change a project's quotas or name (admin)");
  q->add_option("id", set->id, "Project id")->required()->type_name("ID");
  AddQuotaFlags(q, set.get());
  AddCommonFlags(q, &set->common);
  OnRun(q, exit_code, [f = set] {
    if (Status ok = CheckIdentifier("project id", f->id); !ok) {
      return UsageError(ok.error().message);
    }
    Json body = Json::object();
    int code = kExitOk;
    if (!ReadQuotaFlags(*f, &body, &code)) return code;
    if (body.empty()) {
      return UsageError(
          "set-quota needs at least one of --max-gpus, --max-tasks, --stop-grace, "
          "--name");
    }
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "PATCH", "/v1/projects/" + PathPart(f->id), &body, f->common.json,
                          PrintProject);
    });
  });
}

// --- users ---

struct UserState {
  std::string id;
  std::optional<std::string> name;
  std::optional<std::string> role;
  std::optional<std::string> projects;
  CommonFlags common;
};

bool ReadUserFlags(const UserState& f, Json* body, int* code) {
  if (f.role) {
    if (*f.role != "admin" && *f.role != "member") {
      *code = UsageError("--role must be admin or member, got '" + *f.role + "'");
      return false;
    }
    (*body)["role"] = *f.role;
  }
  if (f.projects) {
    std::vector<std::string> ids;
    if (!f.projects->empty()) ids = SplitList(*f.projects);
    for (const std::string& id : ids) {
      if (Status ok = CheckIdentifier("--projects: a project id", id); !ok) {
        *code = UsageError(ok.error().message);
        return false;
      }
    }
    (*body)["projects"] = ids;
  }
  return true;
}

void PrintUser(const Json& u) {
  std::cout << "user " << Str(u, "id") << " (" << Str(u, "name") << "): " << Str(u, "role")
            << ", projects " << JoinStrings(Array(u, "projects"), ",") << "\n";
}

void AddUserCommandsGroup(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("user", "Users: create, ls, set (admin)");
  group->alias("users");
  group->require_subcommand(1);

  auto create = std::make_shared<UserState>();
  CLI::App* c = group->add_subcommand("create", "Create a user (then: gpupool key create --user)");
  c->add_option("id", create->id, "User id")->required()->type_name("ID");
  AddOptional(c, "--name", &create->name, "NAME", "Display name (default: the id)");
  AddOptional(c, "--role", &create->role, "ROLE", "admin or member (default member)");
  AddOptional(c, "--projects", &create->projects, "P[,P...]", "Projects the user belongs to");
  AddCommonFlags(c, &create->common);
  OnRun(c, exit_code, [f = create] {
    if (Status ok = CheckIdentifier("user id", f->id); !ok) return UsageError(ok.error().message);
    if (f->name && f->name->empty()) return UsageError("--name must not be empty");
    Json body = {{"id", f->id}, {"name", f->name.value_or(f->id)}};
    int code = kExitOk;
    if (!ReadUserFlags(*f, &body, &code)) return code;
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "POST", "/v1/users", &body, f->common.json, [](const Json& u) {
        std::cout << "created ";
        PrintUser(u);
      });
    });
  });

  auto ls = std::make_shared<CommonFlags>();
  CLI::App* l = group->add_subcommand("ls", "All users");
  AddCommonFlags(l, ls.get());
  OnRun(l, exit_code, [f = ls] {
    return WithSession(*f, [&](Session& s) {
      return CallAndPrint(s, "GET", "/v1/users", nullptr, f->json, [](const Json& answer) {
        Table table({"ID", "NAME", "ROLE", "PROJECTS", "CREATED"});
        for (const Json& u : Array(answer, "users")) {
          table.AddRow({Str(u, "id"), Str(u, "name"), Str(u, "role"),
                        JoinStrings(Array(u, "projects"), ","), FormatTime(Int(u, "created_ms"))});
        }
        std::cout << table.Render();
      });
    });
  });

  auto set = std::make_shared<UserState>();
  CLI::App* u = group->add_subcommand("set", "Change a user's role or projects");
  u->add_option("id", set->id, "User id")->required()->type_name("ID");
  AddOptional(u, "--role", &set->role, "ROLE", "admin or member");
  AddOptional(u, "--projects", &set->projects, "P[,P...]",
              "The user's projects (replaces the list; '' for none)");
  AddCommonFlags(u, &set->common);
  OnRun(u, exit_code, [f = set] {
    if (Status ok = CheckIdentifier("user id", f->id); !ok) return UsageError(ok.error().message);
    Json body = Json::object();
    int code = kExitOk;
    if (!ReadUserFlags(*f, &body, &code)) return code;
    if (body.empty()) return UsageError("user set needs --role or --projects");
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "PATCH", "/v1/users/" + PathPart(f->id), &body, f->common.json,
                          PrintUser);
    });
  });
}

// --- access keys ---

struct KeyState {
  std::string user;
  std::string description;
  std::string access_key;
  CommonFlags common;
};

// The user named by --user, or the one the session's own access key belongs to.
int ResolveUser(Session& s, const std::string& flag, std::string* user) {
  if (!flag.empty()) {
    if (Status ok = CheckIdentifier("--user", flag); !ok) return UsageError(ok.error().message);
    *user = flag;
    return kExitOk;
  }
  Result<Json> me = s.Call("GET", "/v1/whoami");
  if (!me) return ApiFailure(me.error());
  *user = Str(*me, "user");
  return kExitOk;
}

void AddKeyCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("key", "Access keys: create, ls, revoke");
  group->alias("keys");
  group->require_subcommand(1);

  auto create = std::make_shared<KeyState>();
  CLI::App* c = group->add_subcommand(
      "create", "Create an access key; the secret key is printed once, only now");
  c->add_option("--user", create->user, "Whose key (default: yours)")->type_name("USER");
  c->add_option("--description", create->description, "What the key is for")->type_name("TEXT");
  AddCommonFlags(c, &create->common);
  OnRun(c, exit_code, [f = create] {
    return WithSession(f->common, [&](Session& s) {
      std::string user;
      if (int code = ResolveUser(s, f->user, &user); code != kExitOk) return code;
      Json body = Json::object();
      if (!f->description.empty()) body["description"] = f->description;
      return CallAndPrint(s, "POST", "/v1/users/" + PathPart(user) + "/keys", &body, f->common.json,
                          [](const Json& k) {
                            std::cout << "user:       " << Str(k, "user") << "\n"
                                      << "access key: " << Str(k, "access_key") << "\n"
                                      << "secret key: " << Str(k, "secret_key") << "\n";
                            std::cerr << "Save the secret key now: it is not shown again "
                                         "(gpupool login stores it in a profile).\n";
                          });
    });
  });

  auto ls = std::make_shared<KeyState>();
  CLI::App* l = group->add_subcommand("ls", "A user's access keys (never their secrets)");
  l->add_option("--user", ls->user, "Whose keys (default: yours)")->type_name("USER");
  AddCommonFlags(l, &ls->common);
  OnRun(l, exit_code, [f = ls] {
    return WithSession(f->common, [&](Session& s) {
      std::string user;
      if (int code = ResolveUser(s, f->user, &user); code != kExitOk) return code;
      return CallAndPrint(
          s, "GET", "/v1/users/" + PathPart(user) + "/keys", nullptr, f->common.json,
          [](const Json& answer) {
            Table table({"ACCESS KEY", "USER", "STATUS", "CREATED", "DESCRIPTION"});
            for (const Json& k : Array(answer, "keys")) {
              const int64_t revoked = Int(k, "revoked_ms");
              table.AddRow({Str(k, "access_key"), Str(k, "user"),
                            revoked == 0 ? "active" : "revoked " + FormatTime(revoked),
                            FormatTime(Int(k, "created_ms")), Str(k, "description")});
            }
            std::cout << table.Render();
          });
    });
  });

  auto revoke = std::make_shared<KeyState>();
  CLI::App* r = group->add_subcommand("revoke", "Revoke an access key");
  r->add_option("access_key", revoke->access_key, "The access key (AK...)")
      ->required()
      ->type_name("ACCESS_KEY");
  AddCommonFlags(r, &revoke->common);
  OnRun(r, exit_code, [f = revoke] {
    if (Status ok = CheckIdentifier("access key", f->access_key); !ok) {
      return UsageError(ok.error().message);
    }
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "DELETE", "/v1/keys/" + PathPart(f->access_key), nullptr,
                          f->common.json, [](const Json& k) {
                            std::cout << "revoked " << Str(k, "access_key") << " of "
                                      << Str(k, "user") << "\n";
                          });
    });
  });
}

// --- prices ---

struct PriceState {
  std::string resource;
  std::string micros_per_hour;
  std::string effective;
  CommonFlags common;
};

void PrintPrice(const Json& p) {
  std::cout << Str(p, "resource") << ": " << FormatMoney(Int(p, "micros_per_hour"))
            << " per hour from " << FormatTime(Int(p, "effective_ms")) << "\n";
}

void AddPriceCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("price", "Prices per resource-hour: ls, set");
  group->alias("prices");
  group->require_subcommand(1);

  auto ls = std::make_shared<CommonFlags>();
  CLI::App* l = group->add_subcommand("ls", "Prices, every version with when it takes effect");
  AddCommonFlags(l, ls.get());
  OnRun(l, exit_code, [f = ls] {
    return WithSession(*f, [&](Session& s) {
      return CallAndPrint(s, "GET", "/v1/prices", nullptr, f->json, [](const Json& answer) {
        Table table({"RESOURCE", "PER HOUR", "EFFECTIVE"});
        table.AlignRight(1);
        for (const Json& p : Array(answer, "prices")) {
          table.AddRow({Str(p, "resource"), FormatMoney(Int(p, "micros_per_hour")),
                        FormatTime(Int(p, "effective_ms"))});
        }
        std::cout << table.Render();
      });
    });
  });

  auto set = std::make_shared<PriceState>();
  CLI::App* c = group->add_subcommand(
      "set",
      "Set a price: per GPU (gpu:A100-80GB, gpu:* for other models), cpu per core, memory "
      "per GiB (admin)");
  c->add_option("resource", set->resource, "cpu, memory, gpu:MODEL or gpu:*")
      ->required()
      ->type_name("RESOURCE");
  c->add_option("micros_per_hour", set->micros_per_hour,
                "Price per unit and hour in micros (2500000 = 2.5)")
      ->required()
      ->type_name("MICROS_PER_HOUR");
  c->add_option("--effective", set->effective,
                "When the price takes effect (default now; 2024-06-01, +1d, ms)")
      ->type_name("TIME");
  AddCommonFlags(c, &set->common);
  OnRun(c, exit_code, [f = set] {
    const std::string& r = f->resource;
    if (r != "cpu" && r != "memory" && !(r.rfind("gpu:", 0) == 0 && r.size() > 4)) {
      return UsageError("resource must be cpu, memory, gpu:MODEL or gpu:*, got '" + r + "'");
    }
    Result<int64_t> micros = ParseInteger("MICROS_PER_HOUR", f->micros_per_hour, 0, kMax);
    if (!micros) return UsageError(micros.error().message);
    Json body = {{"resource", r}, {"micros_per_hour", *micros}};
    if (!f->effective.empty()) {
      Result<int64_t> at = ParseTime(f->effective, NowMs());
      if (!at) return UsageError("--effective: " + at.error().message);
      body["effective_ms"] = *at;
    }
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "PUT", "/v1/prices", &body, f->common.json, PrintPrice);
    });
  });
}

// --- credits ---

struct CreditState {
  std::string project;
  std::string amount;
  std::string note;
  CommonFlags common;
};

void AddCreditCommands(CLI::App& app, int& exit_code) {
  CLI::App* group = app.add_subcommand("credit", "Credits: add");
  group->alias("credits");
  group->require_subcommand(1);
  auto f = std::make_shared<CreditState>();
  CLI::App* c = group->add_subcommand("add", "Add credit to a project's balance (admin)");
  c->add_option("project", f->project, "Project id")->required()->type_name("PROJECT");
  c->add_option("amount", f->amount, "Amount in currency units, up to 6 decimals (100, 12.5)")
      ->required()
      ->type_name("AMOUNT");
  c->add_option("--note", f->note, "Why (shown in the ledger)")->type_name("TEXT");
  AddCommonFlags(c, &f->common);
  OnRun(c, exit_code, [f] {
    if (Status ok = CheckIdentifier("project id", f->project); !ok) {
      return UsageError(ok.error().message);
    }
    Result<int64_t> micros = ParseMoney(f->amount);
    if (!micros) return UsageError(micros.error().message);
    if (*micros <= 0) return UsageError("amount must be more than 0, got '" + f->amount + "'");
    Json body = {{"amount_micros", *micros}};
    if (!f->note.empty()) body["note"] = f->note;
    return WithSession(f->common, [&](Session& s) {
      return CallAndPrint(s, "POST", "/v1/projects/" + PathPart(f->project) + "/credits", &body,
                          f->common.json, [&](const Json& e) {
                            std::cout << "credited " << FormatMoney(Int(e, "amount_micros"))
                                      << " to " << f->project << "\n";
                          });
    });
  });
}

}  // namespace

void AddAccountCommands(CLI::App& app, int& exit_code) {
  AddProjectCommands(app, exit_code);
  AddUserCommandsGroup(app, exit_code);
  AddKeyCommands(app, exit_code);
  AddPriceCommands(app, exit_code);
  AddCreditCommands(app, exit_code);
}

}  // namespace gpupool::cli
