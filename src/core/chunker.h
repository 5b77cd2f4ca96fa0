// Content-defined chunking (FastCDC's gear hash with normalised chunking) of the bytes that
// snapshots and datasets store content-addressed: a chunk boundary depends only on the bytes near
// it, so an edit moves the boundaries around it and no others, and unchanged data keeps its chunks
// (and their SHA-256 addresses) across versions of a file. Pure: the caller reads and hashes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace gpupool {

struct ChunkSizes {
  int64_t min = 256 * 1024;       // no boundary before this many bytes
  int64_t avg = 1024 * 1024;      // the expected size (a power of two)
  int64_t max = 4 * 1024 * 1024;  // a boundary here at the latest
};

// Finds the boundaries of a stream fed piece by piece. The state is the position in the current
// chunk and the rolling hash, so the boundaries do not depend on how the stream is split into
// pieces.
class Chunker {
 public:
  explicit Chunker(ChunkSizes sizes = {});

  // How many bytes of `data` belong to the current chunk: data.size() when it does not end in
  // `data` (feed more), else the bytes up to and including its last (the chunk is complete; the
  // rest of `data` starts the next one, fed again by the caller).
  size_t Feed(std::string_view data);
  // Whether the last Feed completed a chunk (the next Feed starts a new one).
  bool at_boundary() const { return at_boundary_; }
  // Bytes in the current chunk so far.
  int64_t current() const { return length_; }

 private:
  ChunkSizes sizes_;
  uint64_t mask_small_;  // more bits than avg's: boundaries rarer before avg
  uint64_t mask_large_;  // fewer bits: more likely past avg (normalised chunking)
  uint64_t hash_ = 0;
  int64_t length_ = 0;
  bool at_boundary_ = false;
};

}  // namespace gpupool
