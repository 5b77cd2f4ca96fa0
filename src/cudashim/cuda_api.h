// cuda.h of the installed CUDA toolkit, plus what the driver exports that cuda.h hides from a
// normal build: the CUDA 11.3 cuGetProcAddress under its plain name (cuda.h renames it to its
// _v2), and the per-thread-default-stream (_ptsz) variants it declares only for
// CUDA_API_PER_THREAD_DEFAULT_STREAM builds. The shim and the test driver define both.
#ifndef GPUPOOL_CUDASHIM_CUDA_API_H_
#define GPUPOOL_CUDASHIM_CUDA_API_H_

#include <cuda.h>

#undef cuGetProcAddress
extern "C" {
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
}

#endif  // GPUPOOL_CUDASHIM_CUDA_API_H_
