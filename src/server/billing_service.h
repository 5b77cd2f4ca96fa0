// BillingService: balances, credits, the ledger, task costs, statements and prices. The ledger
// reads come from the store off the I/O and store threads (see blocking_executor.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/records.h"
#include "core/result.h"
#include "server/caller.h"

namespace gpupool::server {

struct Balance {
  std::string project_id;
  int64_t balance_micros = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
};

struct TaskCost {
  std::string task_id;
  int64_t cost_micros = 0;  // billed so far
  int64_t billed_until_ms = 0;
  // A task holding resources: its usage since billed_until_ms, not yet billed, priced up to
  // as_of_ms (the next meter tick bills it); 0 otherwise.
  int64_t accrued_micros = 0;
  int64_t as_of_ms = 0;
  std::vector<LedgerEntry> entries;
};

struct Statement {
  std::string project_id;
  int64_t from_ms = 0;
  int64_t to_ms = 0;
  int64_t credits_micros = 0;
  int64_t usage_micros = 0;
  // Usage per task in the period: (task id, micros), descending cost.
  std::vector<std::pair<std::string, int64_t>> by_task;
};

class BillingService {
 public:
  virtual ~BillingService() = default;

  virtual Result<Balance> GetBalance(const Caller& caller, const std::string& project_id) = 0;
  virtual void Credit(const Caller& caller, const std::string& project_id, int64_t amount_micros,
                      std::string note, Done<LedgerEntry> done) = 0;
  // The reads of the ledger below answer once every write queued before the call is durable;
  // kUnavailable when the blocking-work queue is full.
  virtual void Ledger(const Caller& caller, const std::string& project_id, int64_t from_ms,
                      int64_t to_ms, int64_t offset, int64_t limit,
                      Done<std::vector<LedgerEntry>> done) = 0;
  virtual void GetTaskCost(const Caller& caller, const std::string& task_id,
                           Done<TaskCost> done) = 0;
  virtual void GetStatement(const Caller& caller, const std::string& project_id, int64_t from_ms,
                            int64_t to_ms, Done<Statement> done) = 0;
  virtual Result<std::vector<Price>> ListPrices(const Caller& caller) = 0;
  virtual void SetPrice(const Caller& caller, Price price, Done<Price> done) = 0;
};

}  // namespace gpupool::server
