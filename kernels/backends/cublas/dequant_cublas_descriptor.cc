// dequant_cublas's descriptor (kernels/backends/descriptor.h); its launcher
// is kernels/cuda/experts/cublas/dequant_cublas.cu.
#include "kernels/backends/registry.h"
#include "kernels/backends/tiled_layout_rules.h"

namespace moetune::backends::dequant_cublas {
namespace {

// Its dequantize kernel reads the tiled layout in 16-row tiles.
std::string Rules(const LayerShape& shape, const Tile&) {
  return TiledLayoutRule("dequant_cublas", shape, 16);
}

}  // namespace

const BackendDescriptor& Descriptor() {
  static const BackendDescriptor descriptor{
      .name = "dequant_cublas",
      .placement = Placement::kGpu,
      .description = "dequantize routed experts to BF16, then cuBLAS",
      // It copies the routing to the host mid-layer (per-expert cuBLAS
      // shapes), so its layer cannot be captured in a CUDA graph.
      .graph_capturable = false,
      .times_decode_step = true,
      .gpu = {.min_sm = 90, .cublas = true, .feature = "Hopper"},
      .error_bound = 2e-2,
      .trusted_path_order = 3,
      .shape_rules = &Rules,
  };
  return descriptor;
}

}  // namespace moetune::backends::dequant_cublas
