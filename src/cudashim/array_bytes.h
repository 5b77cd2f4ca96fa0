// The device memory a CUDA array or mipmapped array is counted at: its elements' data (width ×
// height × depth × bytes per element, every mip level), without the driver's padding and tiling,
// which no API tells before the array exists. Formats without a fixed element size in cuda.h's
// plain list (planar video, block-compressed) count 16 bytes per element, the largest any format
// has, so an estimate errs towards refusing, never towards letting more through.
#ifndef GPUPOOL_CUDASHIM_ARRAY_BYTES_H_
#define GPUPOOL_CUDASHIM_ARRAY_BYTES_H_

#include <cuda.h>

#include <cstdint>

namespace gpupool::cudashim {

// Saturates at UINT64_MAX (a descriptor no device could hold). `levels` counts mip levels (1 for
// a plain array); a layered or cubemap array keeps its depth (the layer count) at every level.
uint64_t ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels);

}  // namespace gpupool::cudashim

#endif  // GPUPOOL_CUDASHIM_ARRAY_BYTES_H_
