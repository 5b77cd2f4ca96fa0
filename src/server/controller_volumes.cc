// The Controller's VolumeService (volume_service.h, docs/volumes.md): volume records in memory
// (all of them: they are few and small) and in the store, a submission's mounts resolved in its
// project, the node a task with a node-local volume is held to (SchedulingRequest) and the
// binding of such a volume to the node of the first task placed with it (ClaimVolumes), the
// storage quota, and deletion: a node removes the files, says so, and the record goes.
#include <algorithm>
#include <utility>

#include "server/controller.h"

namespace gpupool::server {
namespace {

std::string GiB(int64_t bytes) {
  if (bytes % (int64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  return std::to_string(bytes) + " bytes";
}

}  // namespace

Result<Volume*> Controller::VisibleVolume(const Caller& caller, const std::string& volume) {
  if (IsVolumeId(volume)) {
    const auto it = volumes_.find(volume);
    if (it == volumes_.end() || !caller.InProject(it->second.project_id)) {
      return NotFound("volume " + volume + " not found");
    }
    return &it->second;
  }
  std::vector<Volume*> named;
  for (auto& [id, v] : volumes_) {
    if (v.name == volume && caller.InProject(v.project_id)) named.push_back(&v);
  }
  if (named.empty()) return NotFound("volume " + volume + " not found");
  if (named.size() > 1) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "volume name " + volume + " is in projects " + named[0]->project_id + " and " +
                         named[1]->project_id + ": name it by its id (" + named[0]->id + ", " +
                         named[1]->id + ")");
  }
  return named.front();
}

std::string Controller::SomeOf(const std::vector<std::string>& ids) {
  std::string list;
  for (size_t i = 0; i < ids.size() && i < 5; ++i) list += (i ? ", " : "") + ids[i];
  if (ids.size() > 5) list += " and " + std::to_string(ids.size() - 5) + " more";
  return list;
}

std::vector<std::string> Controller::VolumeUsers(const std::string& id) const {
  return std::move(VolumeUsersByVolume()[id]);
}

std::map<std::string, std::vector<std::string>> Controller::VolumeUsersByVolume() const {
  std::map<std::string, std::vector<std::string>> users;
  for (int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    for (const VolumeMount& m : t.volumes) users[m.volume_id].push_back(t.id);
  }
  return users;
}

VolumeInfo Controller::InfoOf(const Volume& volume) const {
  return VolumeInfo{volume, VolumeUsers(volume.id)};
}

int64_t Controller::VolumeBytesOf(const std::string& project_id) const {
  int64_t bytes = 0;
  for (const auto& [id, v] : volumes_) {
    if (v.project_id == project_id) bytes += v.size_bytes;
  }
  return bytes;
}

Status Controller::CheckVolumeQuota(const std::string& project_id, int64_t more) const {
  const auto p = projects_.find(project_id);
  if (p == projects_.end() || p->second.max_storage_bytes < 0 || more <= 0) return {};
  const int64_t files =
      options_.task_files != nullptr ? options_.task_files->ProjectBytes(project_id) : 0;
  const int64_t chunks = options_.chunks != nullptr ? options_.chunks->ProjectBytes(project_id) : 0;
  const int64_t volumes = VolumeBytesOf(project_id);
  const int64_t max = p->second.max_storage_bytes;
  if (files + chunks + volumes + more > max) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "project " + project_id + "'s storage quota max_storage_bytes " +
                         std::to_string(max) + " cannot hold " + std::to_string(more) +
                         " bytes more of volumes: its volumes hold " + std::to_string(volumes) +
                         ", its task files " + std::to_string(files) + ", its snapshots " +
                         std::to_string(chunks));
  }
  return {};
}

