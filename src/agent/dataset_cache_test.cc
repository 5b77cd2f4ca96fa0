// The node's dataset cache against a real HTTP server that serves a dataset's chunks as the
// server's agent route does (unverified): a version is built once and read-only, a second ask
// (also one racing the first, or after a restart) fetches nothing, a new version hard-links the
// files it shares with one here and fetches only the rest, a corrupt chunk or a path leaving
// the version fails the build and leaves nothing, and eviction removes the least recently used
// versions no task mounts.
#include "agent/dataset_cache.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "api/http_server.h"
#include "core/test_bytes.h"
#include "os/sha256.h"
#include "os/test_files.h"
#include "proto/json_codec.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kChunkRoute = "/v1/agent/datasets/d-1/chunks/";

void Write(const std::string& path, const std::string& bytes, fs::perms perms = fs::perms{0644}) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  fs::permissions(path, perms);
}

struct stat Stat(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st;
}

class DatasetCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "dataset_cache_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    store_ = os::ChunkDir(base_ + "/store");
    node_chunks_ = os::ChunkDir(base_ + "/chunks");
    api::HttpServerOptions options;
    options.threads = 2;
    server_ = std::make_unique<api::HttpServer>(
        options, [this](api::HttpRequest request, api::Responder respond) {
          const std::string_view path = request.Path();
          if (!path.starts_with(kChunkRoute)) {
            return respond(api::ErrorResponse(ErrorCode::kNotFound, "no such route"));
          }
          const std::string sha(path.substr(kChunkRoute.size()));
          ++requests_;
          Result<std::string> bytes = store_.Get(sha, /*verify=*/false);
          if (!bytes) return respond(api::ErrorResponse(bytes.error()));
          api::HttpResponse r;
          r.content_type = "application/octet-stream";
          r.body = corrupt_ == sha ? "bit rot" : std::move(*bytes);
          respond(std::move(r));
        });
    ASSERT_TRUE(server_->Start());
    client_ = std::make_unique<api::Client>("http://127.0.0.1:" + std::to_string(server_->port()),
                                            "", "");
    Reopen(int64_t{1} << 40);
  }
  void TearDown() override {
    server_->Stop();
    cache_.reset();
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(base_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory()) fs::permissions(it->path(), fs::perms::owner_all, ec);
    }
    fs::remove_all(base_);
  }

  void Reopen(int64_t max_bytes, int64_t chunk_cache_bytes = -1) {
    cache_.reset();
    Result<std::unique_ptr<DatasetCache>> opened =
        DatasetCache::Open(base_ + "/datasets", node_chunks_, max_bytes, chunk_cache_bytes);
    ASSERT_TRUE(opened) << opened.error().message;
    cache_ = std::move(*opened);
  }

  // `files` (path → bytes) pushed as a version into the server's store: its manifest's name.
  std::string Push(const std::map<std::string, std::string>& files, const std::string& dir) {
    const std::string src = base_ + "/" + dir;
    for (const auto& [path, bytes] : files) {
      Write(src + "/" + path, bytes, path.ends_with(".sh") ? fs::perms{0755} : fs::perms{0644});
    }
    Result<Capture> capture = CaptureWorkspace(src, {}, store_, [](bool) -> Status { return {}; });
    EXPECT_TRUE(capture) << capture.error().message;
    EXPECT_TRUE(SealCapture(*capture, store_));
    return capture->manifest_sha256;
  }

  Result<Materialized> Materialize(const std::string& manifest) {
    return cache_->Materialize(*client_, DatasetMount{.dataset_id = "d-1", .manifest = manifest}, 2,
                               nullptr);
  }

  std::string base_;
  os::ChunkDir store_{""};  // the server's chunk store of the dataset's project
  os::ChunkDir node_chunks_{""};
  std::string corrupt_;  // a chunk the server sends damaged
  std::atomic<int> requests_{0};
  std::unique_ptr<api::HttpServer> server_;
  std::unique_ptr<api::Client> client_;
  std::unique_ptr<DatasetCache> cache_;
};

