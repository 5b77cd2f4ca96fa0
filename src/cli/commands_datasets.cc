// Datasets (docs/datasets.md): `gpupool dataset push DIR NAME` (creates the dataset on its first
// push; each push is a new version, sending only the chunks the project lacks), `dataset ls`,
// `dataset show D`, `dataset rm D[@VERSION]` and, for admins, `dataset publish D [--off]` (D: a
// name, or an id d-12). Tasks mount them read-only with `gpupool submit --dataset
// NAME[@VERSION]:/root/data`.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "api/resources.h"
#include "cli/commands.h"
#include "cli/commands_common.h"
#include "cli/dataset_push.h"
#include "cli/format.h"
#include "cli/output.h"
#include "cli/transfer.h"
#include "core/dataset.h"
#include "os/sha256.h"

namespace gpupool::cli {
namespace {

struct DatasetState {
  std::string dataset;  // a name or an id (push: the name)
  std::string dir;      // push: the local directory
  std::optional<std::string> project;
  int parallel = 4;
  bool rescan = false;
  bool off = false;
  CommonFlags common;
};

const proto::DatasetVersionView* Latest(const proto::DatasetView& d) {
  return d.versions.empty() ? nullptr : &d.versions.back();
}

void PrintDataset(const proto::DatasetView& d) {
  Details details;
  details.Add("ID", d.id);
  details.Add("Name", d.name);
  details.Add("Project", d.project);
  details.Add("Published", d.published ? "yes: every project may mount it" : "no");
  details.Add("Created", TimeWithAge(d.created_ms, NowMs()) + " by " + d.created_by);
  details.Add("Used by", FewOf(d.used_by));
  std::cout << details.Render();
  if (d.versions.empty()) {
    std::cout << "\nNo version yet: gpupool dataset push DIR " << d.name << "\n";
    return;
  }
  Table table({"VERSION", "FILES", "SIZE", "NEW", "PUSHED", "BY", "ON NODES"});
  for (const proto::DatasetVersionView& v : d.versions) {
    table.AddRow({std::to_string(v.version), std::to_string(v.files), FormatBytes(v.bytes),
                  FormatBytes(v.new_bytes), TimeWithAge(v.created_ms, NowMs()), v.created_by,
                  FewOf(v.nodes)});
  }
  std::cout << "\n" << table.Render();
}

void PrintDatasets(const proto::DatasetList& list) {
  Table table({"ID", "NAME", "PROJECT", "VERSION", "FILES", "SIZE", "PUBLISHED", "USED BY"});
  for (const proto::DatasetView& d : list.datasets) {
    const proto::DatasetVersionView* v = Latest(d);
    table.AddRow({d.id, d.name, d.project, v ? std::to_string(v->version) : "-",
                  v ? std::to_string(v->files) : "-", v ? FormatBytes(v->bytes) : "-",
                  d.published ? "yes" : "no", FewOf(d.used_by)});
  }
  std::cout << table.Render();
}

// Where a directory's scan cache is kept: $XDG_CACHE_HOME (else ~/.cache)/gpupool/dataset-scans/,
// named by the SHA-256 of the directory's absolute path; "" when there is no such place, or when
// it is inside the directory (it would be pushed with it, and change under the push).
std::string ScanCachePath(const std::string& dir) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::string base;
  if (xdg != nullptr && *xdg == '/') {
    base = xdg;
  } else if (home != nullptr && *home == '/') {
    base = std::string(home) + "/.cache";
  } else {
    return "";
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(dir, ec).lexically_normal();
  const std::filesystem::path cache =
      std::filesystem::absolute(base + "/gpupool/dataset-scans", ec).lexically_normal();
  const std::string inside = cache.lexically_relative(absolute).generic_string();
  if (!inside.empty() && !inside.starts_with("..")) return "";
  return cache.string() + "/" + os::Sha256Hex(absolute.string());
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Push(Session& s, const DatasetState& f) {
  if (f.parallel < 1 || f.parallel > 64) return UsageError("--parallel must be 1..64");
  // The dataset, created on its first push (an id names one that exists).
  Result<proto::DatasetView> dataset = MakeError(ErrorCode::kAlreadyExists, "");
  if (!IsDatasetId(f.dataset)) {
    proto::DatasetCreate create;
    create.name = f.dataset;
    create.project = f.project;
    dataset = s.client().Datasets().Create(create);
  }
  if (!dataset && dataset.error().code == ErrorCode::kAlreadyExists) {
    dataset = s.client().Datasets().Get(f.dataset);
    if (dataset && f.project && dataset->project != *f.project) {
      return Failure("dataset " + f.dataset + " is project " + dataset->project + "'s, not " +
                     *f.project + "'s");
    }
  }
  if (!dataset) return ApiFailure(dataset.error());

  const auto started = std::chrono::steady_clock::now();
  const std::string cache = ScanCachePath(f.dir);
  Result<DatasetScan> scan = [&] {
    Progress progress("scanning " + f.dir);
    const int threads =
        static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 16));
    return ScanDataset(
        f.dir, threads, [&](int64_t done, int64_t total) { progress.Show(done, total); },
        f.rescan || cache.empty() ? ScanCache{} : LoadScanCache(cache));
  }();
  if (!scan) return Failure(scan.error().message);
  // Kept once the push is done (a cache is only what a push found).
  auto keep_cache = [&] {
    if (cache.empty()) return;
    if (Status saved = SaveScanCache(cache, scan->cache); !saved) {
      std::cerr << "gpupool: " << saved.error().message << " (the next push reads every file)\n";
    }
  };
  for (const std::string& skipped : scan->skipped) {
    std::cerr << "gpupool: left out " << skipped << "\n";
  }
  if (const proto::DatasetVersionView* latest = Latest(*dataset);
      latest != nullptr && latest->manifest == scan->manifest_sha256 && !f.common.json) {
    std::cout << dataset->name << "@" << latest->version << " (" << dataset->id
              << ") is unchanged: " << scan->files << " file(s), " << FormatBytes(scan->bytes)
              << "; nothing sent\n";
    keep_cache();
    return kExitOk;
  }
  const double scan_s = Seconds(started);
  const auto sending = std::chrono::steady_clock::now();
  Result<PushSent> sent = [&] {
    Progress progress("sending to " + dataset->id);
    return SendDataset(s.client(), dataset->id, *scan, f.parallel,
                       [&](int64_t done, int64_t total) { progress.Show(done, total); });
  }();
  if (!sent) return ApiFailure(sent.error());
  keep_cache();
  const double send_s = Seconds(sending);
  if (f.common.json) {
    PrintJson(proto::Encode(sent->dataset));
    return kExitOk;
  }
  const proto::DatasetVersionView* v = Latest(sent->dataset);
  const double share =
      scan->bytes > 0 ? 100.0 * static_cast<double>(sent->bytes) / static_cast<double>(scan->bytes)
                      : 0.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "%s%.1f%% of it: %lld chunk(s); scanned in %.1f s (%s read), sent in %.1f s",
                share > 0 && share < 0.1 ? "< " : "", std::max(share, share > 0 ? 0.1 : 0.0),
                static_cast<long long>(sent->chunks), scan_s, FormatBytes(scan->read_bytes).c_str(),
                send_s);
  std::cout << sent->dataset.name << "@" << (v ? v->version : 0) << " (" << sent->dataset.id
            << "): " << scan->files << " file(s), " << FormatBytes(scan->bytes) << "; sent "
            << FormatBytes(sent->bytes) << ", " << line << "\n";
  return kExitOk;
}

