// REDUCE_TIED: the tie groups (tied weights and replicated stages), the pass
// that places one per (rank, stage) of a group at the end of the rank's
// list, its notation, and the validator's rules for it.
#include "baton/schedule/tied_reduction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string validate_error(const std::string& text) {
  return error_of([&] { validate(parse_schedule(text)); });
}

// The REDUCE_TIED actions of `rank`, in order.
std::vector<Action> tied_of(const Schedule& s, int rank) {
  std::vector<Action> out;
  for (const Action& a : s.actions[rank])
    if (a.kind == ActionKind::REDUCE_TIED) out.push_back(a);
  return out;
}

Schedule generated(const std::string& name, int p, int m) {
  return lower(generate(name, GeneratorOptions{}.set_ranks(p).set_microbatches(m)));
}

TEST(TiedReduction, ATiedEmbeddingJoinsTheFirstAndLastStageAtTheEndOfTheirRanks) {
  const Schedule s = generated("1f1b", 4, 8);
  EXPECT_EQ(tie_groups(s, {{0, 3}}), (std::vector<int>{0, -1, -1, 0}));
  const Schedule tied = add_tied_reductions(s, {{0, 3}});
  EXPECT_EQ(tied_of(tied, 0), (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0}}));
  EXPECT_EQ(tied_of(tied, 3), (std::vector<Action>{{ActionKind::REDUCE_TIED, 3, 0}}));
  EXPECT_TRUE(tied_of(tied, 1).empty());
  EXPECT_TRUE(tied_of(tied, 2).empty());
  EXPECT_EQ(tied.actions[0].back(), (Action{ActionKind::REDUCE_TIED, 0, 0}));
  // Nothing else moved.
  for (int r = 0; r < 4; ++r) {
    std::vector<Action> rest = tied.actions[r];
    rest.erase(std::remove_if(rest.begin(), rest.end(),
                              [](const Action& a) { return a.kind == ActionKind::REDUCE_TIED; }),
               rest.end());
    EXPECT_EQ(rest, s.actions[r]) << "rank " << r;
  }
}

TEST(TiedReduction, ChimerasReplicatedStagesFormAGroupEachUnlessATieJoinsThem) {
  const Schedule s = generated("chimera", 4, 4);
  EXPECT_EQ(tie_groups(s, {}), (std::vector<int>{0, 1, 2, 3}));
  const Schedule replicas = add_tied_reductions(s);
  // Rank 0 holds stage 0 (down) and stage 3 (up).
  EXPECT_EQ(tied_of(replicas, 0),
            (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0}, {ActionKind::REDUCE_TIED, 3, 3}}));
  EXPECT_EQ(tied_of(replicas, 3),
            (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0}, {ActionKind::REDUCE_TIED, 3, 3}}));
  // A tied embedding joins stages 0 and 3 into one group.
  EXPECT_EQ(tie_groups(s, {{0, 3}}), (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(tied_of(add_tied_reductions(s, {{0, 3}}), 0),
            (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0}, {ActionKind::REDUCE_TIED, 3, 0}}));
}

TEST(TiedReduction, BothCopiesInOneStageStillSumLocallyAndNoTieChangesNothing) {
  const Schedule one = generated("1f1b", 1, 2);
  EXPECT_EQ(tied_of(add_tied_reductions(one, {{0, 0}}), 0),
            (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0}}));
  const Schedule s = generated("1f1b", 2, 2);
  EXPECT_EQ(add_tied_reductions(s).actions, s.actions);
}

TEST(TiedReduction, RefusesAScheduleWithoutAFlushOrWithTiesAlreadyOrAStageOutOfRange) {
  EXPECT_THAT(error_of([] { add_tied_reductions(generate("2bw", GeneratorOptions{}.set_ranks(2).set_microbatches(4)), {{0, 1}}); }),
              HasSubstr("no flush between steps"));
  const Schedule tied = add_tied_reductions(generated("1f1b", 2, 2), {{0, 1}});
  EXPECT_THAT(error_of([&] { add_tied_reductions(tied, {{0, 1}}); }), HasSubstr("already has REDUCE_TIED"));
  EXPECT_THAT(error_of([] { add_tied_reductions(generated("1f1b", 2, 2), {{0, 2}}); }),
              HasSubstr("names stage 2"));
}

TEST(TiedReduction, TheTextFormatReadsBackWhatItWrites) {
  const Schedule tied = add_tied_reductions(generated("1f1b", 2, 2), {{0, 1}});
  const Schedule back = parse_schedule(format_schedule(tied));
  EXPECT_EQ(back.actions, tied.actions);
  EXPECT_EQ(to_string(Action{ActionKind::REDUCE_TIED, 3, 0}), "3REDUCE_TIED0");
  EXPECT_EQ(parse_action("3REDUCE_TIED0"), (Action{ActionKind::REDUCE_TIED, 3, 0}));
}

TEST(TiedReductionRules, EachFollowsEveryOtherActionOfItsRankOnAStageItComputesInOneGroup) {
  EXPECT_EQ(validate_error("0F0 0B0 0REDUCE_TIED0\n1F0 1B0 1REDUCE_TIED0\n"), "");
  EXPECT_THAT(validate_error("0F0 0F1 0B0 0REDUCE_TIED0 0B1\n"),
              HasSubstr("0REDUCE_TIED0 comes before 0B1; a REDUCE_TIED waits for the other copies"));
  EXPECT_THAT(validate_error("0F0 0B0 1REDUCE_TIED0\n1F0 1B0\n"),
              HasSubstr("which rank 0 does not compute"));
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED0 0REDUCE_TIED0\n1F0 1B0\n"), HasSubstr("appears twice"));
  // Group 1 for stage 0 is above the stage: a group is named by its lowest stage.
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED1\n1F0 1B0 1REDUCE_TIED1\n"), HasSubstr("out of range"));
  // REDUCE_GRAD goes before it.
  EXPECT_EQ(validate_error("0F0 0B0 0REDUCE_GRAD0 0REDUCE_TIED0\n"), "");
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED0 0REDUCE_GRAD0\n"), HasSubstr("must follow all"));
}

TEST(TiedReductionRules, TheCopiesOfAReplicatedStageNameOneGroup) {
  // Stage 1 on ranks 0 and 1 (micro-batch 0 on rank 0, 1 on rank 1) in groups 0 and 1.
  EXPECT_THAT(validate_error("0F0 1F0 1B0 0B0 1REDUCE_TIED0 0REDUCE_TIED0\n"
                             "0F1 1F1 1B1 0B1 1REDUCE_TIED1 0REDUCE_TIED0\n"),
              HasSubstr("stage 1 is in tie group 0 on rank 0 but in group 1 on rank 1"));
}

}  // namespace
}  // namespace baton::schedule
