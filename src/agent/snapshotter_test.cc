// The capture and restore of a workspace through the node's chunk cache (the transfer to the
// server is covered by tests/snapshot_e2e_test.cc): incremental captures read only what changed,
// the task is frozen exactly around the walk, a restore rebuilds the files byte for byte, and a
// corrupt chunk fails it rather than producing damaged files.
#include "agent/snapshotter.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/test_bytes.h"
#include "core/unique_fd.h"
#include "os/test_files.h"

namespace gpupool::agent {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

class SnapshotterTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(testing::TempDir()) / "snapshotter_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    base_ = tmpl;
    workspace_ = base_ + "/workspace";
    cache_ = os::ChunkDir(base_ + "/cache");
    fs::create_directories(workspace_);
  }
  void TearDown() override { fs::remove_all(base_); }

  Result<Capture> CaptureNow(const ScanIndex& previous) {
    return Sealed(CaptureWorkspace(workspace_, previous, cache_, [this](bool frozen) -> Status {
      freezes_.push_back(frozen);
      return {};
    }));
  }
  Result<Capture> Sealed(Result<Capture> capture) {
    if (capture) {
      if (Status s = SealCapture(*capture, cache_); !s) return tl::unexpected(s.error());
    }
    return capture;
  }

  std::string base_;
  std::string workspace_;
  os::ChunkDir cache_{""};
  std::vector<bool> freezes_;
  api::Client offline_{"http://127.0.0.1:1", "", ""};  // a restore from the cache asks nothing
};

TEST_F(SnapshotterTest, ASecondCaptureReadsOnlyWhatChanged) {
  Write(workspace_ + "/model.bin", RandomBytes(6 << 20, 1));
  Write(workspace_ + "/logs/step.txt", "step 1\n");
  Result<Capture> first = CaptureNow({});
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(freezes_, (std::vector<bool>{true, false}));
  EXPECT_EQ(first->files, 2);
  EXPECT_EQ(first->bytes, (6 << 20) + 7);
  EXPECT_EQ(first->read_bytes, first->bytes);
  EXPECT_EQ(first->manifest.dirs, std::vector<std::string>{"logs"});
  EXPECT_TRUE(cache_.Has(first->manifest_sha256));

  // Unchanged: nothing read, the same manifest.
  Result<Capture> same = CaptureNow(first->index);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->read_bytes, 0);
  EXPECT_EQ(same->manifest_sha256, first->manifest_sha256);

  Write(workspace_ + "/logs/step.txt", "step 2\n");
  Result<Capture> next = CaptureNow(same->index);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->read_bytes, 7);
  EXPECT_NE(next->manifest_sha256, first->manifest_sha256);
}

