// Where a finished sweep's time went: its trials' checks and their timed
// work (warm-ups and timed iterations), beside the time its workers had
// (the sweep's wall time x the workers that ran its trials). The rest is
// setup (trial processes, device contexts, weights, caches, graph capture),
// scheduling and reports: what a sweep pays beyond the measurement it is for.
#pragma once

#include <string>

#include "proto/moetune.pb.h"

namespace moetune::cli {

struct TimeAccount {
  double wall_s = 0;  // the sweep's, from its creation to its end
  int workers = 0;    // distinct workers that reported a trial
  double check_s = 0, timed_s = 0;
  // 1 - (check_s + timed_s) / (wall_s * workers), in [0, 1].
  double OutsideShare() const;
  // False when no trial recorded its phases (results recorded without
  // those fields, or none finished).
  bool recorded() const { return check_s + timed_s > 0; }
};

// Sums the trials' check_s and timed_s.
TimeAccount AccountTime(const v1::Sweep& sweep,
                        const v1::QueryTrialsResponse& trials);

// One line for the end of a sweep's report, e.g. "time: 12.5 s on 1 worker:
// checks 1.2 s, warm-ups and timed iterations 8.3 s; 24% outside them
// (setup, scheduling, reports)"; empty when nothing was recorded.
std::string TimeAccountLine(const v1::Sweep& sweep,
                            const v1::QueryTrialsResponse& trials);

}  // namespace moetune::cli
