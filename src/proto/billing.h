// Wire types of billing (docs/api.md "Billing"): balances, credits, the ledger and its pages, a
// task's cost, statements and prices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/common.h"
#include "proto/describe.h"

namespace gpupool::proto {

struct BalanceView {
  std::string project;
  int64_t balance_micros = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
  static constexpr std::string_view kName = "Balance";
  static constexpr std::string_view kDoc = "A project's credits, usage and what is left.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("project", s.project);
    v("balance_micros", s.balance_micros, {.doc = "credits - usage"});
    v("credits_micros", s.credits_micros);
    v("usage_micros", s.usage_micros);
  }
};

// The largest credit one request may add, and the largest sum of credits a project may hold:
// 10^15 micros (a billion units of the pool's currency), far inside int64 so that no sum of
// credits and usage can overflow.
inline constexpr int64_t kMaxCreditMicros = 1'000'000'000'000'000;

// POST /v1/projects/{id}/credits.
struct CreditRequest {
  int64_t amount_micros = 0;
  std::string note;
  static constexpr std::string_view kName = "CreditRequest";
  static constexpr std::string_view kDoc = "Money added to a project's balance.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("amount_micros", s.amount_micros, {.required = true, .min = 1, .max = kMaxCreditMicros});
    v("note", s.note, {.max_bytes = 1024, .format = Format::kText, .doc = "Shown in the ledger"});
  }
};

struct LedgerEntryView {
  std::string key;
  std::string project;
  std::string task;
  std::string kind;
  int64_t amount_micros = 0;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  std::string detail;
  int64_t created_ms = 0;
  static constexpr std::string_view kName = "LedgerEntry";
  static constexpr std::string_view kDoc = "One line of a project's account.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("key", s.key, {.doc = "Unique; usage entries are <task>:<from_ms>"});
    v("project", s.project);
    v("task", s.task, {.doc = "Usage entries"});
    v("kind", s.kind, {.one_of = kLedgerKinds});
    v("amount_micros", s.amount_micros, {.doc = "> 0: credits add, usage subtracts"});
    v("from_ms", s.from_ms);
    v("to_ms", s.to_ms);
    v("detail", s.detail);
    v("created_ms", s.created_ms);
  }
};

// A period: from_ms defaults to 0, to_ms to now.
struct PeriodQuery {
  std::optional<int64_t> from_ms;
  std::optional<int64_t> to_ms;
  static constexpr std::string_view kName = "PeriodQuery";
  static constexpr std::string_view kDoc = "A period of time.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("from_ms", s.from_ms, {.min = 0, .doc = "Default: 0"});
    v("to_ms", s.to_ms, {.min = 0, .doc = "Default: now"});
  }
};

struct LedgerQuery : PeriodQuery {
  int64_t offset = 0;
  int64_t limit = 100;
  static constexpr std::string_view kName = "LedgerQuery";
  static constexpr std::string_view kDoc = "A page of a project's ledger.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    PeriodQuery::Describe(v, static_cast<Like<Self, PeriodQuery>&>(s));
    v("offset", s.offset, {.min = 0});
    v("limit", s.limit, {.min = 1, .max = 1000});
  }
};

struct LedgerPage {
  std::vector<LedgerEntryView> entries;
  std::optional<int64_t> next_offset;
  static constexpr std::string_view kName = "LedgerPage";
  static constexpr std::string_view kDoc = "Ledger entries in the period, oldest first.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("entries", s.entries);
    v("next_offset", s.next_offset, {.nullable = true, .doc = "null: no more"});
  }
};

struct TaskCostView {
  std::string task;
  int64_t cost_micros = 0;
  int64_t billed_until_ms = 0;
  int64_t accrued_micros = 0;
  int64_t as_of_ms = 0;
  std::vector<LedgerEntryView> entries;
  static constexpr std::string_view kName = "TaskCost";
  static constexpr std::string_view kDoc = "What a task cost so far.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("cost_micros", s.cost_micros, {.doc = "Billed so far: the sum of entries"});
    v("billed_until_ms", s.billed_until_ms);
    v("accrued_micros", s.accrued_micros,
      {.doc = "While it holds resources: usage since billed_until_ms, not billed yet, up to "
              "as_of_ms; its cost so far is cost_micros + accrued_micros"});
    v("as_of_ms", s.as_of_ms, {.doc = "When this answer was priced"});
    v("entries", s.entries);
  }
};

struct TaskUsage {
  std::string task;
  int64_t usage_micros = 0;
  static constexpr std::string_view kName = "TaskUsage";
  static constexpr std::string_view kDoc = "A task's usage in a statement's period.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("task", s.task);
    v("usage_micros", s.usage_micros);
  }
};

struct StatementView {
  std::string project;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
  std::vector<TaskUsage> by_task;
  static constexpr std::string_view kName = "Statement";
  static constexpr std::string_view kDoc = "A project's credits and usage over a period.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("project", s.project);
    v("from_ms", s.from_ms);
    v("to_ms", s.to_ms);
    v("credits_micros", s.credits_micros);
    v("usage_micros", s.usage_micros);
    v("by_task", s.by_task, {.doc = "Descending cost"});
  }
};

// PUT /v1/prices.
struct PriceSet {
  std::string resource;
  int64_t micros_per_hour = 0;
  std::optional<int64_t> effective_ms;
  static constexpr std::string_view kName = "PriceSet";
  static constexpr std::string_view kDoc = "A new price for a resource.";
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("resource", s.resource,
      {.required = true, .max_bytes = 256, .doc = "cpu, memory, gpu:<model> or gpu:*"});
    v("micros_per_hour", s.micros_per_hour, {.required = true, .min = 0, .doc = "Per unit"});
    v("effective_ms", s.effective_ms, {.min = 0, .doc = "Default: now"});
  }
};

struct PriceView {
  std::string resource;
  int64_t micros_per_hour = 0;
  int64_t effective_ms = 0;
  static constexpr std::string_view kName = "Price";
  static constexpr std::string_view kDoc = "A resource's price from a time on.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("resource", s.resource);
    v("micros_per_hour", s.micros_per_hour);
    v("effective_ms", s.effective_ms);
  }
};

struct PriceList {
  std::vector<PriceView> prices;
  static constexpr std::string_view kName = "PriceList";
  static constexpr std::string_view kDoc = "Every price, each resource's versions in order.";
  static constexpr bool kResponse = true;
  template <typename V, typename Self>
  static void Describe(V& v, Self& s) {
    v("prices", s.prices);
  }
};

}  // namespace gpupool::proto
