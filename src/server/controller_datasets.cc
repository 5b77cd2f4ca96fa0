// The Controller's DatasetService (dataset_service.h, core/dataset.h): dataset records in memory
// (all of them: they are few and small) and in the store, who sees and changes them (members of
// their project; everyone a published one; admins publish), a push (the chunks the project lacks,
// within its storage quota, then the version's record once its manifest and chunks are stored and
// durable), deletion (refused while live tasks mount it; the chunks nothing lists any more are
// collected), a submission's mounts resolved to a version's manifest, the agents' chunk reads, and
// the nodes that hold a version's files (heartbeats), which the scheduler prefers.
#include <algorithm>
#include <utility>

#include "core/file_rules.h"
#include "server/controller.h"

namespace gpupool::server {
namespace {

// The store's setting that keeps a dataset's last version number once its latest version was
// deleted, so that the number is never reused.
std::string LastVersionSetting(const std::string& id) { return "dataset_version." + id; }

std::string Ambiguous(const std::string& name, const Dataset& a, const Dataset& b) {
  return "dataset name " + name + " is in projects " + a.project_id + " and " + b.project_id +
         ": name it by its id (" + a.id + ", " + b.id + ")";
}

}  // namespace

Result<Dataset*> Controller::LookupDataset(const std::string& dataset,
                                           const std::function<bool(const Dataset&)>& own) {
  if (IsDatasetId(dataset)) {
    const auto it = datasets_.find(dataset);
    if (it == datasets_.end() || !(it->second.published || own(it->second))) {
      return NotFound("dataset " + dataset + " not found");
    }
    return &it->second;
  }
  std::vector<Dataset*> owned, published;
  for (auto& [id, d] : datasets_) {
    if (d.name != dataset) continue;
    if (own(d)) {
      owned.push_back(&d);
    } else if (d.published) {
      published.push_back(&d);
    }
  }
  const std::vector<Dataset*>& named = owned.empty() ? published : owned;
  if (named.empty()) return NotFound("dataset " + dataset + " not found");
  if (named.size() > 1) {
    return MakeError(ErrorCode::kFailedPrecondition, Ambiguous(dataset, *named[0], *named[1]));
  }
  return named.front();
}

Result<Dataset*> Controller::VisibleDataset(const Caller& caller, const std::string& dataset) {
  return LookupDataset(dataset,
                       [&caller](const Dataset& d) { return caller.InProject(d.project_id); });
}

Result<Dataset*> Controller::MemberDataset(const Caller& caller, const std::string& dataset,
                                           const std::string& what) {
  Result<Dataset*> d = VisibleDataset(caller, dataset);
  if (d && !caller.InProject((*d)->project_id)) {
    return MakeError(ErrorCode::kPermissionDenied,
                     "dataset " + (*d)->name + " (" + (*d)->id + ") is project " +
                         (*d)->project_id + "'s, published: only its members may " + what + " it");
  }
  return d;
}

Result<Dataset*> Controller::PushedDataset(const Caller& caller, const std::string& dataset) {
  if (options_.chunks == nullptr) {
    return MakeError(ErrorCode::kUnavailable, "this server keeps no chunks: no datasets");
  }
  return MemberDataset(caller, dataset, "push to");
}

std::map<std::string, std::vector<std::string>> Controller::DatasetUsers(const Caller* viewer,
                                                                         int32_t version) const {
  std::map<std::string, std::vector<std::string>> users;
  for (int64_t seq : live_) {
    const Task& t = tasks_.at(seq);
    if (t.datasets.empty() || (viewer != nullptr && !MayView(*viewer, t))) continue;
    for (const DatasetMount& m : t.datasets) {
      if (version == 0 || m.version == version) users[m.dataset_id].push_back(t.id);
    }
  }
  return users;
}

DatasetInfo Controller::InfoOf(const Caller& caller, const Dataset& dataset) const {
  DatasetInfo info{dataset, std::move(DatasetUsers(&caller)[dataset.id])};
  for (const DatasetVersion& v : dataset.versions) {
    if (const auto holders = dataset_nodes_.find(v.manifest); holders != dataset_nodes_.end()) {
      info.nodes[v.version].assign(holders->second.begin(), holders->second.end());
    }
  }
  return info;
}

void Controller::CreateDataset(const Caller& caller, const std::string& name,
                               const std::string& project_id, Done<DatasetInfo> done) {
  if (Status ok = ValidateDatasetName(name); !ok) return done(tl::unexpected(ok.error()));
  std::unique_lock lock(mu_);
  Result<std::string> project = ResolveProject(caller, project_id);
  if (!project) return lock.unlock(), done(tl::unexpected(project.error()));
  for (const auto& [id, d] : datasets_) {
    if (d.project_id == *project && d.name == name) {
      return lock.unlock(), done(MakeError(ErrorCode::kAlreadyExists, "project " + *project +
                                                                          " has a dataset named " +
                                                                          name + " (" + id + ")"));
    }
  }
  Dataset d;
  d.seq = next_dataset_seq_++;
  d.id = DatasetId(d.seq);
  d.project_id = *project;
  d.name = name;
  d.created_ms = clock_.NowMs();
  d.created_by = caller.user_id;
  store::WriteBatch batch;
  batch.datasets.push_back(d);
  batch.settings["dataset_seq"] = std::to_string(d.seq);
  Audit(caller, "dataset.create", d.id, d.name + " in " + d.project_id, batch);
  if (Status ok = store::ValidateBatch(batch); !ok) {
    return lock.unlock(), done(tl::unexpected(ok.error()));
  }
  datasets_.emplace(d.id, d);
  Commit(std::move(batch),
         [done = std::move(done), info = DatasetInfo{d, {}}](Status) mutable { done(info); });
}

void Controller::ListDatasets(const Caller& caller, const std::string& project,
                              Done<std::vector<DatasetInfo>> done) {
  std::unique_lock lock(mu_);
  if (!project.empty() && (!projects_.count(project) || !caller.InProject(project))) {
    return lock.unlock(), done(NotFound("project " + project + " not found"));
  }
  std::vector<DatasetInfo> out;
  std::map<std::string, std::vector<std::string>> users = DatasetUsers(&caller);  // one pass
  for (const auto& [id, d] : datasets_) {
    const bool listed =
        d.published || (project.empty() ? caller.InProject(d.project_id) : d.project_id == project);
    if (listed) out.push_back(DatasetInfo{d, std::move(users[id])});
  }
  lock.unlock();
  std::sort(out.begin(), out.end(), [](const DatasetInfo& a, const DatasetInfo& b) {
    return a.dataset.seq < b.dataset.seq;
  });
  done(std::move(out));
}

void Controller::GetDataset(const Caller& caller, const std::string& dataset,
                            Done<DatasetInfo> done) {
  std::unique_lock lock(mu_);
  Result<Dataset*> d = VisibleDataset(caller, dataset);
  if (!d) return lock.unlock(), done(tl::unexpected(d.error()));
  DatasetInfo info = InfoOf(caller, **d);
  lock.unlock();
  done(std::move(info));
}

void Controller::PublishDataset(const Caller& caller, const std::string& dataset, bool published,
                                Done<DatasetInfo> done) {
  std::unique_lock lock(mu_);
  Result<Dataset*> found = VisibleDataset(caller, dataset);
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  if (!caller.IsAdmin()) {
    return lock.unlock(), done(MakeError(ErrorCode::kPermissionDenied,
                                         "published: only an admin may publish a dataset or take "
                                         "it back"));
  }
  Dataset& d = **found;
  if (d.published == published) {
    DatasetInfo info = InfoOf(caller, d);
    lock.unlock();
    return done(std::move(info));
  }
  d.published = published;
  store::WriteBatch batch;
  batch.datasets.push_back(d);
  Audit(caller, published ? "dataset.publish" : "dataset.unpublish", d.id,
        d.name + " of " + d.project_id, batch);
  // Taken back, it stays mounted by the other projects' tasks submitted before (their mounts
  // were resolved then).
  Commit(std::move(batch),
         [done = std::move(done), info = InfoOf(caller, d)](Status) mutable { done(info); });
}

void Controller::DeleteDataset(const Caller& caller, const std::string& dataset,
                               Done<std::string> done) {
  std::unique_lock lock(mu_);
  Result<Dataset*> found = MemberDataset(caller, dataset, "delete");
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  const Dataset gone = **found;
  if (std::vector<std::string> users = std::move(DatasetUsers(nullptr)[gone.id]); !users.empty()) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition,
                          "dataset " + gone.name + " (" + gone.id + ") is mounted by " +
                              SomeOf(users) + ", which have not ended: stop them first"));
  }
  store::WriteBatch batch;
  batch.deleted_datasets.push_back(gone.id);
  Audit(caller, "dataset.delete", gone.id,
        gone.name + " in " + gone.project_id + ", " + std::to_string(gone.versions.size()) +
            " versions",
        batch);
  datasets_.erase(gone.id);
  CommitAndCollect(std::move(batch), gone.project_id,
                   [done = std::move(done), id = gone.id](Status) { done(id); });
}

