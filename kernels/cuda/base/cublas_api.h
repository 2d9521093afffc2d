// cuBLAS, loaded on first use (dlopen) rather than linked: only the
// dequant_cublas backend calls it, and loading libcublas with its ~540 MB
// libcublasLt cost every worker and trial process ~0.5 s of start-up (the
// libraries' initializers and page faults, measured with perf on the CPU
// machine), paid again at each new workload's trial process. Plain C++
// (cuBLAS's C header only). Thread-safe.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace moetune::gpu {

// The cuBLAS entry points the GPU code calls. cublasGemmEx is spelled out:
// C++ also sees an inline overload of it (cudaDataType compute types).
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t,
                                        cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType,
                                        int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int,
                                        cublasComputeType_t, cublasGemmAlgo_t);
struct CublasApi {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  CublasGemmEx gemm_ex = nullptr;
  decltype(&cublasGetStatusName) status_name = nullptr;
};

// The library's API, loaded once (libcublas.so.<major> from the loader's
// path, else from the toolkit this was built with); null when it cannot be
// loaded, with *error (when given) naming the library and dlerror's reason.
const CublasApi* Cublas(std::string* error);

}  // namespace moetune::gpu
