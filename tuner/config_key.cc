#include "tuner/config_key.h"

#include "absl/strings/str_cat.h"

namespace moetune::tuner {

backends::Tile TileOf(const v1::TrialConfig& config) {
  if (!config.has_tile()) return {};
  return {config.tile().block_n(), config.tile().block_k()};
}

std::string TileText(const v1::TrialConfig& config) {
  return backends::TileText(TileOf(config));
}

std::string ConfigKey(const v1::TrialConfig& config) {
  return absl::StrCat(config.moe_backend(), "|", TileText(config), "|",
                      config.tp(), "|", config.ep(), "|",
                      config.cuda_graph() ? 1 : 0);
}

std::string ProposalKey(const v1::Trial& trial) {
  return absl::StrCat(trial.workload_hash(), "|", ConfigKey(trial.config()),
                      "|", trial.rung(), "|", trial.confirm_round());
}

}  // namespace moetune::tuner
