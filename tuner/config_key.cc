#include "tuner/config_key.h"

#include "absl/strings/str_cat.h"
#include "common/legacy_spelling.h"
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
  return std::string(AllReduceImplText(config.all_reduce_impl()));
}

bool IsOneshotAllReduce(const v1::TrialConfig& config) {
  return config.all_reduce_impl() == v1::ALL_REDUCE_ONESHOT;
}

bool IsMeasured(const v1::TrialConfig& config) {
  return config.communication() == v1::MEASURED;
}

std::string AttentionName(const v1::TrialConfig& config) {
  return std::string(AttentionSplitText(config.attention_split()));
}

bool IsDpAttention(const v1::TrialConfig& config) {
  return config.attention_split() == v1::ATTENTION_DP;
}

// The defaults (nccl, modelled, tp attention) add nothing, so a config at
// the defaults keys as one without these dimensions: stored keys stay valid.
std::string ConfigKey(const v1::TrialConfig& config) {
  std::string key = absl::StrCat(config.moe_backend(), "|", TileText(config),
                                 "|", config.tp(), "|", config.ep(), "|",
                                 config.cuda_graph() ? 1 : 0);
  if (IsOneshotAllReduce(config)) absl::StrAppend(&key, "|oneshot");
  if (IsMeasured(config)) absl::StrAppend(&key, "|measured");
  if (IsDpAttention(config)) absl::StrAppend(&key, "|dp");
  return key;
}

std::string ConfigText(const v1::TrialConfig& c) {
  return absl::StrCat(c.moe_backend(), " ", TileText(c), " tp", c.tp(), " ep",
                      c.ep(), IsDpAttention(c) ? " dp-attn" : "",
                      c.cuda_graph() ? " graph" : "",
                      IsOneshotAllReduce(c) ? " oneshot" : "",
                      IsMeasured(c) ? " measured" : "");
}

std::string ProposalKey(const v1::Trial& trial) {
  return absl::StrCat(trial.workload_hash(), "|", ConfigKey(trial.config()),
                      "|", trial.rung(), "|", trial.confirm_round());
}

}  // namespace moetune::tuner
