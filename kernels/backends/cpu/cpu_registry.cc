#include "kernels/backends/cpu/cpu_registry.h"

#include <array>
#include <utility>

namespace moetune::backends {
namespace {

#define MOETUNE_CPU_ENTRY(name) \
  std::pair<std::string_view, MoeFactory>{#name, &name::MakeMoe},
#define MOETUNE_NOT_CPU(name)
const std::array kCpuMoes = {
    MOETUNE_BACKENDS(MOETUNE_CPU_ENTRY, MOETUNE_NOT_CPU, MOETUNE_NOT_CPU)};
#undef MOETUNE_NOT_CPU
#undef MOETUNE_CPU_ENTRY

}  // namespace

MoeFactory FindCpuMoe(std::string_view name) {
  for (const auto& [cpu_name, factory] : kCpuMoes) {
    if (cpu_name == name) return factory;
  }
  return nullptr;
}

}  // namespace moetune::backends