// "NAME@3" → ("NAME", 3); "NAME" → ("NAME", 0). False when the version is not a number ≥ 1.
bool SplitVersion(const std::string& text, std::string* name, int32_t* version) {
  const size_t at = text.find('@');
  *name = text.substr(0, at);
  *version = 0;
  if (at == std::string::npos) return true;
  const char* begin = text.data() + at + 1;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(begin, end, *version);
  return begin != end && ec == std::errc() && p == end && *version >= 1;
}

CLI::App* AddCommand(CLI::App& parent, int& exit_code, const std::string& name,
                     const std::string& help, const std::shared_ptr<DatasetState>& f,
                     const std::string& arg_help,
                     std::function<int(Session&, const DatasetState&)> run) {
  CLI::App* cmd = parent.add_subcommand(name, help);
  if (!arg_help.empty()) cmd->add_option("dataset", f->dataset, arg_help)->required();
  AddCommonFlags(cmd, &f->common);
  OnRun(cmd, exit_code, [f, run = std::move(run)] {
    return WithSession(f->common, [&](Session& s) { return run(s, *f); });
  });
  return cmd;
}

}  // namespace

void AddDatasetCommands(CLI::App& app, int& exit_code) {
  CLI::App* dataset = app.add_subcommand(
      "dataset", "Datasets: read-only, versioned directories of files that tasks mount");
  dataset->require_subcommand(1);
  const std::string which = "The dataset: its name, or its id (d-12)";

  auto push = std::make_shared<DatasetState>();
  CLI::App* p = dataset->add_subcommand(
      "push",
      "Push a directory as a dataset's new version (creating the dataset on its first push): "
      "only the chunks its project lacks are sent");
  p->add_option("dir", push->dir, "The local directory: every regular file below it")->required();
  p->add_option("name", push->dataset,
                "The dataset: its name (a-z 0-9 _ . -, unique in the project; created on its first "
                "push) or its id (d-12)")
      ->required();
  AddOptional(p, "--project", &push->project, "PROJECT", "Its project (default: your only one)");
  p->add_option("--parallel", push->parallel, "Connections to send chunks over (default 4)");
  p->add_flag("--rescan", push->rescan,
              "Read every file, even those whose size, modification time and inode are as the "
              "last push from this directory found them (whose chunks are otherwise taken from "
              "its scan cache, in ~/.cache/gpupool)");
  AddCommonFlags(p, &push->common);
  OnRun(p, exit_code,
        [push] { return WithSession(push->common, [&](Session& s) { return Push(s, *push); }); });

  auto list = std::make_shared<DatasetState>();
  CLI::App* ls =
      AddCommand(*dataset, exit_code, "ls", "The datasets of your projects and the published ones",
                 list, "", [](Session& s, const DatasetState& f) {
                   proto::DatasetListQuery q;
                   q.project = f.project.value_or("");
                   return PrintAnswer(s.client().Datasets().List(q), f.common.json, PrintDatasets);
                 });
  AddOptional(ls, "--project", &list->project, "PROJECT", "Only this project's (and published)");

  AddCommand(*dataset, exit_code, "show", "A dataset and its versions",
             std::make_shared<DatasetState>(), which, [](Session& s, const DatasetState& f) {
               return PrintAnswer(s.client().Datasets().Get(f.dataset), f.common.json,
                                  PrintDataset);
             });

  AddCommand(*dataset, exit_code, "rm",
             "Delete a dataset, or one version of it (NAME@3), that no live task mounts",
             std::make_shared<DatasetState>(), "The dataset (its name or id), or NAME@VERSION",
             [](Session& s, const DatasetState& f) {
               std::string name;
               int32_t version = 0;
               if (!SplitVersion(f.dataset, &name, &version)) {
                 return UsageError("'" + f.dataset + "': the version after @ must be a number ≥ 1");
               }
               if (version == 0) {
                 return PrintAnswer(
                     s.client().Datasets().Delete(name), f.common.json,
                     [](const proto::Deleted& d) { std::cout << "deleted " << d.id << "\n"; });
               }
               return PrintAnswer(s.client().Datasets().DeleteVersion(name, version), f.common.json,
                                  [&](const proto::DatasetView& d) {
                                    std::cout << "deleted " << d.name << "@" << version << " ("
                                              << d.id << ")\n";
                                  });
             });

  auto publish = std::make_shared<DatasetState>();
  CLI::App* pub =
      AddCommand(*dataset, exit_code, "publish",
                 "Publish a dataset to every project, which may then mount it read-only (admins)",
                 publish, which, [](Session& s, const DatasetState& f) {
                   proto::DatasetUpdate body;
                   body.published = !f.off;
                   return PrintAnswer(s.client().Datasets().Update(f.dataset, body), f.common.json,
                                      [](const proto::DatasetView& d) {
                                        std::cout << d.name << " (" << d.id << ") is "
                                                  << (d.published ? "published to every project"
                                                                  : "its project's only")
                                                  << "\n";
                                      });
                 });
  pub->add_flag("--off", publish->off, "Take it back: only its project may mount it");
}

}  // namespace gpupool::cli
