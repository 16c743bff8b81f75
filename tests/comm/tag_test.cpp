#include "baton/comm/tag.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "baton/runtime/action_tag.h"

namespace baton::comm {
namespace {

using detail::c10d_tag;
using detail::Part;
using runtime::tag_for;
using schedule::ActionKind;

TEST(TagTest, NoTwoMessagesOfAStepShareAC10dTag) {
  std::set<int> seen;
  int count = 0;
  for (int stage : {0, 1, 2, 7, kMaxStages - 1}) {
    for (int microbatch : {0, 1, 2, 63, kMaxMicrobatches - 1}) {
      for (Direction dir : {Direction::kForward, Direction::kBackward}) {
        for (Part part : {Part::kMessage, Part::kSecond}) {
          const int tag = c10d_tag(Tag{stage, microbatch, dir}, part);
          EXPECT_GE(tag, 0);
          seen.insert(tag);
          ++count;
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(count));
}

TEST(TagTest, MappingFollowsTheDocumentedFormula) {
  // ((microbatch * kMaxStages + stage) * 2 + direction) * 2 + part
  EXPECT_EQ(c10d_tag(Tag{3, 5, Direction::kBackward}, Part::kSecond),
            ((5 * kMaxStages + 3) * 2 + 1) * 2 + 1);
  EXPECT_EQ(c10d_tag(Tag{0, 0, Direction::kForward}, Part::kMessage), 0);
}

TEST(TagTest, StageOrMicrobatchOutOfRangeIsRejectedWithTheValue) {
  EXPECT_THAT(
      [] {
        c10d_tag(Tag{kMaxStages, 0, Direction::kForward}, Part::kMessage);
      },
      testing::ThrowsMessage<Error>(testing::HasSubstr("stage must be in [0, 1024), got 1024")));
  EXPECT_THAT(
      [] {
        c10d_tag(Tag{0, -1, Direction::kForward}, Part::kMessage);
      },
      testing::ThrowsMessage<Error>(
          testing::HasSubstr("micro-batch must be in [0, 524288), got -1")));
}

TEST(TagTest, SendAndMatchingReceiveNameTheSameTag) {
  EXPECT_EQ(tag_for({ActionKind::SEND_F, 2, 5}), tag_for({ActionKind::RECV_F, 3, 5}));
  EXPECT_EQ(tag_for({ActionKind::SEND_B, 3, 5}), tag_for({ActionKind::RECV_B, 2, 5}));
  EXPECT_EQ(tag_for({ActionKind::SEND_F, 2, 5}), (Tag{2, 5, Direction::kForward}));
  EXPECT_EQ(tag_for({ActionKind::SEND_B, 3, 5}), (Tag{3, 5, Direction::kBackward}));
  EXPECT_FALSE(tag_for({ActionKind::SEND_F, 2, 5}) == tag_for({ActionKind::SEND_B, 2, 5}));
}

// The control messages ride the reserved micro-batch, which no action's tag names.
TEST(TagTest, LossAndTiedSumTagsUseTheReservedMicrobatchInOppositeDirections) {
  EXPECT_EQ(loss_tag(4), (Tag{3, kReservedMicrobatch, Direction::kForward}));
  EXPECT_EQ(tied_sum_tag(2), (Tag{2, kReservedMicrobatch, Direction::kBackward}));
  EXPECT_FALSE(loss_tag(3) == tied_sum_tag(2));
  EXPECT_FALSE(loss_tag(3) == tag_for({ActionKind::SEND_F, 2, kReservedMicrobatch - 1}));
}

TEST(TagTest, ComputeActionsHaveNoTag) {
  EXPECT_THAT(
      [] {
        tag_for({ActionKind::F, 1, 2});
      },
      testing::ThrowsMessage<Error>(testing::HasSubstr("got 1F2")));
}

}  // namespace
}  // namespace baton::comm
