// Billing commands: `usage` (balance and the period's cost per task), and `bill balance|ledger|
// statement|cost`. Money is shown as units with six decimals (the API's micros).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"

namespace gpupool::cli {
namespace {

struct PeriodState {
  std::string project;
  std::string from;
  std::string to;
  std::string limit;
  bool all = false;
  CommonFlags common;
};

void AddProjectFlag(CLI::App* cmd, PeriodState* f) {
  cmd->add_option("--project", f->project, "Project (default: your only project)")
      ->type_name("PROJECT");
}

void AddPeriodFlags(CLI::App* cmd, PeriodState* f) {
  cmd->add_option("--from", f->from,
                  "Start of the period (default: the beginning; 2024-05-01, -7d, ms)")
      ->type_name("TIME");
  cmd->add_option("--to", f->to, "End of the period (default: now)")->type_name("TIME");
}

// The query for --from/--to; a printed usage error (returned) when malformed.
int PeriodQuery(const PeriodState& f, Query* q) {
  const int64_t now = NowMs();
  int64_t from = 0;
  int64_t to = now;
  if (!f.from.empty()) {
    Result<int64_t> t = ParseTime(f.from, now);
    if (!t) return UsageError("--from: " + t.error().message);
    from = *t;
    q->Add("from_ms", std::to_string(from));
  }
  if (!f.to.empty()) {
    Result<int64_t> t = ParseTime(f.to, now);
    if (!t) return UsageError("--to: " + t.error().message);
    to = *t;
    q->Add("to_ms", std::to_string(to));
  }
  if (from > to) {
    return UsageError("--from (" + FormatTime(from) + ") is after --to (" + FormatTime(to) + ")");
  }
  return kExitOk;
}

int CheckProjectFlag(const PeriodState& f) {
  if (f.project.empty()) return kExitOk;
  if (Status ok = CheckIdentifier("--project", f.project); !ok) {
    return UsageError(ok.error().message);
  }
  return kExitOk;
}

std::string BalanceLine(const Json& b) {
  return FormatMoney(Int(b, "balance_micros")) + " (credits " +
         FormatMoney(Int(b, "credits_micros")) + ", usage " + FormatMoney(Int(b, "usage_micros")) +
         ")";
}

std::string PeriodText(const Json& s) {
  const int64_t from = Int(s, "from_ms");
  return (from == 0 ? std::string("the beginning") : FormatTime(from)) + " to " +
         FormatTime(Int(s, "to_ms"));
}

void PrintStatement(const Json& s, const Json* balance) {
  Details d;
  d.Add("Project", Str(s, "project"));
  if (balance != nullptr) d.Add("Balance", BalanceLine(*balance));
  d.Add("Period", PeriodText(s));
  d.Add("Credits", FormatMoney(Int(s, "credits_micros")));
  d.Add("Usage", FormatMoney(Int(s, "usage_micros")));
  std::cout << d.Render();
  const Json& by_task = Array(s, "by_task");
  if (by_task.empty()) return;
  Table table({"TASK", "COST"});
  table.AlignRight(1);
  for (const Json& t : by_task) table.AddRow({Str(t, "task"), FormatMoney(Int(t, "usage_micros"))});
  std::cout << "\n" << table.Render();
}

// `usage`: the balance and the statement in one view.
int RunUsage(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  Query q;
  if (int code = PeriodQuery(f, &q); code != kExitOk) return code;
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    const std::string base = "/v1/projects/" + PathPart(project);
    Result<Json> balance = s.Call("GET", base + "/balance");
    if (!balance) return ApiFailure(balance.error());
    Result<Json> statement = s.Call("GET", base + "/statement" + q.String());
    if (!statement) return ApiFailure(statement.error());
    if (f.common.json) {
      PrintJson({{"balance", *balance}, {"statement", *statement}});
    } else {
      PrintStatement(*statement, &*balance);
    }
    return kExitOk;
  });
}

int RunBalance(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    return CallAndPrint(
        s, "GET", "/v1/projects/" + PathPart(project) + "/balance", nullptr, f.common.json,
        [](const Json& b) { std::cout << Str(b, "project") << ": " << BalanceLine(b) << "\n"; });
  });
}

int RunStatement(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  Query q;
  if (int code = PeriodQuery(f, &q); code != kExitOk) return code;
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    return CallAndPrint(s, "GET", "/v1/projects/" + PathPart(project) + "/statement" + q.String(),
                        nullptr, f.common.json,
                        [](const Json& st) { PrintStatement(st, nullptr); });
  });
}

