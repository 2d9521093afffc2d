#include "common/roofline.h"

namespace moetune {

double RooflineEfficiency(const v1::Roofline& roofline, double median_us) {
  if (!(median_us > 0)) return 0;
  const double floor_us = roofline.comm_modelled()
                              ? roofline.floor_us() - roofline.comm_floor_us()
                              : roofline.floor_us();
  return floor_us / median_us;
}

}  // namespace moetune
