// Billing commands: `usage` (balance and the period's cost per task), and `bill balance|ledger|
// statement|cost`. Money is shown as units with six decimals (the API's micros).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/format.h"
#include "cli/output.h"

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

// The period of --from/--to into *q; a printed usage error (returned) when malformed.
int ReadPeriod(const PeriodState& f, proto::PeriodQuery* q) {
  const int64_t now = NowMs();
  int64_t from = 0;
  int64_t to = now;
  if (!f.from.empty()) {
    Result<int64_t> t = ParseTime(f.from, now);
    if (!t) return UsageError("--from: " + t.error().message);
    from = *t;
    q->from_ms = from;
  }
  if (!f.to.empty()) {
    Result<int64_t> t = ParseTime(f.to, now);
    if (!t) return UsageError("--to: " + t.error().message);
    to = *t;
    q->to_ms = to;
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

std::string BalanceLine(const proto::BalanceView& b) {
  return FormatMoney(b.balance_micros) + " (credits " + FormatMoney(b.credits_micros) + ", usage " +
         FormatMoney(b.usage_micros) + ")";
}

std::string PeriodText(const proto::StatementView& s) {
  return (s.from_ms == 0 ? std::string("the beginning") : FormatTime(s.from_ms)) + " to " +
         FormatTime(s.to_ms);
}

void PrintStatement(const proto::StatementView& s, const proto::BalanceView* balance) {
  Details d;
  d.Add("Project", s.project);
  if (balance != nullptr) d.Add("Balance", BalanceLine(*balance));
  d.Add("Period", PeriodText(s));
  d.Add("Credits", FormatMoney(s.credits_micros));
  d.Add("Usage", FormatMoney(s.usage_micros));
  std::cout << d.Render();
  if (s.by_task.empty()) return;
  Table table({"TASK", "COST"});
  table.AlignRight(1);
  for (const proto::TaskUsage& t : s.by_task) table.AddRow({t.task, FormatMoney(t.usage_micros)});
  std::cout << "\n" << table.Render();
}

// `usage`: the balance and the statement in one view.
int RunUsage(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  proto::PeriodQuery period;
  if (int code = ReadPeriod(f, &period); code != kExitOk) return code;
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    Result<proto::BalanceView> balance = s.client().Billing().Balance(project);
    if (!balance) return ApiFailure(balance.error());
    Result<proto::StatementView> statement = s.client().Billing().Statement(project, period);
    if (!statement) return ApiFailure(statement.error());
    if (f.common.json) {
      PrintJson(proto::Encode(UsageOutput{*balance, *statement}));
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
    return PrintAnswer(s.client().Billing().Balance(project), f.common.json,
                       [](const proto::BalanceView& b) {
                         std::cout << b.project << ": " << BalanceLine(b) << "\n";
                       });
  });
}

int RunStatement(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  proto::PeriodQuery period;
  if (int code = ReadPeriod(f, &period); code != kExitOk) return code;
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    return PrintAnswer(s.client().Billing().Statement(project, period), f.common.json,
                       [](const proto::StatementView& st) { PrintStatement(st, nullptr); });
  });
}

int RunLedger(const PeriodState& f) {
  if (int code = CheckProjectFlag(f); code != kExitOk) return code;
  proto::LedgerQuery query;
  if (int code = ReadPeriod(f, &query); code != kExitOk) return code;
  query.limit = f.all ? 1000 : 100;
  if (!f.limit.empty()) {
    Result<int64_t> n = ParseInteger("--limit", f.limit, 1, 1000);
    if (!n) return UsageError(n.error().message);
    query.limit = *n;
  }
  return WithSession(f.common, [&](Session& s) {
    std::string project;
    if (int code = ResolveProject(s, f.project, &project); code != kExitOk) return code;
    Result<proto::LedgerPage> pages = ReadPages<proto::LedgerPage, proto::LedgerEntryView>(
        f.all, query.offset,
        [&](int64_t offset) {
          query.offset = offset;
          return s.client().Billing().Ledger(project, query);
        },
        &proto::LedgerPage::next_offset, &proto::LedgerPage::entries);
    if (!pages) return ApiFailure(pages.error());
    const proto::LedgerPage& listed = *pages;
    const bool more = listed.next_offset.has_value();
    if (f.common.json) {
      PrintJson(proto::Encode(listed));
      return kExitOk;
    }
    Table table({"TIME", "KIND", "AMOUNT", "TASK", "PERIOD", "DETAIL"});
    table.AlignRight(2);
    for (const proto::LedgerEntryView& e : listed.entries) {
      std::string period_cell = "-";
      if (e.to_ms > e.from_ms) {
        period_cell = FormatTime(e.from_ms) + " +" + FormatDurationMs(e.to_ms - e.from_ms);
      }
      table.AddRow({FormatTime(e.created_ms), e.kind,
                    (e.kind == "credit" ? "+" : "-") + FormatMoney(e.amount_micros),
                    e.task.empty() ? "-" : e.task, period_cell, e.detail});
    }
    if (table.rows() == 0) {
      std::cerr << "no ledger entries in the period\n";
    } else {
      std::cout << table.Render();
    }
    if (more) std::cerr << "(first " << listed.entries.size() << " entries; --all for all)\n";
    return kExitOk;
  });
}

struct CostState {
  std::string task;
  CommonFlags common;
};

void PrintCost(const proto::TaskCostView& c) {
  std::cout << c.task << ": " << FormatMoney(c.cost_micros + c.accrued_micros) << " so far";
  if (c.accrued_micros > 0) {
    std::cout << " (" << FormatMoney(c.cost_micros) << " billed until "
              << FormatTime(c.billed_until_ms) << ", " << FormatMoney(c.accrued_micros)
              << " since)";
  } else if (c.billed_until_ms > 0) {
    std::cout << ", billed until " << FormatTime(c.billed_until_ms);
  }
  std::cout << "\n";
  if (c.entries.empty()) return;
  Table table({"FROM", "DURATION", "AMOUNT", "DETAIL"});
  table.AlignRight(2);
  for (const proto::LedgerEntryView& e : c.entries) {
    table.AddRow({FormatTime(e.from_ms), FormatDurationMs(e.to_ms - e.from_ms),
                  FormatMoney(e.amount_micros), e.detail});
  }
  std::cout << "\n" << table.Render();
}

int RunCost(const CostState& f) {
  Result<std::string> id = ParseTaskId(f.task);
  if (!id) return UsageError(id.error().message);
  return WithSession(f.common, [&](Session& s) {
    return PrintAnswer(s.client().Tasks().Cost(*id), f.common.json, PrintCost);
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
  c->add_option("task", cost->task, "Task id (t-42, or 42)")->required()->type_name("ID");
  AddCommonFlags(c, &cost->common);
  OnRun(c, exit_code, [f = cost] { return RunCost(*f); });
}

}  // namespace gpupool::cli
