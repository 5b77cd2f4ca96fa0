#include "core/chunker.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/test_bytes.h"

namespace gpupool {
namespace {

// Chunk lengths of `data` fed in pieces of `piece` bytes.
std::vector<int64_t> Lengths(std::string_view data, size_t piece, ChunkSizes sizes = {}) {
  Chunker chunker(sizes);
  std::vector<int64_t> out;
  while (!data.empty()) {
    const std::string_view p = data.substr(0, piece);
    const size_t used = chunker.Feed(p);
    if (chunker.at_boundary()) out.push_back(chunker.current());
    data.remove_prefix(used);
  }
  if (!chunker.at_boundary() && chunker.current() > 0) out.push_back(chunker.current());
  return out;
}

TEST(Chunker, BoundariesDoNotDependOnHowTheStreamIsSplit) {
  const std::string data = RandomBytes(12 << 20, 1);
  const std::vector<int64_t> whole = Lengths(data, data.size());
  EXPECT_EQ(Lengths(data, 4096), whole);
  EXPECT_EQ(Lengths(data, 1 << 20), whole);
  EXPECT_EQ(Lengths(data, 777), whole);
  int64_t total = 0;
  for (int64_t n : whole) total += n;
  EXPECT_EQ(total, static_cast<int64_t>(data.size()));
}

TEST(Chunker, ChunksStayWithinTheSizesAndAverageNearTheTarget) {
  const ChunkSizes sizes;
  const std::vector<int64_t> lengths = Lengths(RandomBytes(64 << 20, 2), 1 << 16);
  ASSERT_GT(lengths.size(), 20u);
  for (size_t i = 0; i + 1 < lengths.size(); ++i) {  // the last one is the stream's end
    EXPECT_GE(lengths[i], sizes.min);
    EXPECT_LE(lengths[i], sizes.max);
  }
  const double mean = (64 << 20) / static_cast<double>(lengths.size());
  EXPECT_GT(mean, 0.6 * static_cast<double>(sizes.avg));
  EXPECT_LT(mean, 1.6 * static_cast<double>(sizes.avg));
}

TEST(Chunker, UniformBytesEndAtTheMaximum) {
  const ChunkSizes sizes;
  const std::vector<int64_t> lengths = Lengths(std::string(10 << 20, '\0'), 1 << 20);
  ASSERT_EQ(lengths.size(), 3u);
  EXPECT_EQ(lengths[0], sizes.max);
  EXPECT_EQ(lengths[1], sizes.max);
  EXPECT_EQ(lengths[2], (10 << 20) - 2 * sizes.max);
}

// The point of content-defined chunking: bytes inserted in the middle change the chunks around
// them only; those before and after keep their contents (the addresses a store dedupes by).
TEST(Chunker, AnInsertionChangesOnlyTheChunksAroundIt) {
  const std::string before = RandomBytes(32 << 20, 3);
  std::string after = before;
  after.insert(16 << 20, "a few inserted bytes");
  auto contents = [](const std::string& data) {
    std::set<std::string> out;
    size_t at = 0;
    for (int64_t n : Lengths(data, 1 << 20)) {
      out.insert(data.substr(at, static_cast<size_t>(n)));
      at += static_cast<size_t>(n);
    }
    return out;
  };
  const std::set<std::string> a = contents(before);
  const std::set<std::string> b = contents(after);
  size_t shared = 0;
  for (const std::string& c : b) shared += a.count(c);
  EXPECT_GE(shared + 2, a.size());  // at most the chunk holding the edit (and its neighbour) differ
  EXPECT_LT(shared, a.size());      // and the edit did change something
}

}  // namespace
}  // namespace gpupool
