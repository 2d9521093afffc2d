// The legacy all-reduce and attention strings: moved into the enums and
// cleared, refused with the field and the allowed values when they name no
// value or disagree with the enum, and the text of the enums.
#include "common/legacy_spelling.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace moetune {
namespace {

using ::testing::ElementsAre;

TEST(LegacySpellingTest, TextOfTheEnums) {
  EXPECT_STREQ(AllReduceImplText(v1::ALL_REDUCE_IMPL_UNSPECIFIED), "nccl");
  EXPECT_STREQ(AllReduceImplText(v1::ALL_REDUCE_NCCL), "nccl");
  EXPECT_STREQ(AllReduceImplText(v1::ALL_REDUCE_ONESHOT), "oneshot");
  EXPECT_STREQ(AttentionSplitText(v1::ATTENTION_SPLIT_UNSPECIFIED), "tp");
  EXPECT_STREQ(AttentionSplitText(v1::ATTENTION_TP), "tp");
  EXPECT_STREQ(AttentionSplitText(v1::ATTENTION_DP), "dp");
}

TEST(LegacySpellingTest, AConfigsStringsBecomeItsEnums) {
  v1::TrialConfig config;
  config.set_allreduce("oneshot");
  config.set_attention("dp");
  ASSERT_TRUE(NormalizeLegacyFields(config).ok());
  EXPECT_EQ(config.all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);
  EXPECT_EQ(config.attention_split(), v1::ATTENTION_DP);
  EXPECT_TRUE(config.allreduce().empty());
  EXPECT_TRUE(config.attention().empty());
  // Again: nothing left to move, nothing changes.
  ASSERT_TRUE(NormalizeLegacyFields(config).ok());
  EXPECT_EQ(config.all_reduce_impl(), v1::ALL_REDUCE_ONESHOT);

  v1::TrialConfig spelled_out;
  spelled_out.set_allreduce("nccl");
  spelled_out.set_attention("tp");
  ASSERT_TRUE(NormalizeLegacyFields(spelled_out).ok());
  EXPECT_EQ(spelled_out.all_reduce_impl(), v1::ALL_REDUCE_NCCL);
  EXPECT_EQ(spelled_out.attention_split(), v1::ATTENTION_TP);

  v1::TrialConfig unset;
  ASSERT_TRUE(NormalizeLegacyFields(unset).ok());
  EXPECT_EQ(unset.ByteSizeLong(), 0u);
}

TEST(LegacySpellingTest, ABadConfigStringNamesTheFieldAndIsLeftAsItWas) {
  v1::TrialConfig config;
  config.set_allreduce("oneshot");
  config.set_attention("sp");
  const v1::TrialConfig before = config;
  const absl::Status status = NormalizeLegacyFields(config);
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_EQ(status.message(),
            "config.attention: 'sp' is not allowed; allowed: tp, dp");
  EXPECT_EQ(config.SerializeAsString(), before.SerializeAsString());

  config.set_attention("dp");
  config.set_attention_split(v1::ATTENTION_DP);  // agrees: fine
  EXPECT_TRUE(NormalizeLegacyFields(config).ok());
  config.set_allreduce("oneshot");
  config.set_all_reduce_impl(v1::ALL_REDUCE_NCCL);
  EXPECT_EQ(NormalizeLegacyFields(config).message(),
            "config.allreduce: 'oneshot' disagrees with "
            "config.all_reduce_impl ALL_REDUCE_NCCL; set one of them");
}

TEST(LegacySpellingTest, ASpacesListsBecomeItsEnumListsInOrder) {
  v1::SearchSpace space;
  space.add_allreduce("oneshot");
  space.add_allreduce("nccl");
  space.add_attention("tp");
  space.add_attention("dp");
  ASSERT_TRUE(NormalizeLegacyFields(space).ok());
  EXPECT_THAT(space.all_reduce_impls(),
              ElementsAre(v1::ALL_REDUCE_ONESHOT, v1::ALL_REDUCE_NCCL));
  EXPECT_THAT(space.attention_splits(),
              ElementsAre(v1::ATTENTION_TP, v1::ATTENTION_DP));
  EXPECT_TRUE(space.allreduce().empty());
  EXPECT_TRUE(space.attention().empty());
}

TEST(LegacySpellingTest, ABadSpaceListNamesTheValueAndIsLeftAsItWas) {
  v1::SearchSpace space;
  space.add_allreduce("nccl");
  space.add_allreduce("ring");
  const v1::SearchSpace before = space;
  EXPECT_EQ(NormalizeLegacyFields(space).message(),
            "space.allreduce[1]: 'ring' is not allowed; allowed: nccl, "
            "oneshot");
  EXPECT_EQ(space.SerializeAsString(), before.SerializeAsString());

  space.set_allreduce(1, "oneshot");
  space.add_attention("dp");
  space.add_attention_splits(v1::ATTENTION_TP);
  EXPECT_EQ(NormalizeLegacyFields(space).message(),
            "space.attention: listed beside space.attention_splits; list the "
            "values in one of them");
  EXPECT_EQ(space.all_reduce_impls_size(), 0);  // nothing moved
}

}  // namespace
}  // namespace moetune
