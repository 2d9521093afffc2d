// The roofline's efficiency, one rule for the worker that records it and
// the coordinator that re-floors it at a better bandwidth: floor / median,
// except that modelled communication is left out of the floor, because a
// one-device median holds no communication. Pure; thread-safe.
#pragma once

#include "proto/moetune.pb.h"

namespace moetune {

// 0 when nothing was timed.
double RooflineEfficiency(const v1::Roofline& roofline, double median_us);

}  // namespace moetune