void Controller::CreateVolume(const Caller& caller, VolumeSpec spec, Done<VolumeInfo> done) {
  if (Status ok = ValidateVolumeName(spec.name); !ok) return done(tl::unexpected(ok.error()));
  if (spec.size_bytes <= 0) {
    return done(InvalidArgument("size_bytes must be > 0, got " + std::to_string(spec.size_bytes)));
  }
  if (spec.shared && !spec.node.empty()) {
    return done(
        InvalidArgument("node: a shared volume is on every node with the shared storage, "
                        "not on node " +
                        spec.node));
  }
  std::unique_lock lock(mu_);
  Result<std::string> project = ResolveProject(caller, spec.project_id);
  if (!project) return lock.unlock(), done(tl::unexpected(project.error()));
  for (const auto& [id, v] : volumes_) {
    if (v.project_id == *project && v.name == spec.name) {
      return lock.unlock(),
             done(MakeError(ErrorCode::kAlreadyExists,
                            "project " + *project + " has a volume named " + spec.name + " (" + id +
                                (v.deleting ? ", deleted: its files are being removed, after "
                                              "which the name is free"
                                            : "") +
                                ")"));
    }
  }
  if (!spec.node.empty() && !nodes_.count(spec.node)) {
    return lock.unlock(), done(NotFound("node: node " + spec.node + " not found"));
  }
  if (Status ok = CheckVolumeQuota(*project, spec.size_bytes); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  Volume v;
  v.seq = next_volume_seq_++;
  v.id = "v-" + std::to_string(v.seq);
  v.project_id = *project;
  v.name = spec.name;
  v.size_bytes = spec.size_bytes;
  v.shared = spec.shared;
  v.node = spec.node;
  v.created_ms = clock_.NowMs();
  v.created_by = caller.user_id;
  store::WriteBatch batch;
  batch.volumes.push_back(v);
  batch.settings["volume_seq"] = std::to_string(v.seq);
  Audit(caller, "volume.create", v.id,
        v.name + " in " + v.project_id + ", " + GiB(v.size_bytes) +
            (v.shared         ? ", shared"
             : v.node.empty() ? ""
                              : ", on node " + v.node),
        batch);
  if (Status ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  volumes_.emplace(v.id, v);
  Commit(std::move(batch),
         [done = std::move(done), info = VolumeInfo{v, {}}](Status) mutable { done(info); });
}

void Controller::ListVolumes(const Caller& caller, const std::string& project,
                             Done<std::vector<VolumeInfo>> done) {
  std::unique_lock lock(mu_);
  if (!project.empty() && (!projects_.count(project) || !caller.InProject(project))) {
    return lock.unlock(), done(NotFound("project " + project + " not found"));
  }
  std::vector<VolumeInfo> out;
  std::map<std::string, std::vector<std::string>> users = VolumeUsersByVolume();  // one pass
  for (const auto& [id, v] : volumes_) {
    if (caller.InProject(v.project_id) && (project.empty() || v.project_id == project)) {
      out.push_back(VolumeInfo{v, std::move(users[id])});
    }
  }
  lock.unlock();
  std::sort(out.begin(), out.end(),
            [](const VolumeInfo& a, const VolumeInfo& b) { return a.volume.seq < b.volume.seq; });
  done(std::move(out));
}

void Controller::GetVolume(const Caller& caller, const std::string& volume, Done<VolumeInfo> done) {
  std::unique_lock lock(mu_);
  Result<Volume*> v = VisibleVolume(caller, volume);
  if (!v) return lock.unlock(), done(tl::unexpected(v.error()));
  VolumeInfo info = InfoOf(**v);
  lock.unlock();
  done(std::move(info));
}

void Controller::ResizeVolume(const Caller& caller, const std::string& volume, int64_t size_bytes,
                              Done<VolumeInfo> done) {
  if (size_bytes <= 0) {
    return done(InvalidArgument("size_bytes must be > 0, got " + std::to_string(size_bytes)));
  }
  std::unique_lock lock(mu_);
  Result<Volume*> found = VisibleVolume(caller, volume);
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  Volume& v = **found;
  if (v.deleting) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition, "volume " + v.id + " is being deleted"));
  }
  if (Status ok = CheckVolumeQuota(v.project_id, size_bytes - v.size_bytes); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  const int64_t before = v.size_bytes;
  v.size_bytes = size_bytes;
  store::WriteBatch batch;
  batch.volumes.push_back(v);
  Audit(caller, "volume.resize", v.id, GiB(before) + " → " + GiB(size_bytes), batch);
  // Its tasks' agents hold them to the new size.
  for (const std::string& id : VolumeUsers(v.id)) {
    const Task* t = FindTask(id);
    if (t != nullptr && t->placement && HoldsResources(t->state)) TouchNode(t->placement->node);
  }
  VolumeInfo info = InfoOf(v);
  Commit(std::move(batch),
         [done = std::move(done), info = std::move(info)](Status) mutable { done(info); });
}