TEST_F(DatasetCacheTest, AVersionIsBuiltOnceReadOnlyAndASecondAskFetchesNothing) {
  const std::string model = RandomBytes(3 << 20, 1);
  const std::string manifest =
      Push({{"model.bin", model}, {"labels/a.txt", "cat\n"}, {"run.sh", "#!/bin/sh\n"}}, "v1");
  Result<Materialized> first = Materialize(manifest);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_TRUE(first->built);
  EXPECT_EQ(first->files, 3);
  EXPECT_EQ(first->linked_files, 0);
  EXPECT_GT(first->fetched_chunks, 3);  // the manifest, the model's chunks, the small files'
  EXPECT_EQ(first->fetched_chunks, requests_.load());
  EXPECT_EQ(first->dir, cache_->FilesDir(manifest));
  EXPECT_EQ(ReadFileBytes(first->dir + "/model.bin"), model);
  EXPECT_EQ(ReadFileBytes(first->dir + "/labels/a.txt"), "cat\n");
  // Readable by any uid, writable by none.
  EXPECT_EQ(Stat(first->dir + "/model.bin").st_mode & 07777, 0444u);
  EXPECT_EQ(Stat(first->dir + "/run.sh").st_mode & 07777, 0555u);
  EXPECT_EQ(Stat(first->dir + "/labels").st_mode & 07777, 0555u);
  EXPECT_EQ(Stat(first->dir).st_mode & 07777, 0555u);
  EXPECT_EQ(cache_->Held(10), std::vector<std::string>{manifest});

  const int asked = requests_.load();
  Result<Materialized> again = Materialize(manifest);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->built);
  EXPECT_EQ(again->dir, first->dir);
  EXPECT_EQ(again->fetched_chunks, 0);
  // A restarted agent knows the versions it built.
  Reopen(int64_t{1} << 40);
  EXPECT_EQ(cache_->Held(10), std::vector<std::string>{manifest});
  Result<Materialized> restarted = Materialize(manifest);
  ASSERT_TRUE(restarted);
  EXPECT_FALSE(restarted->built);
  EXPECT_EQ(requests_.load(), asked);
}

TEST_F(DatasetCacheTest, AVersionLargerThanTheChunkCacheIsWrittenInGroupsWithinItsSize) {
  Reopen(int64_t{1} << 40, /*chunk_cache_bytes=*/int64_t{3} << 20);
  std::map<std::string, std::string> files;
  for (int i = 0; i < 6; ++i) files["shard-" + std::to_string(i)] = RandomBytes(1 << 20, 10 + i);
  const std::string manifest = Push(files, "v1");
  Result<Materialized> built = Materialize(manifest);
  ASSERT_TRUE(built) << built.error().message;
  for (const auto& [path, bytes] : files) EXPECT_EQ(ReadFileBytes(built->dir + "/" + path), bytes);
  // 6 MiB went through a 3 MiB chunk cache, trimmed after each group of 1.5 MiB of files.
  int64_t cached = 0;
  ASSERT_TRUE(node_chunks_.ForEach([&](const os::ChunkDir::Entry& e) { cached += e.size; }));
  EXPECT_LE(cached, int64_t{3} << 20);
  EXPECT_GT(built->fetched_bytes, int64_t{6} << 20);
}

TEST_F(DatasetCacheTest, TasksAskingForTheSameVersionAtOnceWaitForOneBuild) {
  const std::string manifest =
      Push({{"a.bin", RandomBytes(2 << 20, 2)}, {"b.bin", RandomBytes(2 << 20, 3)}}, "v1");
  std::vector<Result<Materialized>> results(4, MakeError(ErrorCode::kInternal, "not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      api::Client client("http://127.0.0.1:" + std::to_string(server_->port()), "", "");
      results[i] = cache_->Materialize(
          client, DatasetMount{.dataset_id = "d-1", .manifest = manifest}, 2, nullptr);
    });
  }
  for (std::thread& t : threads) t.join();
  int built = 0;
  int64_t fetched = 0;
  for (const Result<Materialized>& r : results) {
    ASSERT_TRUE(r) << r.error().message;
    built += r->built ? 1 : 0;
    fetched += r->fetched_chunks;
  }
  EXPECT_EQ(built, 1);
  EXPECT_EQ(fetched, requests_.load()) << "every chunk was fetched once";
}

TEST_F(DatasetCacheTest, ANewVersionLinksTheUnchangedFilesAndFetchesOnlyTheChangedOnes) {
  const std::string big = RandomBytes(4 << 20, 4);
  const std::string v1 = Push({{"big.bin", big}, {"notes.txt", "v1\n"}}, "v1");
  ASSERT_TRUE(Materialize(v1));
  // The node's chunk cache lost everything: only the version's files hold the bytes.
  ASSERT_TRUE(node_chunks_.Trim(0));
  const std::string v2 = Push({{"big.bin", big}, {"notes.txt", "v2, changed\n"}}, "v2");
  ASSERT_NE(v2, v1);
  const int asked = requests_.load();
  Result<Materialized> second = Materialize(v2);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_TRUE(second->built);
  EXPECT_EQ(second->linked_files, 1);
  EXPECT_EQ(second->linked_bytes, 4 << 20);
  EXPECT_EQ(second->fetched_chunks, 2) << "its manifest and the changed file's one chunk";
  EXPECT_EQ(requests_.load() - asked, 2);
  EXPECT_EQ(ReadFileBytes(second->dir + "/notes.txt"), "v2, changed\n");
  EXPECT_EQ(ReadFileBytes(second->dir + "/big.bin"), big);
  EXPECT_EQ(Stat(second->dir + "/big.bin").st_ino, Stat(cache_->FilesDir(v1) + "/big.bin").st_ino);
  EXPECT_EQ(cache_->Held(10), (std::vector<std::string>{v2, v1}));
}

