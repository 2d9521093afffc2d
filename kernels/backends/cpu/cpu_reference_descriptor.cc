// cpu_reference's descriptor (kernels/backends/descriptor.h); its launcher
// is cpu_reference.cc beside it.
#include "kernels/backends/registry.h"

namespace moetune::backends::cpu_reference {

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "cpu_reference",
      .placement = Placement::kCpu,
      .description =
          "the float32 CPU reference itself (the correctness oracle), timed",
      .times_decode_step = true,
  };
  return descriptor;
}

}  // namespace moetune::backends::cpu_reference