void Controller::DeleteDatasetVersion(const Caller& caller, const std::string& dataset,
                                      int32_t version, Done<DatasetInfo> done) {
  if (version <= 0) {
    return done(InvalidArgument("version must be ≥ 1, got " + std::to_string(version)));
  }
  std::unique_lock lock(mu_);
  Result<Dataset*> found = MemberDataset(caller, dataset, "delete a version of");
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  Dataset& d = **found;
  const auto it = std::find_if(d.versions.begin(), d.versions.end(),
                               [version](const DatasetVersion& v) { return v.version == version; });
  if (it == d.versions.end()) {
    return lock.unlock(), done(NotFound("version: dataset " + d.name + " (" + d.id +
                                        ") has no version " + std::to_string(version)));
  }
  if (std::vector<std::string> users = std::move(DatasetUsers(nullptr, version)[d.id]);
      !users.empty()) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kFailedPrecondition,
                          "version " + std::to_string(version) + " of dataset " + d.name + " (" +
                              d.id + ") is mounted by " + SomeOf(users) +
                              ", which have not ended: stop them first"));
  }
  store::WriteBatch batch;
  if (version == d.versions.back().version) {  // its number is never reused
    const std::string key = LastVersionSetting(d.id);
    settings_[key] = std::to_string(version);
    batch.settings[key] = settings_[key];
  }
  d.versions.erase(it);
  batch.datasets.push_back(d);
  Audit(caller, "dataset.delete_version", d.id,
        d.name + " in " + d.project_id + ", version " + std::to_string(version), batch);
  CommitAndCollect(std::move(batch), d.project_id,
                   [done = std::move(done), info = InfoOf(caller, d)](Status) { done(info); });
}

