#include "tuner/config_key.h"

#include "absl/strings/str_cat.h"
#include "kernels/backends/tile_shape.h"

namespace moetune::tuner {

backends::Tile TileOf(const v1::TrialConfig& config) {
  if (!config.has_tile()) return {};
  return backends::TileOf(config.tile());
}

std::string TileText(const v1::TrialConfig& config) {
  return backends::TileText(TileOf(config));
}

std::string AllreduceName(const v1::TrialConfig& config) {
  return config.allreduce().empty() ? "nccl" : config.allreduce();
}

bool IsMeasured(const v1::TrialConfig& config) {
  return config.communication() == v1::MEASURED;
}

std::string AttentionName(const v1::TrialConfig& config) {
  return config.attention().empty() ? "tp" : config.attention();
}

bool IsDpAttention(const v1::TrialConfig& config) {
  return config.attention() == "dp";
}

// The defaults (nccl, modelled, tp attention) add nothing, so every key made
// before these dimensions existed, stored or recomputed, stays what it was.
std::string ConfigKey(const v1::TrialConfig& config) {
  std::string key = absl::StrCat(config.moe_backend(), "|", TileText(config),
                                 "|", config.tp(), "|", config.ep(), "|",
                                 config.cuda_graph() ? 1 : 0);
  if (AllreduceName(config) != "nccl") {
    absl::StrAppend(&key, "|", config.allreduce());
  }
  if (IsMeasured(config)) absl::StrAppend(&key, "|measured");
  if (IsDpAttention(config)) absl::StrAppend(&key, "|dp");
  return key;
}

std::string ConfigText(const v1::TrialConfig& c) {
  return absl::StrCat(c.moe_backend(), " ", TileText(c), " tp", c.tp(), " ep",
                      c.ep(), IsDpAttention(c) ? " dp-attn" : "",
                      c.cuda_graph() ? " graph" : "",
                      AllreduceName(c) == "nccl" ? "" : " oneshot",
                      IsMeasured(c) ? " measured" : "");
}

std::string ProposalKey(const v1::Trial& trial) {
  return absl::StrCat(trial.workload_hash(), "|", ConfigKey(trial.config()),
                      "|", trial.rung(), "|", trial.confirm_round());
}

}  // namespace moetune::tuner
