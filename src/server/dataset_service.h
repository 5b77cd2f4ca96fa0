// DatasetService: datasets (docs/datasets.md), a project's read-only, versioned directories of
// files. Users create one, push versions into it (the chunks its project lacks, then the version's
// record), list, publish (admins) and delete them; tasks mount a version read-only
// (TaskSpec::datasets, resolved at submission to the version's manifest). A version's files are
// chunks in the owning project's ChunkStore, shared with its other versions and its snapshots;
// nodes fetch the chunks of the datasets their tasks mount.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dataset.h"
#include "server/caller.h"

namespace gpupool::server {

struct DatasetInfo {
  Dataset dataset;
  std::vector<std::string> used_by;  // the caller's visible tasks that mount it, not ended
  // By version: the live nodes that said they hold its files (what tasks mounting it prefer).
  std::map<int32_t, std::vector<std::string>> nodes{};
};

// What a push recorded (proto::DatasetVersionPush).
struct DatasetPush {
  std::string manifest;
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t new_bytes = 0;
};

// Errors: NotFound for a dataset or project the caller may not see (`dataset` is an id, d-<seq>,
// or a name: of the caller's projects first, else a published one); kInvalidArgument naming the
// field; kAlreadyExists for a name the project has; kFailedPrecondition for a name two of the
// caller's projects have, a version or dataset live tasks mount, or a push whose manifest or
// chunks are not all stored; kPermissionDenied for changes to a published dataset by a non-member
// or publishing by a non-admin; kResourceExhausted past the project's storage quota; kUnavailable
// when the server keeps no chunks.
class DatasetService {
 public:
  virtual ~DatasetService() = default;

  virtual void CreateDataset(const Caller& caller, const std::string& name,
                             const std::string& project_id, Done<DatasetInfo> done) = 0;
  // The datasets of `project` (empty: of the caller's projects) and the published ones, oldest
  // first.
  virtual void ListDatasets(const Caller& caller, const std::string& project,
                            Done<std::vector<DatasetInfo>> done) = 0;
  virtual void GetDataset(const Caller& caller, const std::string& dataset,
                          Done<DatasetInfo> done) = 0;
  virtual void PublishDataset(const Caller& caller, const std::string& dataset, bool published,
                              Done<DatasetInfo> done) = 0;
  // Deletes the record (no live task may mount it); the chunks nothing else lists are collected.
  // Answers its id.
  virtual void DeleteDataset(const Caller& caller, const std::string& dataset,
                             Done<std::string> done) = 0;
  virtual void DeleteDatasetVersion(const Caller& caller, const std::string& dataset,
                                    int32_t version, Done<DatasetInfo> done) = 0;
  // A push, by a member of the dataset's project: which of `chunks` its store lacks (those it
  // has are touched, so that they are not collected before the version is recorded), storing
  // one (within the project's storage quota), and the version's record once its manifest and
  // every chunk it lists are stored (synced first); a push of the latest version's manifest
  // adds none.
  virtual void FindDatasetChunks(const Caller& caller, const std::string& dataset,
                                 std::vector<std::string> chunks,
                                 Done<std::vector<std::string>> done) = 0;
  virtual void PutDatasetChunk(const Caller& caller, const std::string& dataset,
                               const std::string& sha256, std::string bytes, Done<bool> done) = 0;
  virtual void PushDatasetVersion(const Caller& caller, const std::string& dataset,
                                  DatasetPush push, Done<DatasetInfo> done) = 0;
  // An agent's: a chunk of dataset `dataset_id` (an id), which a task bound to its node mounts.
  virtual void GetDatasetChunk(const Caller& caller, const std::string& dataset_id,
                               const std::string& sha256, Done<std::string> done) = 0;
};

}  // namespace gpupool::server