void Controller::FindDatasetChunks(const Caller& caller, const std::string& dataset,
                                   std::vector<std::string> chunks,
                                   Done<std::vector<std::string>> done) {
  std::unique_lock lock(mu_);
  Result<Dataset*> d = PushedDataset(caller, dataset);
  if (!d) return lock.unlock(), done(tl::unexpected(d.error()));
  const std::string project = (*d)->project_id;
  lock.unlock();
  MissingChunksOf(project, std::move(chunks), std::move(done));
}

void Controller::PutDatasetChunk(const Caller& caller, const std::string& dataset,
                                 const std::string& sha256, std::string bytes, Done<bool> done) {
  std::unique_lock lock(mu_);
  Result<Dataset*> d = PushedDataset(caller, dataset);
  if (!d) return lock.unlock(), done(tl::unexpected(d.error()));
  StoreChunk(std::move(lock), (*d)->project_id, sha256, std::move(bytes), std::move(done));
}

void Controller::PushDatasetVersion(const Caller& caller, const std::string& dataset,
                                    DatasetPush push, Done<DatasetInfo> done) {
  for (const auto& [value, field] :
       {std::pair{push.files, "files"}, {push.bytes, "bytes"}, {push.new_bytes, "new_bytes"}}) {
    if (value < 0) {
      return done(
          InvalidArgument(std::string(field) + " must be ≥ 0, got " + std::to_string(value)));
    }
  }
  std::unique_lock lock(mu_);
  Result<Dataset*> found = PushedDataset(caller, dataset);
  if (!found) return lock.unlock(), done(tl::unexpected(found.error()));
  const std::string id = (*found)->id;
  const std::string project = (*found)->project_id;
  lock.unlock();
  Result<BlockingExecutor::Slot> slot = blocking_->Reserve();
  if (!slot) return done(tl::unexpected(slot.error()));
  // The manifest and every chunk it lists must be stored, and durable, before the record is.
  slot->Run([this, caller, id, project, push = std::move(push), done = std::move(done)]() mutable {
    if (Status ok = CheckManifestStored(project, push.manifest); !ok) {
      return done(tl::unexpected(ok.error()));
    }
    std::unique_lock relock(mu_);
    const auto it = datasets_.find(id);
    if (it == datasets_.end()) {  // deleted meanwhile
      return relock.unlock(), done(NotFound("dataset " + id + " not found"));
    }
    Dataset& d = it->second;
    // What the latest version holds already is that version: nothing to record.
    if (!d.versions.empty() && d.versions.back().manifest == push.manifest) {
      DatasetInfo info = InfoOf(caller, d);
      relock.unlock();
      return done(std::move(info));
    }
    int32_t last = d.versions.empty() ? 0 : d.versions.back().version;
    if (const auto s = settings_.find(LastVersionSetting(id)); s != settings_.end()) {
      last = std::max<int32_t>(last, static_cast<int32_t>(std::stol(s->second)));
    }
    DatasetVersion v;
    v.version = last + 1;
    v.manifest = std::move(push.manifest);
    v.files = push.files;
    v.bytes = push.bytes;
    v.new_bytes = push.new_bytes;
    v.created_ms = clock_.NowMs();
    v.created_by = caller.user_id;
    d.versions.push_back(v);
    store::WriteBatch batch;
    batch.datasets.push_back(d);
    Audit(caller, "dataset.push", d.id,
          d.name + " in " + d.project_id + ", version " + std::to_string(v.version) + ": " +
              std::to_string(v.files) + " files, " + BytesWithMib(v.bytes) + ", " +
              BytesWithMib(v.new_bytes) + " new",
          batch);
    Commit(std::move(batch),
           [done = std::move(done), info = InfoOf(caller, d)](Status) { done(info); });
  });
}

