// What every Store implementation refuses in a query, checked the same way by all of them
// (store-private): malformed ledger and task queries and task ids. A batch's rules, ValidateBatch,
// are part of the Store interface (store.h). All failures are kInvalidArgument naming the field.
#pragma once

#include <string_view>

#include "core/result.h"
#include "store/store.h"

namespace gpupool::store {

Status ValidateLedgerQuery(const LedgerQuery& query);
Status ValidateAuditQuery(const AuditQuery& query);
Status ValidateTaskQuery(const TaskQuery& query);

// A task id passed to ReadTask or TaskEvents.
Status ValidateTaskId(std::string_view task_id);

}  // namespace gpupool::store