TEST_F(SnapshotterTest, RestoreRebuildsTheFilesFromTheCache) {
  const std::string model = RandomBytes(9 << 20, 2);
  Write(workspace_ + "/model.bin", model);
  Write(workspace_ + "/a/b/empty.txt", "");
  fs::permissions(workspace_ + "/model.bin", fs::perms::owner_read | fs::perms::owner_exec);
  Result<Capture> capture = CaptureNow({});
  ASSERT_TRUE(capture) << capture.error().message;
  const std::string out = base_ + "/restored";
  Result<Restored> restored =
      RestoreWorkspace(offline_, ChunkSource::Task("t-1"), capture->manifest_sha256, cache_, out,
                       /*keep_existing=*/false, 2, nullptr);
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_EQ(restored->fetched_chunks, 0);
  EXPECT_EQ(restored->files, 2);
  EXPECT_EQ(ReadFileBytes(out + "/model.bin"), model);
  EXPECT_TRUE(fs::exists(out + "/a/b/empty.txt"));
  struct stat st {};
  ASSERT_EQ(stat((out + "/model.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0500u);
  // The restored files' index lets the next capture skip them.
  Result<Capture> again =
      Sealed(CaptureWorkspace(out, restored->index, cache_, [](bool) -> Status { return {}; }));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->read_bytes, 0);
  EXPECT_EQ(again->manifest_sha256, capture->manifest_sha256);
}

TEST_F(SnapshotterTest, ASavedImagesArchiveTravelsInTheManifest) {
  Write(workspace_ + "/step.txt", "7\n");
  const std::string archive = RandomBytes(3 << 20, 4);
  Write(base_ + "/image.tar", archive);
  UniqueFd fd(open((base_ + "/image.tar").c_str(), O_RDONLY | O_CLOEXEC));
  Result<proto::ManifestFile> chunked = ChunkIntoCache(fd.get(), "image.tar", cache_);
  ASSERT_TRUE(chunked) << chunked.error().message;
  EXPECT_EQ(chunked->size, 3 << 20);
  Result<Capture> capture =
      CaptureWorkspace(workspace_, {}, cache_, [](bool) -> Status { return {}; });
  ASSERT_TRUE(capture);
  capture->manifest.image =
      proto::ManifestImage{"sha256:" + std::string(64, 'e'), "busybox:1", *chunked};
  ASSERT_TRUE(SealCapture(*capture, cache_));
  Result<Restored> restored =
      RestoreWorkspace(offline_, ChunkSource::Task("t-1"), capture->manifest_sha256, cache_,
                       base_ + "/restored", false, 2, nullptr);
  ASSERT_TRUE(restored) << restored.error().message;
  ASSERT_TRUE(restored->image);
  EXPECT_EQ(restored->image->base, "busybox:1");
  EXPECT_EQ(restored->files, 1) << "the archive is not a workspace file";
  fs::create_directories(base_ + "/image");
  Result<Restored> files =
      RestoreFiles(offline_, ChunkSource::Task("t-1"), {restored->image->archive}, cache_,
                   base_ + "/image", 2, nullptr);
  ASSERT_TRUE(files) << files.error().message;
  EXPECT_EQ(ReadFileBytes(base_ + "/image/image.tar"), archive);
}

// A workspace whose manifest exceeds a chunk: stored as parts under a root, restored whole.
TEST_F(SnapshotterTest, AManifestOfManyFilesIsStoredInPartsAndRestoredWhole) {
  const std::string name(120, 'n');
  constexpr int kFiles = 30'000;
  for (int i = 0; i < kFiles; ++i) {
    const std::string dir = workspace_ + "/d" + std::to_string(i % 100);
    if (i < 100) fs::create_directories(dir);
    std::ofstream(dir + "/" + name + std::to_string(i)) << i;
  }
  Result<Capture> capture = CaptureNow({});
  ASSERT_TRUE(capture) << capture.error().message;
  EXPECT_EQ(capture->files, kFiles);
  EXPECT_GT(capture->manifest.parts.size(), 1u);
  for (const std::string& part : capture->manifest.parts) EXPECT_TRUE(cache_.Has(part));
  Result<Restored> restored =
      RestoreWorkspace(offline_, ChunkSource::Task("t-1"), capture->manifest_sha256, cache_,
                       base_ + "/restored", false, 2, nullptr);
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_EQ(restored->files, kFiles);
  EXPECT_EQ(ReadFileBytes(base_ + "/restored/d7/" + name + "29907"), "29907");
}

TEST_F(SnapshotterTest, ACorruptChunkFailsTheRestoreNamingTheFile) {
  Write(workspace_ + "/weights.pt", RandomBytes(1 << 20, 3));
  Result<Capture> capture = CaptureNow({});
  ASSERT_TRUE(capture);
  const std::string sha = capture->manifest.files.at(0).chunks.at(0);
  std::ofstream(cache_.PathOf(sha), std::ios::binary | std::ios::trunc) << "bit rot";
  Result<Restored> restored =
      RestoreWorkspace(offline_, ChunkSource::Task("t-1"), capture->manifest_sha256, cache_,
                       base_ + "/restored", false, 1, nullptr);
  ASSERT_FALSE(restored);
  EXPECT_NE(restored.error().message.find("weights.pt"), std::string::npos)
      << restored.error().message;
  EXPECT_NE(restored.error().message.find("corrupt"), std::string::npos)
      << restored.error().message;
}

TEST_F(SnapshotterTest, AFailedFreezeFailsTheCaptureAndAFailedWalkStillThaws) {
  Write(workspace_ + "/x", "x");
  Result<Capture> refused = CaptureWorkspace(workspace_, {}, cache_, [](bool frozen) -> Status {
    if (frozen) return MakeError(ErrorCode::kFailedPrecondition, "no freezer");
    return {};
  });
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().message, "no freezer");
  std::vector<bool> calls;
  Result<Capture> missing =
      CaptureWorkspace(base_ + "/nowhere", {}, cache_, [&](bool frozen) -> Status {
        calls.push_back(frozen);
        return {};
      });
  ASSERT_FALSE(missing);
  EXPECT_TRUE(calls.empty());  // nothing to freeze for
}

}  // namespace
}  // namespace gpupool::agent
