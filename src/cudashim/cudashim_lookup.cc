// A program without the CUDA driver for the interposer's tests: prints, for each name on its
// command line, whether dlsym(RTLD_DEFAULT, name) finds a function ("cuMemAlloc_v2 absent"), as
// a program probing for CUDA would. With --load it first dlopens libcuda.so.1 RTLD_GLOBAL.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  int i = 1;
  if (i < argc && std::strcmp(argv[i], "--load") == 0) {
    ++i;
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "cudashim_lookup: %s\n", dlerror());
      return 2;
    }
  }
  for (; i < argc; ++i) {
    std::printf("%s %s\n", argv[i], dlsym(RTLD_DEFAULT, argv[i]) != nullptr ? "found" : "absent");
  }
  return 0;
}
