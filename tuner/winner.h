// Winner selection for GetBest: per (workload, environment fingerprint), the
// configs measured, each with the raw samples of all its trials pooled,
// ranked by median; ties called by confidence-interval overlap
// (common/stats.h); an incumbent from an earlier sweep kept unless beaten
// beyond the interval. Pure functions; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::tuner {

// True when `trial` may rank: state DONE with a result whose outcome is DONE
// (or left unset). FAILED, INCORRECT, TIMEOUT, ... never win, whatever their
// timings say.
bool CanRank(const v1::Trial& trial);

// Which rule decided a BestForWorkload. BestForWorkload has no field for it,
// so SelectBest writes it at the start of best.reason, which is otherwise
// empty for a DONE trial: "<rule>: <details>". These are the <rule> words.
inline constexpr char kRuleFastest[] = "fastest";
inline constexpr char kRuleScreeningOnly[] = "fastest-screening";
inline constexpr char kRuleIncumbentKept[] = "incumbent-kept";
inline constexpr char kRuleChallengerWon[] = "challenger-won";
// The <rule> of `best` (the text before the first ':'), "" when none.
std::string_view DecidedBy(const v1::BestForWorkload& best);

// One BestForWorkload per (workload_hash, result.fingerprint.hash) that has
// at least one trial that CanRank; other trials are ignored, and results of
// different fingerprints are never ranked together.
//   pooling   the group's trials of one config (ConfigKey) are one entry:
//             its representative is its lowest-id trial, whose
//             result.samples_us and result.stats are replaced by the pooled
//             samples and Summarize() of them when more than one trial (with
//             samples) was pooled; a single trial keeps its recorded stats.
//   fidelity  only rung-0 trials (full measurement; confirmation rounds
//             included) rank. A group with no rung-0 trial ranks its lowest
//             rung present instead (rule kRuleScreeningOnly), so that a sweep
//             cut short still names its best guess, marked as such.
//   best       lowest pooled median (ties broken by lower trial_id)
//   runner_up  second lowest (unset when the group has one config)
//   margin_us  runner_up median - best median (0 without a runner-up)
//   tie        the runner-up's CI overlaps the best's
//   tied_trial_ids  the representative of every config whose CI overlaps
//              the best's, the best included, in rank order
//   workload, fingerprint  the best trial's
// Order: workloads by first appearance in `trials`; within a workload, the
// newest fingerprint first (by the largest updated_at_unix_ms of its ranked
// trials; equal ones by fingerprint hash). `excluded` is left empty for the
// caller, which knows the probes.
v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials);

// As above, with `incumbents`: bests accepted earlier (earlier sweeps), each
// matched to a group by workload_hash and result.fingerprint.hash (the first
// rankable match counts). With a match, the group's best (the challenger)
// wins only when it is faster beyond the interval: challenger ci_high_us <
// incumbent ci_low_us (rule kRuleChallengerWon). Otherwise the incumbent is
// `best` (rule kRuleIncumbentKept), the challenger is `runner_up`, margin_us
// is challenger median - incumbent median (negative when the challenger's
// median is lower but not by enough), and tie / tied_trial_ids are against
// the incumbent's interval (its id first). Incumbents of groups without
// trials here are not reported. An incumbent whose config was measured again
// here at full fidelity is represented by that new pooled entry (its figure,
// its trial id), which the best of the other configs must beat beyond the
// interval; alone, it is kept (kRuleIncumbentKept) with the new figure.
v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials,
                               const std::vector<v1::Trial>& incumbents);

}  // namespace moetune::tuner
