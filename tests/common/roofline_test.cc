#include "common/roofline.h"

#include "gtest/gtest.h"

namespace moetune {
namespace {

TEST(RooflineEfficiencyTest, FloorOverMedian) {
  v1::Roofline r;
  r.set_floor_us(60);
  EXPECT_DOUBLE_EQ(RooflineEfficiency(r, 80), 0.75);
  EXPECT_EQ(RooflineEfficiency(r, 0), 0);
}

TEST(RooflineEfficiencyTest, ModelledCommunicationIsNotInTheMedianNorTheFloor) {
  v1::Roofline r;
  r.set_floor_us(160);  // 60 of memory, 100 of modelled communication
  r.set_comm_floor_us(100);
  r.set_comm_modelled(true);
  EXPECT_DOUBLE_EQ(RooflineEfficiency(r, 80), 0.75);
  r.set_comm_modelled(false);  // measured: the median holds it too
  EXPECT_DOUBLE_EQ(RooflineEfficiency(r, 200), 0.8);
}

}  // namespace
}  // namespace moetune
