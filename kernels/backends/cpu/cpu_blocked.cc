#include "kernels/backends/cpu/cpu_blocked.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/cpu/tiles.h"
#include "kernels/backends/registry.h"
#include "kernels/model/nvfp4_format.h"
#include "kernels/model/weight_gen.h"
#include "kernels/reference/model_weights.h"
#include "kernels/reference/moe_reference.h"
#include "kernels/reference/ops.h"
#include "kernels/reference/router.h"

namespace moetune::cpu {
namespace {

using ref::PackedNvfp4;

// The 16 E2M1 values, indexed by code.
const std::array<float, 16>& E2M1Table() {
  static const std::array<float, 16> table = [] {
    std::array<float, 16> values{};
    for (uint32_t code = 0; code < 16; ++code) {
      values[code] = nvfp4::E2M1ToFloat(code);
    }
    return values;
  }();
  return table;
}

// Decodes rows [r0, r0 + BN) x columns [k0, k0 + BK) into tile[BN][BK],
// each weight (E2M1 * E4M3) * tensor_scale exactly as ref::PackedWeight.
template <int BN, int BK>
void DecodeTile(const PackedNvfp4& w, int64_t r0, int64_t k0, float* tile) {
  constexpr int kBlocks = BK / nvfp4::kBlockSize;
  const std::array<float, 16>& e2m1 = E2M1Table();
  for (int i = 0; i < BN; ++i) {
    const uint8_t* codes = w.codes.data() + (r0 + i) * (w.k / 2) + k0 / 2;
    const uint8_t* scales = w.scales.data() +
                            (r0 + i) * (w.k / nvfp4::kBlockSize) +
                            k0 / nvfp4::kBlockSize;
    float* out = tile + i * BK;
    for (int b = 0; b < kBlocks; ++b) {
      const float block_scale = nvfp4::E4M3ToFloat(scales[b]);
      for (int j = 0; j < nvfp4::kBlockSize / 2; ++j) {
        const uint8_t byte = codes[b * (nvfp4::kBlockSize / 2) + j];
        out[b * 16 + 2 * j] =
            (e2m1[byte & 0xfu] * block_scale) * w.tensor_scale;
        out[b * 16 + 2 * j + 1] =
            (e2m1[byte >> 4] * block_scale) * w.tensor_scale;
      }
    }
  }
}

// Dot of BK floats with 8 independent partial sums (vectorizable without
// reassociating a single chain).
template <int BK>
float TileDot(const float* a, const float* b) {
  std::array<float, 8> partial{};
  for (int j = 0; j < BK; j += 8) {
    for (int l = 0; l < 8; ++l) partial[l] += a[j + l] * b[j + l];
  }
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

// The blocked kernel: every BN x BK weight tile is decoded once and applied
// to all `tokens` inputs. Needs w.rows % BN == 0 and w.k % BK == 0
// (CanImplementBlocked checks both).
template <int BN, int BK>
void BlockedGemm(const PackedNvfp4& w, const float* x, int tokens, float* y) {
  std::vector<float> tile(static_cast<size_t>(BN) * BK);
  std::vector<float> acc(static_cast<size_t>(tokens) * BN);
  for (int64_t r0 = 0; r0 < w.rows; r0 += BN) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t k0 = 0; k0 < w.k; k0 += BK) {
      DecodeTile<BN, BK>(w, r0, k0, tile.data());
      for (int t = 0; t < tokens; ++t) {
        const float* xt = x + t * w.k + k0;
        for (int i = 0; i < BN; ++i) {
          acc[t * BN + i] += TileDot<BK>(tile.data() + i * BK, xt);
        }
      }
    }
    for (int t = 0; t < tokens; ++t) {
      std::copy_n(acc.data() + t * BN, BN, y + t * w.rows + r0);
    }
  }
}

// The kernel for a tile, or nullptr when the tile is not instantiated.
TileGemmFn FindKernel(int block_n, int block_k) {
#define MOETUNE_CPU_TILE_CASE(bn, bk) \
  if (block_n == (bn) && block_k == (bk)) return &BlockedGemm<bn, bk>;
  MOETUNE_CPU_BLOCKED_TILES(MOETUNE_CPU_TILE_CASE)
#undef MOETUNE_CPU_TILE_CASE
  return nullptr;
}

}  // namespace

absl::Status CanImplementBlocked(const ref::StepSpec& spec, int block_n,
                                 int block_k) {
  RETURN_IF_ERROR(ref::ValidateStepSpec(spec));
  const backends::LayerShape shape{
      spec.config.hidden, ref::InterSlice(spec.config, spec.shard), spec.batch};
  const std::string why = backends::cpu_blocked::Descriptor().CanImplement(
      shape, backends::Tile{block_n, block_k});
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("kernel cannot do this shape: ", why));
}

absl::StatusOr<std::unique_ptr<BlockedMoe>> BlockedMoe::Create(
    const ref::StepSpec& spec, int block_n, int block_k) {
  RETURN_IF_ERROR(CanImplementBlocked(spec, block_n, block_k));
  return std::unique_ptr<BlockedMoe>(
      new BlockedMoe(spec, FindKernel(block_n, block_k)));
}

BlockedMoe::LayerCache& BlockedMoe::Layer(int layer) {
  auto [it, inserted] = layers_.try_emplace(layer);
  LayerCache& cache = it->second;
  if (!inserted) return cache;
  const ref::Bf16TensorDesc router =
      ref::Bf16Desc(spec_, layer, weights::kRouter);
  cache.router.resize(static_cast<size_t>(router.rows * router.k));
  for (int64_t e = 0; e < router.rows; ++e) {
    for (int64_t c = 0; c < router.k; ++c) {
      cache.router[e * router.k + c] = router.Weight(e, c);
    }
  }
  cache.bias = ref::RouterBias(spec_, layer);
  if (ref::OwnsShared(spec_.config, spec_.shard)) {
    cache.shared = std::make_unique<ExpertSlice>(
        MaterializeExpert(ref::SharedGateUpDesc(spec_, layer),
                          ref::SharedDownDesc(spec_, layer)));
  }
  return cache;
}

