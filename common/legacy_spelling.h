// The lowercase spelling of a trial's all-reduce and attention dimensions
// ("nccl", "oneshot"; "tp", "dp"): the values of the legacy string fields
// (TrialConfig.allreduce / attention, SearchSpace.allreduce / attention)
// that stored and recorded configs and spec files carry, and the text that
// tables, columns and logs show.
//
// NormalizeLegacyFields is the one place where those strings are read: it
// runs where configs and spaces come in (a spec submitted or validated, a
// sweep or trial read from the store, a recorded sweep replayed, a trial
// reaching a worker) and moves them into the enum fields (all_reduce_impl,
// attention_split; all_reduce_impls, attention_splits), clearing them.
// Everything else reads the enums only. The enums decide ConfigKey, so a
// config keys the same in either spelling and stored keys stay valid.
//
// Pure functions; thread-safe.
#pragma once

#include "absl/status/status.h"
#include "proto/moetune.pb.h"

namespace moetune {

// "nccl" or "oneshot"; unset and unknown values read as the default, nccl.
const char* AllReduceImplText(v1::AllReduceImpl impl);
// "tp" or "dp"; unset and unknown values read as the default, tp.
const char* AttentionSplitText(v1::AttentionSplit split);

// Moves the config's legacy strings into its enums and clears them:
// "nccl" -> ALL_REDUCE_NCCL, "oneshot" -> ALL_REDUCE_ONESHOT, "tp" ->
// ATTENTION_TP, "dp" -> ATTENTION_DP; "" sets nothing. INVALID_ARGUMENT
// naming the field and the allowed values for any other string, e.g.
// "config.attention: 'sp' is not allowed; allowed: tp, dp", or for a string
// that disagrees with the enum field already set; the config is then left
// as it was.
absl::Status NormalizeLegacyFields(v1::TrialConfig& config);

// The same for a space's lists, each value keeping its place, e.g.
// "space.allreduce[1]: 'ring' is not allowed; allowed: nccl, oneshot". A
// legacy list beside a non-empty enum list of the same dimension is
// INVALID_ARGUMENT too (list the values in one of them); the space is then
// left as it was.
absl::Status NormalizeLegacyFields(v1::SearchSpace& space);

}  // namespace moetune