int RunLedger(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  Query period;
  if (int code = PeriodQuery(f, &period); code != kExitOk) return code;
  int64_t limit = f.all ? 1000 : 100;
  if (!f.limit.empty()) {
    Result<int64_t> n = ParseInteger("--limit", f.limit, 1, 1000);
    if (!n) return UsageError(n.error().message);
    limit = *n;
  }
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    Json entries = Json::array();
    Json last_page;
    int64_t offset = 0;
    bool more = false;
    do {
      Query q = period;
      q.Add("limit", std::to_string(limit));
      if (offset > 0) q.Add("offset", std::to_string(offset));
      Result<Json> page =
          s.Call("GET", "/v1/projects/" + PathPart(project) + "/ledger" + q.String());
      if (!page) return ApiFailure(page.error());
      for (const Json& e : Array(*page, "entries")) entries.push_back(e);
      more = page->contains("next_offset") && (*page)["next_offset"].is_number_integer();
      if (more) offset = (*page)["next_offset"].get<int64_t>();
      last_page = std::move(*page);
    } while (f.all && more);
    if (f.common.json) {
      PrintJson(f.all ? Json{{"entries", std::move(entries)}, {"next_offset", nullptr}}
                      : last_page);
      return kExitOk;
    }
    Table table({"TIME", "KIND", "AMOUNT", "TASK", "PERIOD", "DETAIL"});
    table.AlignRight(2);
    for (const Json& e : entries) {
      const bool credit = Str(e, "kind") == "credit";
      const int64_t amount = Int(e, "amount_micros");
      std::string period_cell = "-";
      if (Int(e, "to_ms") > Int(e, "from_ms")) {
        period_cell = FormatTime(Int(e, "from_ms")) + " +" +
                      FormatDurationMs(Int(e, "to_ms") - Int(e, "from_ms"));
      }
      table.AddRow({FormatTime(Int(e, "created_ms")), Str(e, "kind"),
                    (credit ? "+" : "-") + FormatMoney(amount),
                    Str(e, "task").empty() ? "-" : Str(e, "task"), period_cell, Str(e, "detail")});
    }
    if (table.rows() == 0) {
      std::cerr << "no ledger entries in the period\n";
    } else {
      std::cout << table.Render();
    }
    if (!f.all && more) std::cerr << "(first " << entries.size() << " entries; --all for all)\n";
    return kExitOk;
  });
}

struct CostState {
  std::string task;
  CommonFlags common;
};

int RunCost(const CostState& f) {
  if (Status ok = CheckIdentifier("task id", f.task); !ok) return UsageError(ok.error().message);
  return WithSession(f.common, [&](Session& s) {
    return CallAndPrint(s, "GET", "/v1/tasks/" + PathPart(f.task) + "/cost", nullptr, f.common.json,
                        [](const Json& c) {
                          std::cout << Str(c, "task") << ": " << FormatMoney(Int(c, "cost_micros"))
                                    << " billed until " << FormatTime(Int(c, "billed_until_ms"))
                                    << "\n";
                          const Json& entries = Array(c, "entries");
                          if (entries.empty()) return;
                          Table table({"FROM", "DURATION", "AMOUNT", "DETAIL"});
                          table.AlignRight(2);
                          for (const Json& e : entries) {
                            table.AddRow({FormatTime(Int(e, "from_ms")),
                                          FormatDurationMs(Int(e, "to_ms") - Int(e, "from_ms")),
                                          FormatMoney(Int(e, "amount_micros")), Str(e, "detail")});
                          }
                          std::cout << "\n" << table.Render();
                        });
  });
}

}  // namespace

void AddBillingCommands(CLI::App& app, int& exit_code) {
  auto usage = std::make_shared<PeriodState>();
  CLI::App* u = app.add_subcommand("usage", "A project's balance and its cost per task");
  AddProjectFlag(u, usage.get());
  AddPeriodFlags(u, usage.get());
  AddCommonFlags(u, &usage->common);
  OnRun(u, exit_code, [f = usage] { return RunUsage(*f); });

  CLI::App* bill = app.add_subcommand("bill", "Billing: balance, ledger, statement, cost");
  bill->require_subcommand(1);

  auto balance = std::make_shared<PeriodState>();
  CLI::App* b = bill->add_subcommand("balance", "Credits minus usage so far");
  AddProjectFlag(b, balance.get());
  AddCommonFlags(b, &balance->common);
  OnRun(b, exit_code, [f = balance] { return RunBalance(*f); });

  auto ledger = std::make_shared<PeriodState>();
  CLI::App* l = bill->add_subcommand("ledger", "Credits and usage charges, oldest first");
  AddProjectFlag(l, ledger.get());
  AddPeriodFlags(l, ledger.get());
  CLI::Option* limit =
      l->add_option("--limit", ledger->limit, "At most N entries (1..1000; default 100)")
          ->type_name("N");
  l->add_flag("--all", ledger->all, "Every entry, following the server's pages")->excludes(limit);
  AddCommonFlags(l, &ledger->common);
  OnRun(l, exit_code, [f = ledger] { return RunLedger(*f); });

  auto statement = std::make_shared<PeriodState>();
  CLI::App* s = bill->add_subcommand("statement", "Credits and usage in a period, per task");
  AddProjectFlag(s, statement.get());
  AddPeriodFlags(s, statement.get());
  AddCommonFlags(s, &statement->common);
  OnRun(s, exit_code, [f = statement] { return RunStatement(*f); });

  auto cost = std::make_shared<CostState>();
  CLI::App* c = bill->add_subcommand("cost", "What a task has cost so far");
  c->add_option("task", cost->task, "Task id")->required()->type_name("ID");
  AddCommonFlags(c, &cost->common);
  OnRun(c, exit_code, [f = cost] { return RunCost(*f); });
}

}  // namespace gpupool::cli
