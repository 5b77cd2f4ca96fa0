// FastCDC (Xia et al., USENIX ATC'16): a gear hash rolled over the bytes, a boundary where its
// masked bits are zero, with a stricter mask before the average size and a looser one after.
#include "core/chunker.h"

#include <algorithm>
#include <array>
#include <bit>

namespace gpupool {
namespace {

// 256 fixed pseudo-random 64-bit values (SplitMix64 from a fixed seed): part of the stored
// format, since they decide every boundary. Never change them.
constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> gear{};
  uint64_t x = 0x6770'7570'6f6f'6c31;  // "gpupool1"
  for (uint64_t& g : gear) {
    x += 0x9e37'79b9'7f4a'7c15;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9;
    z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11eb;
    g = z ^ (z >> 31);
  }
  return gear;
}
constexpr std::array<uint64_t, 256> kGear = MakeGear();

// `bits` one-bits spread over the top of a 64-bit word (the gear hash's best-mixed bits).
uint64_t Mask(int bits) {
  uint64_t mask = 0;
  for (int i = 0; i < bits; ++i) mask |= uint64_t{1} << (63 - 2 * i);
  return mask;
}

}  // namespace

Chunker::Chunker(ChunkSizes sizes) : sizes_(sizes) {
  const int bits = std::bit_width(static_cast<uint64_t>(sizes_.avg)) - 1;
  mask_small_ = Mask(bits + 2);
  mask_large_ = Mask(bits - 2);
}

size_t Chunker::Feed(std::string_view data) {
  if (at_boundary_) {
    at_boundary_ = false;
    length_ = 0;
    hash_ = 0;
  }
  size_t i = 0;
  const size_t n = data.size();
  // Below min: no boundary can be here; the hash is not needed (it restarts at min).
  if (length_ < sizes_.min) {
    const size_t skip = static_cast<size_t>(std::min<int64_t>(sizes_.min - length_, n));
    i = skip;
    length_ += static_cast<int64_t>(skip);
  }
  while (i < n) {
    hash_ = (hash_ << 1) + kGear[static_cast<unsigned char>(data[i])];
    ++i;
    ++length_;
    const uint64_t mask = length_ < sizes_.avg ? mask_small_ : mask_large_;
    if ((hash_ & mask) == 0 || length_ >= sizes_.max) {
      at_boundary_ = true;
      return i;
    }
  }
  return n;
}

}  // namespace gpupool
