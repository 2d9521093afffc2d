// FindLauncher: the GPU entries of kernels/backends/backend_list.h, each
// backend's Launcher() defined in its folder's .cu file.
#include <array>

#include "kernels/backends/backend_list.h"
#include "kernels/cuda/moe/launcher.cuh"

#define MOETUNE_NOT_GPU(name)
MOETUNE_BACKENDS(MOETUNE_NOT_GPU, MOETUNE_DECLARE_LAUNCHER, MOETUNE_NOT_GPU)

namespace moetune::gpu {
namespace {

#define MOETUNE_LAUNCHER_ENTRY(name) &backends::name::Launcher,
constexpr std::array kLaunchers = {
    MOETUNE_BACKENDS(MOETUNE_NOT_GPU, MOETUNE_LAUNCHER_ENTRY, MOETUNE_NOT_GPU)};
#undef MOETUNE_LAUNCHER_ENTRY
#undef MOETUNE_NOT_GPU

}  // namespace

const Launcher* FindLauncher(std::string_view name) {
  for (const Launcher& (*get)() : kLaunchers) {
    const Launcher& launcher = get();
    if (launcher.descriptor->name == name) return &launcher;
  }
  return nullptr;
}

}  // namespace moetune::gpu
