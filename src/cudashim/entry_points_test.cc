// cuGetProcAddress's versioning rule over the entry-point table: base name + CUDA version + flags
// → the exported variant (as cuda.h's #defines and _ptsz variants name them).
#include "cudashim/entry_points.h"

#include <gtest/gtest.h>

#include <string>

namespace gpupool::cudashim {
namespace {

std::string Resolve(const char* symbol, int version, uint64_t flags) {
  const int i = ResolveEntryPoint(symbol, version, flags);
  return i < 0 ? "(none)" : kEntryPoints[i].name;
}

TEST(EntryPoints, TheVersionPicksTheVariant) {
  EXPECT_EQ(Resolve("cuMemAlloc", 13000, 0), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuMemAlloc", 3020, 0), "cuMemAlloc_v2");
  EXPECT_EQ(Resolve("cuMemAlloc", 3010, 0), "(none)");  // the 32-bit v1: not in the table
  EXPECT_EQ(Resolve("cuGetProcAddress", 11030, 0), "cuGetProcAddress");
  EXPECT_EQ(Resolve("cuGetProcAddress", 11080, 0), "cuGetProcAddress");
  EXPECT_EQ(Resolve("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
  EXPECT_EQ(Resolve("cuMemCreate", 10010, 0), "(none)");
  EXPECT_EQ(Resolve("cuMemCreate", 10020, 0), "cuMemCreate");
}

TEST(EntryPoints, PerThreadFlagsPickThePtszVariantWhereThereIsOne) {
  constexpr uint64_t kLegacy = 1, kPerThread = 2;
  EXPECT_EQ(Resolve("cuMemAllocAsync", 12000, 0), "cuMemAllocAsync");
  EXPECT_EQ(Resolve("cuMemAllocAsync", 12000, kLegacy), "cuMemAllocAsync");
  EXPECT_EQ(Resolve("cuMemAllocAsync", 12000, kPerThread), "cuMemAllocAsync_ptsz");
  EXPECT_EQ(Resolve("cuMemFreeAsync", 12000, kPerThread), "cuMemFreeAsync_ptsz");
  EXPECT_EQ(Resolve("cuMemAllocFromPoolAsync", 12000, kPerThread), "cuMemAllocFromPoolAsync_ptsz");
  // No per-thread variant: the legacy one.
  EXPECT_EQ(Resolve("cuMemAlloc", 12000, kPerThread), "cuMemAlloc_v2");
}

TEST(EntryPoints, UnknownSymbolsResolveToNothing) {
  EXPECT_EQ(Resolve("cuLaunchKernel", 13000, 0), "(none)");
  EXPECT_EQ(Resolve("cuMemAlloc_v2", 13000, 0), "(none)");  // a base name is asked, not a variant
  EXPECT_EQ(ResolveEntryPoint(nullptr, 13000, 0), -1);
}

TEST(EntryPoints, ExportedNamesAreFoundExactly) {
  EXPECT_EQ(FindEntryPointByName("cuMemAlloc_v2"), k_cuMemAlloc_v2);
  EXPECT_EQ(FindEntryPointByName("cuMemAllocAsync_ptsz"), k_cuMemAllocAsync_ptsz);
  EXPECT_EQ(FindEntryPointByName("cuMemAlloc"), -1);
  EXPECT_EQ(FindEntryPointByName(nullptr), -1);
}

}  // namespace
}  // namespace gpupool::cudashim
