// What a CUDA array is counted at (array_bytes.h).
#include "cudashim/array_bytes.h"

#include <algorithm>
#include <limits>

namespace gpupool::cudashim {

namespace {

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

uint64_t Multiply(uint64_t a, uint64_t b) {
  if (a != 0 && b > kSaturated / a) return kSaturated;
  return a * b;
}

uint64_t Add(uint64_t a, uint64_t b) { return b > kSaturated - a ? kSaturated : a + b; }

// Bytes of one element: per channel × channels for the plain formats, 16 otherwise.
uint64_t ElementBytes(CUarray_format format, unsigned channels) {
  uint64_t per_channel = 0;
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X4:
      per_channel = 1;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X4:
      per_channel = 2;
      break;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      per_channel = 4;
      break;
    default:
      return 16;
  }
  return per_channel * std::clamp(channels, 1u, 4u);
}

}  // namespace

uint64_t ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels) {
  const uint64_t element = ElementBytes(desc.Format, desc.NumChannels);
  const bool keeps_depth = (desc.Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
  uint64_t width = std::max<uint64_t>(desc.Width, 1);
  uint64_t height = std::max<uint64_t>(desc.Height, 1);
  uint64_t depth = std::max<uint64_t>(desc.Depth, 1);
  uint64_t total = 0;
  const unsigned count = std::max(levels, 1u);
  for (unsigned level = 0; level < count; ++level) {
    const uint64_t level_bytes = Multiply(Multiply(Multiply(width, height), depth), element);
    if (width == 1 && height == 1 && (depth == 1 || keeps_depth)) {
      // Every level from here on is this size: no need to walk a huge level count.
      return Add(total, Multiply(level_bytes, count - level));
    }
    total = Add(total, level_bytes);
    width = std::max<uint64_t>(width / 2, 1);
    height = std::max<uint64_t>(height / 2, 1);
    if (!keeps_depth) depth = std::max<uint64_t>(depth / 2, 1);
  }
  return total;
}

}  // namespace gpupool::cudashim
