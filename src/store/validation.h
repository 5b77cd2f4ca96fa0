// What every Store implementation refuses, checked the same way by all of them (store-private):
// empty keys, out-of-range enums, non-positive ledger amounts, text that cannot be stored as JSON,
// access keys of both or neither of a user and a node, and malformed ledger queries. All failures
// are kInvalidArgument naming the record and field.
#pragma once

#include <string_view>

#include "core/result.h"
#include "store/store.h"

namespace gpupool::store {

// The whole batch, before any of it is applied: a batch is applied entirely or not at all.
Status ValidateBatch(const WriteBatch& batch);

Status ValidateLedgerQuery(const LedgerQuery& query);

// A task id passed to TaskEvents.
Status ValidateTaskId(std::string_view task_id);

}  // namespace gpupool::store
