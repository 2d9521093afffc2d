// native_fp4: Blackwell's FP4 tensor cores. Listed so that sweeps can name it
// and every probe says why it is unavailable; no kernel exists yet, so it
// has a descriptor and no launcher (PLANNED in backend_list.h).
#include "kernels/backends/registry.h"

namespace moetune::backends::native_fp4 {

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "native_fp4",
      .placement = Placement::kGpu,
      .description =
          "Blackwell FP4 tensor cores (sm_100a / sm_120a builds only)",
      .graph_capturable = true,
      .gpu = {.min_sm = 100,
              .feature = "FP4 tensor cores, tcgen05",
              .not_implemented = "no native FP4 kernel is implemented"},
      .error_bound = 2e-2,
  };
  return descriptor;
}

}  // namespace moetune::backends::native_fp4
