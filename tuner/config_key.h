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

// The config's all-reduce as text: "nccl" (also when unset, its default)
// or "oneshot" (AllReduceImplText).
std::string AllreduceName(const v1::TrialConfig& config);
bool IsOneshotAllReduce(const v1::TrialConfig& config);
// Whether the config's communication is MEASURED (on a gang of tp * ep
// workers); unset and MODELLED are modelled.
bool IsMeasured(const v1::TrialConfig& config);

// The config's attention as text: "tp" (also when unset, its default) or
// "dp" (data-parallel attention, ATTENTION_DP; AttentionSplitText).
std::string AttentionName(const v1::TrialConfig& config);
bool IsDpAttention(const v1::TrialConfig& config);

// "backend|tile|tp|ep|graph" of a config, e.g. "cpu_blocked|4x64|2|4|0"
// ("-" for an unset tile), then "|oneshot" for the one-shot all-reduce,
// "|measured" for MEASURED communication and "|dp" for data-parallel
// attention: which configs are the same point of the space. The defaults
// (set or unset) add nothing, so keys stored for configs without these
// dimensions stay valid; the keys come from the enum fields only, and a
// config in the legacy string spelling keys the same once normalised
// (common/legacy_spelling.h).
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