TEST_F(DatasetCacheTest, ACorruptChunkFailsTheBuildNamingItAndLeavesNoVersion) {
  const std::string manifest = Push({{"weights.pt", RandomBytes(1 << 20, 5)}}, "v1");
  Result<proto::SnapshotManifest> pushed = [&] {
    Restored counts;
    return LoadManifest(*client_, ChunkSource::Dataset("d-1"), manifest, store_, counts);
  }();
  ASSERT_TRUE(pushed);
  corrupt_ = pushed->files.at(0).chunks.at(0);
  Result<Materialized> failed = Materialize(manifest);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code, ErrorCode::kInternal);
  EXPECT_NE(failed.error().message.find("chunk " + corrupt_ + " from the server is corrupt"),
            std::string::npos)
      << failed.error().message;
  EXPECT_TRUE(cache_->Held(10).empty());
  EXPECT_FALSE(fs::exists(base_ + "/datasets/" + manifest));
  EXPECT_TRUE(fs::is_empty(base_ + "/datasets/tmp"));
  // Sent intact again: built.
  corrupt_.clear();
  Result<Materialized> built = Materialize(manifest);
  ASSERT_TRUE(built) << built.error().message;
  EXPECT_TRUE(built->built);
}

TEST_F(DatasetCacheTest, AManifestNamingAFileOutsideTheVersionIsRefused) {
  proto::SnapshotManifest evil;
  proto::ManifestFile f;
  f.path = "../escaped";
  const std::string bytes = "x";
  f.size = 1;
  f.chunks = {os::Sha256Hex(bytes)};
  ASSERT_TRUE(store_.Put(f.chunks[0], bytes));
  evil.files.push_back(f);
  const std::string text = proto::ManifestPieces(evil).at(0);
  const std::string manifest = os::Sha256Hex(text);
  ASSERT_TRUE(store_.Put(manifest, text));
  Result<Materialized> refused = Materialize(manifest);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("'..'"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(fs::exists(base_ + "/datasets/escaped"));
  EXPECT_TRUE(fs::is_empty(base_ + "/datasets/tmp"));
}

TEST_F(DatasetCacheTest, EvictionRemovesTheLeastRecentlyUsedVersionsNoTaskMounts) {
  Reopen(int64_t{5} << 20);  // room for two versions of 2 MiB, not three
  const std::string a = Push({{"a.bin", RandomBytes(2 << 20, 6)}}, "a");
  const std::string b = Push({{"b.bin", RandomBytes(2 << 20, 7)}}, "b");
  const std::string c = Push({{"c.bin", RandomBytes(2 << 20, 8)}}, "c");
  ASSERT_TRUE(Materialize(a));
  ASSERT_TRUE(Materialize(b));
  Result<std::vector<std::string>> none = cache_->Evict();
  ASSERT_TRUE(none) << none.error().message;
  EXPECT_TRUE(none->empty()) << "within the size";
  ASSERT_TRUE(Materialize(a));  // used again: b is now the least recently used
  ASSERT_TRUE(Materialize(c));
  Result<std::vector<std::string>> evicted = cache_->Evict();
  ASSERT_TRUE(evicted) << evicted.error().message;
  EXPECT_EQ(*evicted, std::vector<std::string>{b});
  EXPECT_FALSE(fs::exists(base_ + "/datasets/" + b));
  EXPECT_EQ(cache_->Held(10), (std::vector<std::string>{c, a}));

  // Versions tasks mount stay, even over the size; b, mounted again, is built anew.
  cache_->SetInUse({a, c, b});
  Result<Materialized> rebuilt = Materialize(b);
  ASSERT_TRUE(rebuilt);
  EXPECT_TRUE(rebuilt->built);
  evicted = cache_->Evict();
  ASSERT_TRUE(evicted);
  EXPECT_TRUE(evicted->empty());
  EXPECT_EQ(cache_->Held(10).size(), 3u);
  cache_->SetInUse({b});
  evicted = cache_->Evict();
  ASSERT_TRUE(evicted);
  EXPECT_EQ(*evicted, std::vector<std::string>{a}) << "the least recently used unmounted one";
}

}  // namespace
}  // namespace gpupool::agent
