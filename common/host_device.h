// MOETUNE_HD marks functions that must compute bit-identical results on the
// host (CPU reference) and the device (CUDA kernels). Plain C++ compilers see
// nothing; nvcc sees __host__ __device__.
#pragma once

#if defined(__CUDACC__)
#define MOETUNE_HD __host__ __device__ __forceinline__
#else
#define MOETUNE_HD inline
#endif
