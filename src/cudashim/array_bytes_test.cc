// ArrayBytes: the data size of CUDA arrays and mipmapped arrays, saturating on absurd descriptors.
#include "cudashim/array_bytes.h"

#include <gtest/gtest.h>

#include <limits>

namespace gpupool::cudashim {
namespace {

CUDA_ARRAY3D_DESCRIPTOR Desc(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels,
                             unsigned flags = 0) {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Width = w;
  desc.Height = h;
  desc.Depth = d;
  desc.Format = f;
  desc.NumChannels = channels;
  desc.Flags = flags;
  return desc;
}

TEST(ArrayBytes, PlainFormatsCountTheirElements) {
  EXPECT_EQ(ArrayBytes(Desc(1024, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1), 1), 1024u);  // 1D
  EXPECT_EQ(ArrayBytes(Desc(512, 256, 0, CU_AD_FORMAT_FLOAT, 1), 1), 512u * 256 * 4);
  EXPECT_EQ(ArrayBytes(Desc(64, 64, 8, CU_AD_FORMAT_HALF, 4), 1), 64u * 64 * 8 * 2 * 4);
  EXPECT_EQ(ArrayBytes(Desc(16, 16, 0, CU_AD_FORMAT_SNORM_INT16X2, 2), 1), 16u * 16 * 2 * 2);
}

TEST(ArrayBytes, OtherFormatsCountSixteenBytesPerElement) {
  EXPECT_EQ(ArrayBytes(Desc(100, 100, 0, CU_AD_FORMAT_BC7_UNORM, 4), 1), 100u * 100 * 16);
  EXPECT_EQ(ArrayBytes(Desc(100, 100, 0, CU_AD_FORMAT_NV12, 3), 1), 100u * 100 * 16);
}

TEST(ArrayBytes, MipLevelsHalveEachDimensionDownToOne) {
  // 256×256 + 128×128 + 64×64 floats.
  EXPECT_EQ(ArrayBytes(Desc(256, 256, 0, CU_AD_FORMAT_FLOAT, 1), 3),
            (256u * 256 + 128 * 128 + 64 * 64) * 4);
  // A 4×1 array over 5 levels: 4, 2, 1, 1, 1 elements.
  EXPECT_EQ(ArrayBytes(Desc(4, 1, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1), 5), 9u);
  // Layers keep their count at every level.
  EXPECT_EQ(ArrayBytes(Desc(8, 8, 3, CU_AD_FORMAT_UNSIGNED_INT8, 1, CUDA_ARRAY3D_LAYERED), 2),
            (8u * 8 + 4 * 4) * 3);
}

TEST(ArrayBytes, AbsurdDescriptorsSaturate) {
  const size_t huge = std::numeric_limits<size_t>::max();
  EXPECT_EQ(ArrayBytes(Desc(huge, huge, huge, CU_AD_FORMAT_FLOAT, 4), 1),
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(ArrayBytes(Desc(1, 1, 1, CU_AD_FORMAT_FLOAT, 4), 4000000000u),
            uint64_t{16} * 4000000000u);
}

}  // namespace
}  // namespace gpupool::cudashim
