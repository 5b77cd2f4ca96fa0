// VolumeService: a project's volumes (docs/volumes.md), data that outlives its tasks. Users
// create, list, resize and delete them; tasks mount them (TaskSpec::volumes, resolved at
// submission). A node-local volume lives on one node, which its tasks are then placed on; a
// shared one on the shared storage of the nodes that have it. A deleted volume's files are
// removed by a node (its own, or one with the shared storage), which then says so, and only then
// does its record go.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/volume.h"
#include "server/caller.h"

namespace gpupool::server {

struct VolumeSpec {
  std::string name;
  std::string project_id;  // empty: the caller's only project
  int64_t size_bytes = 0;
  bool shared = false;
  std::string node;  // a node-local volume's node; empty: the first task's that mounts it
};

struct VolumeInfo {
  Volume volume;
  std::vector<std::string> used_by;  // the tasks that mount it and have not ended
};

// Errors: NotFound for a volume or project the caller may not see (`volume` is an id, v-<seq>, or
// a name of the caller's projects); kInvalidArgument naming the field; kAlreadyExists for a name
// the project has; kFailedPrecondition for a name two of the caller's projects have, or a volume
// live tasks mount; kResourceExhausted past the project's storage quota.
class VolumeService {
 public:
  virtual ~VolumeService() = default;

  virtual void CreateVolume(const Caller& caller, VolumeSpec spec, Done<VolumeInfo> done) = 0;
  // The volumes of `project` (empty: of the caller's projects), oldest first.
  virtual void ListVolumes(const Caller& caller, const std::string& project,
                           Done<std::vector<VolumeInfo>> done) = 0;
  virtual void GetVolume(const Caller& caller, const std::string& volume,
                         Done<VolumeInfo> done) = 0;
  // Its new size, larger or smaller (tasks over it are stopped by their agents).
  virtual void ResizeVolume(const Caller& caller, const std::string& volume, int64_t size_bytes,
                            Done<VolumeInfo> done) = 0;
  // Marks it deleting (its files are removed by a node) or, when no node holds its files yet,
  // deletes it at once; answers its id.
  virtual void DeleteVolume(const Caller& caller, const std::string& volume,
                            Done<std::string> done) = 0;
  // An agent's: node `caller` removed deleted volume `id`'s files.
  virtual void VolumeRemoved(const Caller& caller, const std::string& id, DoneStatus done) = 0;
};

}  // namespace gpupool::server