void Controller::GetDatasetChunk(const Caller& caller, const std::string& dataset_id,
                                 const std::string& sha256, Done<std::string> done) {
  std::unique_lock lock(mu_);
  if (options_.chunks == nullptr) {
    return lock.unlock(),
           done(MakeError(ErrorCode::kUnavailable, "this server keeps no chunks: no datasets"));
  }
  if (Status ok = RequireAgent(caller); !ok) return lock.unlock(), done(tl::unexpected(ok.error()));
  std::string project;
  if (caller.IsAgent()) {
    // Only the tasks bound to the node: a handful, whatever the size of the pool.
    if (const int i = cluster_.FindNode(caller.agent_node); i >= 0) {
      for (const std::string& id : cluster_.TasksOn(i)) {
        const Task* t = FindTask(id);
        if (t == nullptr || IsTerminal(t->state)) continue;
        for (const DatasetMount& m : t->datasets) {
          if (m.dataset_id == dataset_id) project = m.project_id;
        }
      }
    }
    if (project.empty()) {
      return lock.unlock(), done(MakeError(ErrorCode::kPermissionDenied,
                                           "no task bound to node " + caller.agent_node +
                                               " mounts dataset " + dataset_id));
    }
  } else {  // an admin
    const auto it = datasets_.find(dataset_id);
    if (it == datasets_.end()) {
      return lock.unlock(), done(NotFound("dataset " + dataset_id + " not found"));
    }
    project = it->second.project_id;
  }
  lock.unlock();
  ReadChunkOf(project, sha256, std::move(done));
}

