#include "kernels/cuda/base/cublas_api.h"

#include <dlfcn.h>

#include <string>

namespace moetune::gpu {
namespace {

struct Loaded {
  CublasApi api;
  bool ok = false;
  std::string error;
};

template <typename Fn>
bool Resolve(void* library, const char* name, Fn* fn, std::string* error) {
  *fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (*fn == nullptr) *error = std::string("cuBLAS has no ") + name;
  return *fn != nullptr;
}

Loaded Load() {
  Loaded out;
  const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    // Not on the loader's path: the toolkit's own directory (this build's,
    // then the usual ones of a GPU host).
    const std::string first = dlerror();
    for (const char* dir : {MOETUNE_CUDA_LIBRARY_DIR, "/usr/local/cuda/lib64",
                            "/usr/local/cuda/lib"}) {
      library = dlopen((std::string(dir) + "/" + name).c_str(),
                       RTLD_NOW | RTLD_LOCAL);
      if (library != nullptr) break;
    }
    if (library == nullptr) {
      out.error = "cannot load " + name + ": " + first;
      return out;
    }
  }
  CublasApi& a = out.api;
  out.ok = Resolve(library, "cublasCreate_v2", &a.create, &out.error) &&
           Resolve(library, "cublasDestroy_v2", &a.destroy, &out.error) &&
           Resolve(library, "cublasSetStream_v2", &a.set_stream, &out.error) &&
           Resolve(library, "cublasGemmEx", &a.gemm_ex, &out.error) &&
           Resolve(library, "cublasGetStatusName", &a.status_name, &out.error);
  return out;
}

}  // namespace

const CublasApi* Cublas(std::string* error) {
  static const Loaded* loaded = new Loaded(Load());
  if (!loaded->ok && error != nullptr) *error = loaded->error;
  return loaded->ok ? &loaded->api : nullptr;
}

}  // namespace moetune::gpu
