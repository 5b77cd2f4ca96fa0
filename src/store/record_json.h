// JSON text for the nested parts of records that SqliteStore keeps in TEXT columns (store-private):
// task request, command and placement; node GPUs, MIG instances and labels; user projects and
// SSH keys.
// Decoding keeps defaults for missing fields (new fields need no migration); a wrong type fails.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/node.h"
#include "core/records.h"
#include "core/result.h"
#include "core/task.h"

namespace gpupool::store {

// Encoders fail (kInvalidArgument) only on text that is not UTF-8.
Result<std::string> ToJson(const TaskRequest& request);
Result<std::string> ToJson(const TaskPlacement& placement);
// Everything but the name (the row's key).
Result<std::string> ToJson(const Node& node);
Result<std::string> ToJson(const std::vector<std::string>& strings);
Result<std::string> ToJson(const std::vector<SshKey>& keys);
Result<std::string> ToJson(const std::vector<VolumeMount>& mounts);
Result<std::string> ToJson(const std::vector<DatasetMount>& mounts);
Result<std::string> ToJson(const std::vector<DatasetVersion>& versions);

// Decoders fail (kInternal: the stored text is corrupt) with the parser's reason.
Status FromJson(std::string_view text, TaskRequest* request);
Status FromJson(std::string_view text, TaskPlacement* placement);
Status FromJson(std::string_view text, Node* node);
Status FromJson(std::string_view text, std::vector<std::string>* strings);
Status FromJson(std::string_view text, std::vector<SshKey>* keys);
Status FromJson(std::string_view text, std::vector<VolumeMount>* mounts);
Status FromJson(std::string_view text, std::vector<DatasetMount>* mounts);
Status FromJson(std::string_view text, std::vector<DatasetVersion>* versions);

}  // namespace gpupool::store
