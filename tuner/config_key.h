// The identity of a point of the search space and of a proposal, and the
// tile of a config as the backends name it. One definition each, used by the
// strategies, the winner selection, the replay and the CLI. Pure functions;
// thread-safe.
#pragma once

#include <string>

#include "kernels/backends/descriptor.h"
#include "proto/moetune.pb.h"

namespace moetune::tuner {

// The config's tile; Tile{} when it has none.
backends::Tile TileOf(const v1::TrialConfig& config);
// backends::TileText of the config's tile: "16x256", or "-".
std::string TileText(const v1::TrialConfig& config);

// The config's all-reduce: "nccl" (also for "", its default) or "oneshot".
std::string AllreduceName(const v1::TrialConfig& config);
// Whether the config's communication is MEASURED (on a gang of tp * ep
// workers); unset and MODELLED are modelled.
bool IsMeasured(const v1::TrialConfig& config);

// The config's attention: "tp" (also for "", its default) or "dp"
// (data-parallel attention, TrialConfig.attention).
std::string AttentionName(const v1::TrialConfig& config);
bool IsDpAttention(const v1::TrialConfig& config);

// "backend|tile|tp|ep|graph" of a config, e.g. "cpu_blocked|4x64|2|4|0"
// ("-" for an unset tile), then "|oneshot" for a non-default all-reduce,
// "|measured" for MEASURED communication and "|dp" for data-parallel
// attention: which configs are the same point of the space. The defaults
// add nothing, so older keys are unchanged.
std::string ConfigKey(const v1::TrialConfig& config);

// The config as people read it (the CLI's tables and progress lines, the
// coordinator's log): "fused_gemv 32x256 tp8 ep1 graph", with " dp-attn"
// after the layout for data-parallel attention and " oneshot" / " measured"
// at the end for those; the defaults add nothing.
std::string ConfigText(const v1::TrialConfig& config);

// "workload_hash|backend|tile|tp|ep|graph|rung|round", e.g.
// "90d306c702e9773b|cpu_blocked|4x64|2|4|0|0|1".
std::string ProposalKey(const v1::Trial& trial);

}  // namespace moetune::tuner
