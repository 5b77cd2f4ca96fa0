// The scan of `gpupool dataset push` (cli/dataset_push.h): what a directory's manifest lists,
// where each chunk's bytes are, and that an edit changes only the chunks around it. The send is
// exercised against a real server in tests/dataset_e2e_test.cc.
#include "cli/dataset_push.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/test_bytes.h"
#include "os/sha256.h"
#include "store/temp_dir.h"

namespace gpupool::cli {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadAt(const std::string& path, int64_t offset, int64_t size) {
  std::string out(static_cast<size_t>(size), '\0');
  const int fd = ::open(path.c_str(), O_RDONLY);
  EXPECT_EQ(::pread(fd, out.data(), out.size(), offset), size);
  ::close(fd);
  return out;
}

class DatasetScanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    root_ = dir_.path() + "/imagenet";
    Write(root_ + "/train/big.bin", RandomBytes(12 << 20, 1));
    Write(root_ + "/train/a.txt", "alpha\n");
    Write(root_ + "/labels.csv", "id,label\n1,cat\n");
    Write(root_ + "/empty", "");
    fs::create_symlink("/etc/passwd", root_ + "/link");
  }

  store::TempDir dir_;
  std::string root_;
};

TEST_F(DatasetScanTest, TheManifestListsEveryRegularFileAndWhereItsChunksAre) {
  Result<DatasetScan> scan = ScanDataset(root_, 3);
  ASSERT_TRUE(scan) << scan.error().message;
  std::vector<std::string> paths;
  for (const proto::ManifestFile& f : scan->manifest.files) paths.push_back(f.path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"empty", "labels.csv", "train/a.txt", "train/big.bin"}));
  EXPECT_EQ(scan->manifest.dirs, std::vector<std::string>{"train"});
  EXPECT_EQ(scan->files, 4);
  EXPECT_EQ(scan->bytes, (12 << 20) + 6 + 15);
  ASSERT_EQ(scan->skipped.size(), 1u);
  EXPECT_NE(scan->skipped[0].find("link: a symbolic link"), std::string::npos);
  // A 12 MiB file is several chunks (1 MiB on average, at most 4); each place holds the bytes
  // its name hashes, and a file's chunks cover it in order.
  const proto::ManifestFile& big = scan->manifest.files[3];
  EXPECT_GE(big.chunks.size(), 3u);
  int64_t offset = 0;
  for (const std::string& sha : big.chunks) {
    const ChunkPlace& place = scan->chunks.at(sha);
    EXPECT_EQ(place.offset, offset);
    EXPECT_EQ(os::Sha256Hex(ReadAt(scan->local[place.file], place.offset, place.size)), sha);
    offset += place.size;
  }
  EXPECT_EQ(offset, 12 << 20);
  EXPECT_TRUE(scan->manifest.files[0].chunks.empty());  // the empty file
  // The manifest is stored as its encoding, named by its SHA-256.
  ASSERT_EQ(scan->manifest_chunks.size(), 1u);
  EXPECT_EQ(os::Sha256Hex(scan->manifest_chunks.at(scan->manifest_sha256)), scan->manifest_sha256);
}

TEST_F(DatasetScanTest, ScansAreTheSameOnAnyThreadsAndAnEditChangesOnlyItsChunks) {
  Result<DatasetScan> one = ScanDataset(root_, 1);
  Result<DatasetScan> four = ScanDataset(root_, 4);
  ASSERT_TRUE(one && four);
  EXPECT_EQ(one->manifest_sha256, four->manifest_sha256);

  // One byte changed in the middle of the big file: the other chunks keep their names.
  const int fd = ::open((root_ + "/train/big.bin").c_str(), O_WRONLY);
  ASSERT_EQ(::pwrite(fd, "X", 1, 6 << 20), 1);
  ::close(fd);
  Result<DatasetScan> edited = ScanDataset(root_, 2);
  ASSERT_TRUE(edited);
  EXPECT_NE(edited->manifest_sha256, one->manifest_sha256);
  int64_t new_bytes = 0;
  for (const auto& [sha, place] : edited->chunks) {
    if (!one->chunks.contains(sha)) new_bytes += place.size;
  }
  EXPECT_GT(new_bytes, 0);
  EXPECT_LE(new_bytes, 8 << 20);  // at most the two chunks around the edit (4 MiB each)
}

TEST_F(DatasetScanTest, ACachedScanReadsOnlyTheFilesThatChangedSinceAndSavesItsCache) {
  Result<DatasetScan> first = ScanDataset(root_, 2);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->read_bytes, first->bytes);
  const std::string cache = dir_.path() + "/cache/scan";
  ASSERT_TRUE(SaveScanCache(cache, first->cache));
  const ScanCache loaded = LoadScanCache(cache);
  ASSERT_EQ(loaded.size(), 4u);
  EXPECT_EQ(loaded.at("train/big.bin").chunks, first->manifest.files[3].chunks);

  Result<DatasetScan> again = ScanDataset(root_, 2, {}, loaded);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->read_bytes, 0);
  EXPECT_EQ(again->manifest_sha256, first->manifest_sha256);
  EXPECT_EQ(again->chunks.size(), first->chunks.size());
  // A rewritten file (a new modification time) is read again, and only it.
  Write(root_ + "/labels.csv", "id,label\n1,cow\n");
  Result<DatasetScan> edited = ScanDataset(root_, 2, {}, loaded);
  ASSERT_TRUE(edited);
  EXPECT_EQ(edited->read_bytes, 15);
  EXPECT_NE(edited->manifest_sha256, first->manifest_sha256);
  EXPECT_EQ(edited->manifest.files[1].chunks,
            std::vector<std::string>{os::Sha256Hex("id,label\n1,cow\n")});
  // A cache that is not one this code wrote is no cache.
  Write(cache, "train/big.bin\t12\tnot-a-time\t1\t\n");
  EXPECT_TRUE(LoadScanCache(cache).empty());
  EXPECT_TRUE(LoadScanCache(dir_.path() + "/none").empty());
}

TEST_F(DatasetScanTest, OnlyADirectoryCanBePushed) {
  Result<DatasetScan> missing = ScanDataset(root_ + "/nope", 1);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  Result<DatasetScan> file = ScanDataset(root_ + "/labels.csv", 1);
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message.find("is not a directory"), std::string::npos);
}

}  // namespace
}  // namespace gpupool::cli