void Controller::DeleteVolume(const Caller& caller, const std::string& volume,
                              Done<std::string> done) {
  std::unique_lock lock(mu_);
  Result<Volume*> found = VisibleVolume(caller, volume);
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  Volume& v = **found;
  const std::string id = v.id;
  if (v.deleting) return lock.unlock(), done(id);
  if (std::vector<std::string> users = VolumeUsers(id); !users.empty()) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition,
                          "volume " + v.name + " (" + id + ") is mounted by " + SomeOf(users) +
                              ", which have not ended: stop them first"));
  }
  store::WriteBatch batch;
  Audit(caller, "volume.delete", id, v.name + " in " + v.project_id, batch);
  if (!v.shared && v.node.empty()) {
    // No node ever held its files.
    batch.deleted_volumes.push_back(id);
    volumes_.erase(id);
  } else {
    v.deleting = true;
    batch.volumes.push_back(v);
    TouchVolumeNodes(v);
  }
  Commit(std::move(batch), [done = std::move(done), id](Status) { done(id); });
}

void Controller::VolumeRemoved(const Caller& caller, const std::string& id, DoneStatus done) {
  std::unique_lock lock(mu_);
  const auto it = volumes_.find(id);
  if (it == volumes_.end()) return lock.unlock(), done({});  // said twice
  const Volume& v = it->second;
  if (Status ok = RequireAgent(caller); !ok) return lock.unlock(), done(ok);
  const std::string& node = caller.agent_node;
  const auto info = nodes_.find(node);
  const bool holds = (!v.shared && node == v.node) ||
                     (v.shared && info != nodes_.end() && info->second.node.shared_storage);
  if (!caller.IsAdmin() && !holds) {
    return lock.unlock(), done(MakeError(ErrorCode::kPermissionDenied,
                                         "node " + node + " does not hold volume " + id));
  }
  if (!v.deleting) {
    return lock.unlock(), done(MakeError(ErrorCode::kFailedPrecondition,
                                         "volume " + id + " is not being deleted"));
  }
  store::WriteBatch batch;
  batch.deleted_volumes.push_back(id);
  const Volume gone = v;
  volumes_.erase(it);
  TouchVolumeNodes(gone);  // off their lists
  Commit(std::move(batch), [done = std::move(done)](Status) { done({}); });
}

Result<std::vector<VolumeMount>> Controller::ResolveMounts(const std::string& project_id,
                                                           std::vector<VolumeMount> mounts) const {
  for (size_t i = 0; i < mounts.size(); ++i) {
    VolumeMount& m = mounts[i];
    const std::string field = "volumes[" + std::to_string(i) + "].volume";
    const Volume* found = nullptr;
    for (const auto& [id, v] : volumes_) {
      if (v.project_id == project_id && (id == m.name || v.name == m.name)) found = &v;
    }
    if (found == nullptr) {
      return NotFound(field + ": volume " + m.name + " not found in project " + project_id);
    }
    if (found->deleting) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       field + ": volume " + m.name + " is being deleted");
    }
    m.volume_id = found->id;
    m.name = found->name;
    m.shared = found->shared;
  }
  // By id: a volume named twice, once by its name and once by its id, is refused too.
  std::vector<VolumeMount> by_id = mounts;
  for (VolumeMount& m : by_id) m.name = m.volume_id;
  if (Status ok = ValidateVolumeMounts(by_id); !ok) return tl::unexpected(ok.error());
  return mounts;
}

TaskRequest Controller::SchedulingRequest(const Task& task) const {
  TaskRequest r = PlacementRequest(task);
  for (const VolumeMount& m : task.volumes) {
    if (m.shared) continue;
    const auto it = volumes_.find(m.volume_id);
    if (it != volumes_.end() && !it->second.node.empty()) r.node = it->second.node;
  }
  if (!task.datasets.empty()) r.prefer_nodes = DatasetNodesOf(task);
  return r;
}

void Controller::ClaimVolumes(const Task& task, const std::string& node,
                              std::vector<Volume>& claimed) {
  for (const VolumeMount& m : task.volumes) {
    const auto it = volumes_.find(m.volume_id);
    if (m.shared || it == volumes_.end() || !it->second.node.empty()) continue;
    claimed.push_back(it->second);
    it->second.node = node;
  }
}

void Controller::TouchVolumeNodes(const Volume& volume) {
  if (!volume.shared) {
    if (!volume.node.empty()) TouchNode(volume.node);
    return;
  }
  for (const auto& [name, info] : nodes_) {
    if (info.node.shared_storage) TouchNode(name);
  }
}

}  // namespace gpupool::server
