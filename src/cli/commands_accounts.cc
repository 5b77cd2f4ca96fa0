// Account commands, mostly for admins: project create|ls|set-quota, user create|ls|set,
// key create|ls|revoke (the secret is printed once), price ls|set, credit add, audit (the log of
// administrative changes).
#include <iostream>
#include <limits>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "cli/output.h"

namespace gpupool::cli {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string LimitCell(int64_t v, bool milli) {
  if (v < 0) return "unlimited";
  return milli ? FormatMilli(v) : std::to_string(v);
}

std::string StorageCell(int64_t bytes) { return bytes < 0 ? "unlimited" : FormatBytes(bytes); }

// --- projects ---

struct ProjectState {
  std::string id;
  std::optional<std::string> name;
  std::optional<std::string> max_gpus;
  std::optional<std::string> max_tasks;
  std::optional<std::string> stop_grace;
  std::optional<std::string> max_storage;
  CommonFlags common;
};

// The quota fields (and name) of a project from the flags, as a patch; false (and a printed usage
// error in *code) when one is malformed.
bool ReadQuotaFlags(const ProjectState& f, proto::ProjectPatch* body, int* code) {
  const auto unlimited = [](const std::string& v) { return v == "unlimited" || v == "-1"; };
  if (f.max_gpus) {
    if (unlimited(*f.max_gpus)) {
      body->max_gpu_milli = -1;
    } else {
      Result<int64_t> milli = ParseMilli(*f.max_gpus);
      if (!milli) {
        *code = UsageError("--max-gpus: " + milli.error().message + " (or unlimited)");
        return false;
      }
      body->max_gpu_milli = *milli;
    }
  }
  if (f.max_tasks) {
    if (unlimited(*f.max_tasks)) {
      body->max_tasks = -1;
    } else {
      Result<int64_t> n = ParseInteger("--max-tasks (or unlimited)", *f.max_tasks, 0, kMax);
      if (!n) {
        *code = UsageError(n.error().message);
        return false;
      }
      body->max_tasks = *n;
    }
  }
  if (f.max_storage) {
    if (unlimited(*f.max_storage)) {
      body->max_storage_bytes = -1;
    } else {
      Result<int64_t> mib = ParseMib(*f.max_storage);
      if (!mib || *mib > kMax / (1 << 20)) {
        *code = UsageError("--max-storage: " +
                           (mib ? "too large" : mib.error().message) + " (or unlimited)");
        return false;
      }
      body->max_storage_bytes = *mib << 20;
    }
  }
  if (f.stop_grace) {
    Result<int64_t> ms = ParseDurationMs(*f.stop_grace);
    if (!ms) {
      *code = UsageError("--stop-grace: " + ms.error().message);
      return false;
    }
    body->stop_grace_ms = *ms;
  }
  if (f.name) {
    if (f.name->empty()) {
      *code = UsageError("--name must not be empty");
      return false;
    }
    body->name = *f.name;
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
  AddOptional(cmd, "--max-storage", &f->max_storage, "SIZE",
              "Task files (inputs, outputs, unfinished uploads) the project may keep on the "
              "server (50G, 500M, or unlimited)");
}

void PrintProject(const proto::ProjectView& p) {
  std::cout << "project " << p.id << " (" << p.name << "): max GPUs "
            << LimitCell(p.max_gpu_milli, true) << ", max tasks " << LimitCell(p.max_tasks, false)
            << ", stop grace " << FormatDurationMs(p.stop_grace_ms) << ", max storage "
            << StorageCell(p.max_storage_bytes) << "\n";
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
    proto::ProjectPatch flags;
    int code = kExitOk;
    if (!ReadQuotaFlags(*f, &flags, &code)) return code;
    proto::ProjectCreate body{.id = f->id, .name = flags.name.value_or(f->id)};
    if (flags.max_gpu_milli) body.max_gpu_milli = *flags.max_gpu_milli;
    if (flags.max_tasks) body.max_tasks = *flags.max_tasks;
    if (flags.stop_grace_ms) body.stop_grace_ms = *flags.stop_grace_ms;
    if (flags.max_storage_bytes) body.max_storage_bytes = *flags.max_storage_bytes;
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Accounts().CreateProject(body), f->common.json,
                         [](const proto::ProjectView& p) {
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
      return PrintAnswer(
          s.client().Accounts().ListProjects(), f->json, [](const proto::ProjectList& answer) {
            Table table({"ID", "NAME", "MAX GPUS", "MAX TASKS", "STOP GRACE", "MAX STORAGE",
                         "CREATED"});
            for (const proto::ProjectView& p : answer.projects) {
              table.AddRow({p.id, p.name, LimitCell(p.max_gpu_milli, true),
                            LimitCell(p.max_tasks, false), FormatDurationMs(p.stop_grace_ms),
                            StorageCell(p.max_storage_bytes),
                            FormatTime(p.created_ms)});
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
    proto::ProjectPatch body;
    int code = kExitOk;
    if (!ReadQuotaFlags(*f, &body, &code)) return code;
    if (!body.name && !body.max_gpu_milli && !body.max_tasks && !body.stop_grace_ms &&
        !body.max_storage_bytes) {
      return UsageError(
          "set-quota needs at least one of --max-gpus, --max-tasks, --stop-grace, "
          "--max-storage, --name");
    }
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Accounts().PatchProject(f->id, body), f->common.json,
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

// The role and projects of a user from the flags, as a patch; false (and a printed usage error in
// *code) when one is malformed.
bool ReadUserFlags(const UserState& f, proto::UserPatch* body, int* code) {
  if (f.role) {
    if (*f.role != "admin" && *f.role != "member") {
      *code = UsageError("--role must be admin or member, got '" + *f.role + "'");
      return false;
    }
    body->role = *f.role;
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
    body->projects = std::move(ids);
  }
  return true;
}

void PrintUser(const proto::UserView& u) {
  std::cout << "user " << u.id << " (" << u.name << "): " << u.role << ", projects "
            << JoinList(u.projects) << "\n";
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
    proto::UserPatch flags;
    int code = kExitOk;
    if (!ReadUserFlags(*f, &flags, &code)) return code;
    proto::UserCreate body;
    body.id = f->id;
    body.name = f->name.value_or(f->id);
    if (flags.role) body.role = *flags.role;
    if (flags.projects) body.projects = *flags.projects;
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Accounts().CreateUser(body), f->common.json,
                         [](const proto::UserView& u) {
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
      return PrintAnswer(
          s.client().Accounts().ListUsers(), f->json, [](const proto::UserList& answer) {
            Table table({"ID", "NAME", "ROLE", "PROJECTS", "CREATED"});
            for (const proto::UserView& u : answer.users) {
              table.AddRow({u.id, u.name, u.role, JoinList(u.projects), FormatTime(u.created_ms)});
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
    proto::UserPatch body;
    int code = kExitOk;
    if (!ReadUserFlags(*f, &body, &code)) return code;
    if (!body.role && !body.projects) return UsageError("user set needs --role or --projects");
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Accounts().PatchUser(f->id, body), f->common.json, PrintUser);
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
      return PrintAnswer(s.client().Accounts().CreateKey(user, {.description = f->description}),
                         f->common.json, [](const proto::NewAccessKey& k) {
                           std::cout << "user:       " << k.user << "\n"
                                     << "access key: " << k.access_key << "\n"
                                     << "secret key: " << k.secret_key << "\n";
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
      return PrintAnswer(
          s.client().Accounts().ListKeys(user), f->common.json,
          [](const proto::AccessKeyList& answer) {
            Table table({"ACCESS KEY", "USER", "STATUS", "CREATED", "DESCRIPTION"});
            for (const proto::AccessKeyView& k : answer.keys) {
              table.AddRow({k.access_key, k.user,
                            k.revoked_ms == 0 ? "active" : "revoked " + FormatTime(k.revoked_ms),
                            FormatTime(k.created_ms), k.description});
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
      return PrintAnswer(s.client().Accounts().RevokeKey(f->access_key), f->common.json,
                         [](const proto::AccessKeyView& k) {
                           std::cout << "revoked " << k.access_key << " of " << k.user << "\n";
                         });
    });
  });
}

// --- prices ---

struct PriceState {
  std::string resource;
  std::string price;  // currency units per hour: "2.5/h"
  std::string effective;
  CommonFlags common;
};

void PrintPrice(const proto::PriceView& p) {
  std::cout << p.resource << ": " << FormatMoney(p.micros_per_hour) << "/h from "
            << FormatTime(p.effective_ms) << "\n";
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
      return PrintAnswer(
          s.client().Billing().Prices(), f->json, [](const proto::PriceList& answer) {
            Table table({"RESOURCE", "PRICE", "EFFECTIVE"});
            table.AlignRight(1);
            for (const proto::PriceView& p : answer.prices) {
              table.AddRow(
                  {p.resource, FormatMoney(p.micros_per_hour) + "/h", FormatTime(p.effective_ms)});
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
  c->add_option("price", set->price,
                "Price per unit and hour in currency units, up to 6 decimals, as credit add "
                "takes them (2.5/h, or 2.5)")
      ->required()
      ->type_name("PRICE");
  c->add_option("--effective", set->effective,
                "When the price takes effect (default now; 2024-06-01, +1d, ms)")
      ->type_name("TIME");
  AddCommonFlags(c, &set->common);
  OnRun(c, exit_code, [f = set] {
    const std::string& r = f->resource;
    if (r != "cpu" && r != "memory" && !(r.rfind("gpu:", 0) == 0 && r.size() > 4)) {
      return UsageError("resource must be cpu, memory, gpu:MODEL or gpu:*, got '" + r + "'");
    }
    Result<int64_t> micros = ParsePricePerHour(f->price);
    if (!micros) return UsageError(micros.error().message);
    proto::PriceSet body;
    body.resource = r;
    body.micros_per_hour = *micros;
    if (!f->effective.empty()) {
      Result<int64_t> at = ParseTime(f->effective, NowMs());
      if (!at) return UsageError("--effective: " + at.error().message);
      body.effective_ms = *at;
    }
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Billing().SetPrice(body), f->common.json, PrintPrice);
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
    const proto::CreditRequest body{.amount_micros = *micros, .note = f->note};
    return WithSession(f->common, [&](Session& s) {
      return PrintAnswer(s.client().Billing().Credit(f->project, body), f->common.json,
                         [&](const proto::LedgerEntryView& e) {
                           std::cout << "credited " << FormatMoney(e.amount_micros) << " to "
                                     << f->project << "\n";
                         });
    });
  });
}

struct AuditState {
  std::string after;
  std::string limit;
  std::string actor;
  std::string target;
  bool all = false;
  CommonFlags common;
};

int RunAudit(const AuditState& f) {
  proto::AuditQuery query;
  query.limit = f.all ? 1000 : 100;
  if (!f.limit.empty()) {
    Result<int64_t> n = ParseInteger("--limit", f.limit, 1, 1000);
    if (!n) return UsageError(n.error().message);
    query.limit = *n;
  }
  if (!f.after.empty()) {
    Result<int64_t> n = ParseInteger("--after", f.after, 0, kMax);
    if (!n) return UsageError(n.error().message);
    query.after = *n;
  }
  if (!f.actor.empty()) {
    if (Status ok = CheckIdentifier("--actor", f.actor); !ok) return UsageError(ok.error().message);
    query.actor = f.actor;
  }
  query.target = f.target;
  return WithSession(f.common, [&](Session& s) {
    Result<proto::AuditPage> pages = ReadPages<proto::AuditPage, proto::AuditEntryView>(
        f.all, query.after,
        [&](int64_t after) {
          query.after = after;
          return s.client().Accounts().ListAudit(query);
        },
        &proto::AuditPage::next_after, &proto::AuditPage::entries);
    if (!pages) return ApiFailure(pages.error());
    const proto::AuditPage& listed = *pages;
    if (f.common.json) {
      PrintJson(proto::Encode(listed));
      return kExitOk;
    }
    Table table({"SEQ", "TIME", "ACTOR", "ACTION", "TARGET", "DETAIL"});
    for (const proto::AuditEntryView& e : listed.entries) {
      table.AddRow({std::to_string(e.seq), FormatTime(e.time_ms), e.actor, e.action, e.target,
                    e.detail});
    }
    std::cout << table.Render();
    if (listed.next_after) std::cerr << "more: --after " << *listed.next_after << "\n";
    return kExitOk;
  });
}

void AddAuditCommand(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<AuditState>();
  CLI::App* a = app.add_subcommand(
      "audit", "The log of administrative changes, oldest first: who, when, what (admin)");
  a->add_option("--after", f->after, "Entries after this seq (the last page's next)")
      ->type_name("SEQ");
  CLI::Option* limit =
      a->add_option("--limit", f->limit, "At most N entries (1..1000; default 100)")
          ->type_name("N");
  a->add_flag("--all", f->all, "Every entry, following the server's pages")->excludes(limit);
  a->add_option("--actor", f->actor, "Only this user's changes")->type_name("USER");
  a->add_option("--target", f->target, "Only changes of this user, key, project, node…")
      ->type_name("ID");
  AddCommonFlags(a, &f->common);
  OnRun(a, exit_code, [f] { return RunAudit(*f); });
}

}  // namespace

void AddAccountCommands(CLI::App& app, int& exit_code) {
  AddProjectCommands(app, exit_code);
  AddUserCommandsGroup(app, exit_code);
  AddKeyCommands(app, exit_code);
  AddPriceCommands(app, exit_code);
  AddCreditCommands(app, exit_code);
  AddAuditCommand(app, exit_code);
}

}  // namespace gpupool::cli