Result<std::vector<DatasetMount>> Controller::ResolveDatasetMounts(
    const std::string& project_id, std::vector<DatasetMount> mounts,
    const std::vector<VolumeMount>& volumes) {
  for (size_t i = 0; i < mounts.size(); ++i) {
    DatasetMount& m = mounts[i];
    const std::string field = "datasets[" + std::to_string(i) + "]";
    Result<Dataset*> found = LookupDataset(
        m.name, [&project_id](const Dataset& d) { return d.project_id == project_id; });
    if (!found) {
      return MakeError(found.error().code, field + ".dataset: " + found.error().message);
    }
    const Dataset& d = **found;
    if (d.versions.empty()) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       field + ".dataset: dataset " + d.name + " (" + d.id +
                           ") has no version yet: push one first (gpupool dataset push)");
    }
    const DatasetVersion* v = d.Version(m.version);
    if (v == nullptr) {
      return InvalidArgument(field + ".version: dataset " + d.name + " (" + d.id +
                             ") has no version " + std::to_string(m.version) + "; its latest is " +
                             std::to_string(d.versions.back().version));
    }
    m.dataset_id = d.id;
    m.name = d.name;
    m.version = v->version;
    m.project_id = d.project_id;
    m.manifest = v->manifest;
  }
  // By id: a dataset named twice, once by its name and once by its id, is refused too.
  std::vector<DatasetMount> by_id = mounts;
  for (DatasetMount& m : by_id) m.name = m.dataset_id;
  if (Status ok = ValidateDatasetMounts(by_id, volumes); !ok) return tl::unexpected(ok.error());
  return mounts;
}

std::vector<std::string> Controller::DatasetNodesOf(const Task& task) const {
  const DatasetVersion* largest = nullptr;
  for (const DatasetMount& m : task.datasets) {
    const auto d = datasets_.find(m.dataset_id);
    const DatasetVersion* v = d == datasets_.end() ? nullptr : d->second.Version(m.version);
    if (v != nullptr && (largest == nullptr || v->bytes > largest->bytes)) largest = v;
  }
  std::vector<std::string> out;
  if (largest == nullptr) return out;
  const auto holders = dataset_nodes_.find(largest->manifest);
  if (holders == dataset_nodes_.end()) return out;
  for (const std::string& node : holders->second) {
    const auto info = nodes_.find(node);
    if (info != nodes_.end() && info->second.status != NodeStatus::kLost) out.push_back(node);
  }
  return out;
}

void Controller::SetNodeDatasets(const std::string& node, std::vector<std::string> manifests) {
  std::sort(manifests.begin(), manifests.end());
  manifests.erase(std::unique(manifests.begin(), manifests.end()), manifests.end());
  const auto it = node_datasets_.find(node);
  if (it == node_datasets_.end() ? manifests.empty() : it->second == manifests) return;
  if (it != node_datasets_.end()) {
    for (const std::string& m : it->second) {
      const auto holders = dataset_nodes_.find(m);
      holders->second.erase(node);
      if (holders->second.empty()) dataset_nodes_.erase(holders);
    }
  }
  for (const std::string& m : manifests) dataset_nodes_[m].insert(node);
  if (manifests.empty()) {
    node_datasets_.erase(node);
  } else {
    node_datasets_[node] = std::move(manifests);
  }
}

}  // namespace gpupool::server
