// Winner selection for GetBest: ranks finished trials per (workload,
// environment fingerprint) by median time and calls ties by confidence-
// interval overlap (tuner/stats.h). Pure function; thread-safe.
#pragma once

#include <vector>

#include "proto/moetune.pb.h"

namespace moetune::tuner {

// True when `trial` may rank: state DONE with a result whose outcome is DONE
// (or left unset). FAILED, INCORRECT, TIMEOUT, ... never win, whatever their
// timings say.
bool CanRank(const v1::Trial& trial);

// One BestForWorkload per (workload_hash, result.fingerprint.hash) that has
// at least one trial that CanRank; other trials are ignored, and results of
// different fingerprints are never ranked together.
//   best       lowest stats.median_us (ties broken by lower trial_id)
//   runner_up  second lowest (unset when the group has one trial)
//   margin_us  runner_up median - best median (0 without a runner-up)
//   tie        the runner-up's CI overlaps the best's
//   tied_trial_ids  every ranked trial of the group whose CI overlaps the
//              best's, the best included, in rank order
//   workload, fingerprint  the best trial's
// Order: workloads by first appearance in `trials`; within a workload, the
// newest fingerprint first (by the largest updated_at_unix_ms of its ranked
// trials; equal ones by fingerprint hash). `excluded` is left empty for the
// caller, which knows the probes.
v1::GetBestResponse SelectBest(const std::vector<v1::Trial>& trials);

}  // namespace moetune::tuner