const BlockedMoe::ExpertSlice& BlockedMoe::Expert(LayerCache& cache, int layer,
                                                  int expert) {
  auto it = cache.experts.find(expert);
  if (it != cache.experts.end()) return it->second;
  return cache.experts
      .emplace(expert,
               MaterializeExpert(ref::ExpertGateUpDesc(spec_, layer, expert),
                                 ref::ExpertDownDesc(spec_, layer, expert)))
      .first->second;
}

BlockedMoe::ExpertSlice BlockedMoe::MaterializeExpert(
    const ref::Nvfp4TensorDesc& gate_up,
    const ref::Nvfp4TensorDesc& down) const {
  const model::ModelConfig& c = spec_.config;
  const int slice = ref::InterSlice(c, spec_.shard);
  const int begin = ref::InterBegin(c, spec_.shard);
  ExpertSlice expert;
  expert.gate = ref::MaterializeSlice(gate_up, begin, slice, 0, c.hidden);
  expert.up = ref::MaterializeSlice(gate_up, c.moe_intermediate + begin, slice,
                                    0, c.hidden);
  expert.down = ref::MaterializeSlice(down, 0, c.hidden, begin, slice);
  return expert;
}

void BlockedMoe::RunExpert(const ExpertSlice& expert, const float* x,
                           const std::vector<RoutedToken>& tokens, float* y) {
  const int hidden = spec_.config.hidden;
  const int slice = ref::InterSlice(spec_.config, spec_.shard);
  const int n = static_cast<int>(tokens.size());
  x_gathered_.resize(static_cast<size_t>(n) * hidden);
  gate_.resize(static_cast<size_t>(n) * slice);
  up_.resize(static_cast<size_t>(n) * slice);
  down_out_.resize(static_cast<size_t>(n) * hidden);
  for (int t = 0; t < n; ++t) {
    std::copy_n(x + static_cast<size_t>(tokens[t].token) * hidden, hidden,
                x_gathered_.data() + static_cast<size_t>(t) * hidden);
  }
  gemm_(expert.gate, x_gathered_.data(), n, gate_.data());
  gemm_(expert.up, x_gathered_.data(), n, up_.data());
  for (size_t i = 0; i < gate_.size(); ++i)
    gate_[i] = ref::Silu(gate_[i]) * up_[i];
  gemm_(expert.down, gate_.data(), n, down_out_.data());
  for (int t = 0; t < n; ++t) {
    float* yt = y + static_cast<size_t>(tokens[t].token) * hidden;
    const float* dt = down_out_.data() + static_cast<size_t>(t) * hidden;
    for (int r = 0; r < hidden; ++r) yt[r] += tokens[t].weight * dt[r];
  }
}

absl::Status BlockedMoe::Run(int layer, const float* x, int batch, float* y) {
  RETURN_IF_ERROR(ref::ValidateMoeCall(spec_, layer, batch));
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("x / y: must not be null");
  }
  const model::ModelConfig& c = spec_.config;
  LayerCache& cache = Layer(layer);
  std::fill_n(y, static_cast<size_t>(batch) * c.hidden, 0.0f);
  for (const auto& [expert, tokens] : Bucket(cache, x, batch)) {
    RunExpert(Expert(cache, layer, expert), x, tokens, y);
  }
  if (cache.shared != nullptr) {
    std::vector<RoutedToken> all;
    for (int b = 0; b < batch; ++b) all.push_back({b, 1.0f});
    RunExpert(*cache.shared, x, all, y);
  }
  return absl::OkStatus();
}

// Logits exactly as the reference computes them (same BF16 values, same
// double-accumulated order), so the routing is identical, not just close.
std::map<int, std::vector<BlockedMoe::RoutedToken>> BlockedMoe::Bucket(
    const LayerCache& cache, const float* x, int batch) const {
  const model::ModelConfig& c = spec_.config;
  std::map<int, std::vector<RoutedToken>> buckets;
  for (int b = 0; b < batch; ++b) {
    std::vector<float> logits(static_cast<size_t>(c.num_experts));
    for (int e = 0; e < c.num_experts; ++e) {
      logits[e] = static_cast<float>(
          ref::Dot(cache.router.data() + static_cast<size_t>(e) * c.hidden,
                   x + static_cast<size_t>(b) * c.hidden, c.hidden));
    }
    const ref::Route route =
        ref::RouteToken(logits.data(), cache.bias.data(), c.num_experts,
                        c.experts_per_token, c.routed_scaling);
    for (size_t k = 0; k < route.experts.size(); ++k) {
      if (ref::OwnsExpert(c, spec_.shard, route.experts[k])) {
        buckets[route.experts[k]].push_back({b, route.weights[k]});
      }
    }
  }
  return buckets;
}

}  // namespace moetune::cpu

namespace moetune::backends::cpu_blocked {

absl::StatusOr<ref::MoeFn> MakeMoe(const ref::StepSpec& step,
                                   const Tile& tile) {
  ASSIGN_OR_RETURN(std::shared_ptr<cpu::BlockedMoe> blocked,
                   cpu::BlockedMoe::Create(step, tile.block_n, tile.block_k));
  return ref::MoeFn([blocked](int layer, const float* x, int batch, float* y) {
    return blocked->Run(layer, x, batch, y);
  });
}

}  // namespace moetune::backends::cpu_blocked
