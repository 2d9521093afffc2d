#include <cudaTypedefs.h>

#include <atomic>
#include <string>

#include "kernels/cuda/base/tensor_map.cuh"

namespace moetune::gpu {
namespace {

using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

// cuTensorMapEncodeTiled from the driver the runtime loaded (resolved once;
// a pure host computation of the map's bits).
GpuStatus Encoder(EncodeTiled* out) {
  static std::atomic<EncodeTiled> cached{nullptr};
  if (EncodeTiled fn = cached.load()) {
    *out = fn;
    return OkStatus();
  }
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  MG_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                           cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    return Fail(RunStatus::kUnavailable,
                "the driver has no cuTensorMapEncodeTiled (TMA tensor maps)");
  }
  cached = reinterpret_cast<EncodeTiled>(fn);
  *out = cached.load();
  return OkStatus();
}

}  // namespace

GpuStatus EncodeRowsMap(const RowsMap& m, CUtensorMap* map) {
  EncodeTiled encode = nullptr;
  MG_RETURN_IF_ERROR(Encoder(&encode));
  const int64_t element = m.bf16 ? 2 : 4;
  const int64_t row_bytes = m.row_stride * element;
  // A single group's stride is never stepped over; any multiple of 16.
  const int64_t group_bytes =
      (m.groups > 1 ? m.group_stride : m.rows_per_group * m.row_stride) *
      element;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(m.k),
                              static_cast<cuuint64_t>(m.rows_per_group),
                              static_cast<cuuint64_t>(m.groups)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_bytes),
                                 static_cast<cuuint64_t>(group_bytes)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(m.box_k),
                             static_cast<cuuint32_t>(m.box_rows), 1};
  const cuuint32_t steps[3] = {1, 1, 1};
  const CUresult r = encode(
      map,
      m.bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
             : CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
      3, const_cast<void*>(m.base), dims, strides, box, steps,
      CU_TENSOR_MAP_INTERLEAVE_NONE,
      m.swizzle_128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    return Fail(RunStatus::kBadProblem,
                "cuTensorMapEncodeTiled failed (" + std::to_string(r) +
                    ") for k " + std::to_string(m.k) + ", rows a group " +
                    std::to_string(m.rows_per_group) + ", groups " +
                    std::to_string(m.groups) + ", box " +
                    std::to_string(m.box_k) + " x " +
                    std::to_string(m.box_rows));
  }
  return OkStatus();
}

}  // namespace moetune::gpu
