// cpu_reference's launcher: the reference MoE layer itself, so that the
// oracle's own time is on record beside every backend it judges.
#include "common/status_macros.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/reference/moe_reference.h"

namespace moetune::backends::cpu_reference {

absl::StatusOr<ref::MoeFn> MakeMoe(const ref::StepSpec& step, const Tile&) {
  RETURN_IF_ERROR(ref::ValidateStepSpec(step));
  return ref::MoeFn([step](int layer, const float* x, int batch, float* y) {
    ref::MoeLayerReference(step, layer, x, batch, y);
    return absl::OkStatus();
  });
}

}  // namespace moetune::backends::cpu_reference
