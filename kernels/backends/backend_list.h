// The one registration list of MoE backends. Adding a backend is its folder
// (or file) under kernels/backends/ plus one line here:
//   CPU(name)      a CPU backend: namespace moetune::backends::name defines
//                  Descriptor() (always built) and MakeMoe() (cpu_registry.h)
//   GPU(name)      a GPU backend: Descriptor() (always built) and, in CUDA
//                  builds, Launcher() (kernels/cuda/moe/launcher.cuh)
//   PLANNED(name)  listed with its descriptor only: its probe says why it is
//                  unavailable (GpuNeeds::not_implemented)
// The registries (registry.cc, cpu/cpu_registry.cc, cuda/launcher.cu) expand
// this list; nothing else names backends. Order is the order users see.
#pragma once

#define MOETUNE_BACKENDS(CPU, GPU, PLANNED) \
  CPU(cpu_reference)                        \
  CPU(cpu_blocked)                          \
  GPU(dequant_cublas)                       \
  GPU(fused_gemv)                           \
  GPU(fused_gemv_fp8)                       \
  GPU(fused_gemv_wgmma)                     \
  GPU(grouped_mma)                          \
  GPU(grouped_wgmma)                        \
  PLANNED(native_fp4)

// Declares name::Descriptor() for every listed backend.
#define MOETUNE_DECLARE_DESCRIPTOR(name)                      \
  namespace name {                                            \
  const ::moetune::backends::BackendDescriptor& Descriptor(); \
  }
