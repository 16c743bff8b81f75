// REDUCE_GRAD: DDP's bucket packing, the placement pass, its notation and the
// validator's rules for it. REDUCE_TIED: the tie groups (tied weights and
// replicated stages), the pass that places one per (rank, stage) of a group at
// the end of the rank's list, its notation, and the validator's rules for it.
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/tied_reduction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "tests/schedule/error_of.h"

namespace baton::schedule {
namespace {

using test::error_of;
using test::validate_error;

using ::testing::HasSubstr;
using ::testing::Not;

TEST(GradientBuckets, PacksInReverseLayerOrderAndGivesALargeParameterItsOwnBucket) {
  // Reversed: 20, 5 | 5 | 30 (larger than a bucket) | 10.
  EXPECT_EQ(gradient_buckets({10, 30, 5, 5, 20}, 25), (std::vector<double>{25, 5, 30, 10}));
  EXPECT_EQ(gradient_buckets({1, 2, 3}, 100), (std::vector<double>{6}));
  EXPECT_EQ(gradient_buckets({50, 50}, 25), (std::vector<double>{50, 50}));
  EXPECT_TRUE(gradient_buckets({}, 25).empty());
}

TEST(GradientBuckets, MembersListEachBucketsParametersInPackingOrder) {
  // {10, 30, 5, 5, 20} in 25-byte buckets: [20, 5], [5], [30], [10].
  EXPECT_EQ(gradient_bucket_members({10, 30, 5, 5, 20}, 25),
            (std::vector<std::vector<int>>{{4, 3}, {2}, {1}, {0}}));
  EXPECT_EQ(gradient_bucket_members({1, 2, 3}, 100), (std::vector<std::vector<int>>{{2, 1, 0}}));
  EXPECT_TRUE(gradient_bucket_members({}, 25).empty());
}

TEST(GradientBuckets, RefusesANonPositiveBucketAndNegativeSizes) {
  EXPECT_THAT(error_of([] { gradient_buckets({1}, 0); }),
              HasSubstr("bucket size must be finite and > 0, got 0"));
  EXPECT_THAT(error_of([] {
                gradient_buckets({1, -2}, 4);
              }),
              HasSubstr("parameter 1 has -2 bytes"));
}

TEST(GradientBuckets, EvenBucketsCutTheTotalWithASmallerLastOne) {
  EXPECT_EQ(even_gradient_buckets(60, 25), (std::vector<double>{25, 25, 10}));
  EXPECT_EQ(even_gradient_buckets(50, 25), (std::vector<double>{25, 25}));
  EXPECT_EQ(even_gradient_buckets(0, 25), (std::vector<double>{0}));
  EXPECT_THAT(error_of([] { even_gradient_buckets(1e300, 1); }),
              HasSubstr("buckets; use larger buckets"));
}

TEST(ReduceGradNotation, CarriesTheBucketInTheMicrobatchSlot) {
  EXPECT_EQ(to_string(Action{ActionKind::REDUCE_GRAD, 1, 3}), "1REDUCE_GRAD3");
  EXPECT_EQ(parse_action("1REDUCE_GRAD3"), (Action{ActionKind::REDUCE_GRAD, 1, 3}));
  // PyTorch's form, without a number: bucket 0.
  EXPECT_EQ(parse_action("2REDUCE_GRAD"), (Action{ActionKind::REDUCE_GRAD, 2, 0}));
  EXPECT_THAT(error_of([] { parse_action("2F"); }),
              HasSubstr("must end with a micro-batch number"));
}

// Issue 16.9: a REDUCE_GRAD's bucket number was called a micro-batch.
TEST(ReduceGradNotation, ParseErrorsCallTheNumberABucketNotAMicrobatch) {
  const std::string trailing = error_of([] { parse_action("1REDUCE_GRAD2x"); });
  EXPECT_THAT(trailing, HasSubstr("\"1REDUCE_GRAD2x\" must end with a bucket number, as in "
                                  "2REDUCE_GRAD0"));
  EXPECT_THAT(trailing, Not(HasSubstr("micro-batch")));
  const std::string large = error_of([] { parse_action("1REDUCE_GRAD99999999"); });
  EXPECT_THAT(large, HasSubstr(": bucket 99999999 exceeds the limit of"));
  EXPECT_THAT(large, Not(HasSubstr("micro-batch")));
  EXPECT_THAT(error_of([] { parse_action("1REDUCE_TIED0x"); }),
              HasSubstr("must end with a tie group number, as in 2REDUCE_TIED0"));
}

TEST(AddGradReductions, PlacesEachStagesBucketsRightAfterItsLastBackwardAndSend) {
  const Schedule s = lower(generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(2)));
  EXPECT_EQ(format_schedule(add_grad_reductions(s, 2, {2, 1})),
            "# baton schedule: name=1f1b pp=2 stages=2 microbatches=2 map=loop\n"
            "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD0 0REDUCE_GRAD1\n"
            "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1REDUCE_GRAD0\n");
}

TEST(AddGradReductions, LoweringAfterOrBeforeGivesTheSameSchedule) {
  const Schedule s = generate("interleaved", GeneratorOptions().set_ranks(2).set_microbatches(4));
  const std::vector<int> buckets{1, 2, 3, 1};
  EXPECT_EQ(format_schedule(lower(add_grad_reductions(s, 4, buckets))),
            format_schedule(add_grad_reductions(lower(s), 4, buckets)));
}

TEST(AddGradReductions, FollowsTheLastWeightBackwardOfASplitSchedule) {
  const Schedule s = generate("zb-h1", GeneratorOptions().set_ranks(2).set_microbatches(3));
  const Schedule out = add_grad_reductions(s, 2, {1, 1});
  for (int r = 0; r < 2; ++r) {
    const auto& list = out.actions[r];
    ASSERT_EQ(list.back(), (Action{ActionKind::REDUCE_GRAD, r, 0})) << format_schedule(out);
    EXPECT_EQ(list[list.size() - 2].kind, ActionKind::W) << format_schedule(out);
  }
}

TEST(AddGradReductions, AddsNothingWithOneReplica) {
  const Schedule s = lower(generate("1f1b", GeneratorOptions().set_ranks(3).set_microbatches(4)));
  EXPECT_EQ(format_schedule(add_grad_reductions(s, 1, {4, 4, 4})), format_schedule(s));
}

TEST(AddGradReductions, RefusesBadCountsAndASecondPass) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(2));
  EXPECT_THAT(error_of([&] {
                add_grad_reductions(s, 0, {1, 1});
              }),
              HasSubstr("dp must be >= 1, got 0"));
  EXPECT_THAT(error_of([&] { add_grad_reductions(s, 2, {1}); }),
              HasSubstr("1 bucket counts for 2 stages"));
  EXPECT_THAT(error_of([&] {
                add_grad_reductions(s, 2, {1, 0});
              }),
              HasSubstr("stage 1 has 0 buckets"));
  const Schedule once = add_grad_reductions(s, 2, {1, 1});
  EXPECT_THAT(error_of([&] {
                add_grad_reductions(once, 2, {1, 1});
              }),
              HasSubstr("already has REDUCE_GRAD"));
}

// Issue 20: on the multi-chunk schedules, a rank's chunk that finishes its
// backwards first reduces its buckets while the rank's other chunk still
// computes: some compute action of the rank follows that chunk's first
// REDUCE_GRAD.
TEST(AddGradReductions, AFinishedChunkReducesWhileTheRanksOtherChunkComputes) {
  for (const std::string name : {"interleaved", "interleaved-zb", "zb-v", "dualpipev"}) {
    for (int p : {2, 4}) {
      const Schedule plain =
          lower(generate(name, GeneratorOptions().set_ranks(p).set_microbatches(2 * p)));
      const Schedule s =
          add_grad_reductions(plain, 2, std::vector<int>(static_cast<size_t>(plain.stages), 2));
      for (int r = 0; r < p; ++r) {
        const auto& actions = s.actions[static_cast<size_t>(r)];
        const auto first_reduce = std::find_if(actions.begin(), actions.end(), [](const Action& a) {
          return a.kind == ActionKind::REDUCE_GRAD;
        });
        ASSERT_NE(first_reduce, actions.end()) << name << " p=" << p << " rank " << r;
        const int chunk = first_reduce->stage;
        const bool other_computes_after =
            std::any_of(first_reduce, actions.end(),
                        [&](const Action& a) { return is_compute(a.kind) && a.stage != chunk; });
        EXPECT_TRUE(other_computes_after) << name << " p=" << p << " rank " << r << ": stage "
                                          << chunk << "'s reduction overlaps nothing";
      }
    }
  }
}

// Every generator's schedule, reduced and lowered in either order, validates.
class EveryGenerator : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGenerator, ReducedScheduleValidatesAndEachStageOnEachRankIsReducedOnce) {
  for (int p : {1, 2, 4}) {
    for (int m : {4, 8}) {
      Schedule s;
      try {
        s = generate(GetParam(), GeneratorOptions().set_ranks(p).set_microbatches(m));
      } catch (const Error&) {
        continue;  // a shape this generator refuses
      }
      if (s.carries) {  // no flush (2bw): no point where a step's gradients are whole
        EXPECT_THROW(add_grad_reductions(lower(s), 2, std::vector<int>(s.stages, 2)), Error);
        EXPECT_EQ(add_grad_reductions(lower(s), 1, std::vector<int>(s.stages, 1)).actions,
                  lower(s).actions);
        continue;
      }
      const Schedule out = add_grad_reductions(lower(s), 2, std::vector<int>(s.stages, 2));
      const Placement placement(out);
      size_t expected = 0;
      for (int r = 0; r < p; ++r) expected += 2 * placement.stages_of_rank(r).size();
      EXPECT_EQ(out.action_count(), lower(s).action_count() + expected)
          << GetParam() << " p=" << p << " m=" << m;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Generators, EveryGenerator, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

TEST(ValidateReduceGrad, AcceptsReductionsAfterTheLastBackward) {
  EXPECT_EQ(validate_error("0F0 0F1 0B0 0B1 0REDUCE_GRAD0 0REDUCE_GRAD1\n"), "");
}

TEST(ValidateReduceGrad, RefusesAReductionBeforeTheStagesLastBackward) {
  const std::string e = validate_error("0F0 0F1 0B0 0REDUCE_GRAD0 0B1\n");
  EXPECT_THAT(e, HasSubstr("[schedule.validate] rank 0: 0REDUCE_GRAD0 comes before 0B1; a "
                           "stage's gradient reduction must follow its last backward (B or W)"));
  EXPECT_THAT(e, HasSubstr(">0REDUCE_GRAD0<"));
  EXPECT_THAT(validate_error("0F0 0I0 0REDUCE_GRAD0 0W0\n"), HasSubstr("comes before 0W0"));
}

TEST(ValidateReduceGrad, RefusesAStageTheRankDoesNotCompute) {
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_GRAD0 1REDUCE_GRAD0\n1F0 1B0 1REDUCE_GRAD0\n"),
              HasSubstr("rank 0: 1REDUCE_GRAD0 reduces the gradients of stage 1, which rank 0 "
                        "does not compute"));
}

TEST(ValidateReduceGrad, RefusesADuplicateAGapAndAnUnreducedStage) {
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_GRAD0 0REDUCE_GRAD0\n"),
              HasSubstr("0REDUCE_GRAD0 appears twice"));
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_GRAD0 0REDUCE_GRAD2\n"),
              HasSubstr("rank 0 reduces 2 buckets of stage 0 but names bucket 2"));
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_GRAD0\n1F0 1B0\n"),
              HasSubstr("rank 1 computes stage 1 but reduces none of its gradients"));
}

TEST(ValidateReduceGrad, RefusesHoldersOfAStageThatReduceDifferentBuckets) {
  // Stage 0 on both ranks (micro-batch 0 on rank 0, 1 on rank 1).
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_GRAD0\n0F1 0B1 0REDUCE_GRAD0 0REDUCE_GRAD1\n"),
              HasSubstr("stage 0 is reduced in 1 buckets on rank 0 but in 2 on rank 1"));
}

TEST(ValidateReduceGrad, ABucketNumberIsNoMicrobatchForTheShape) {
  // Bucket 5 with m = 1: parsed and validated as a bucket.
  const Schedule s = parse_schedule(
      "0F0 0B0 0REDUCE_GRAD0 0REDUCE_GRAD1 0REDUCE_GRAD2 0REDUCE_GRAD3 0REDUCE_GRAD4 "
      "0REDUCE_GRAD5\n");
  EXPECT_EQ(s.microbatches, 1);
  EXPECT_NO_THROW(validate(s));
  EXPECT_NO_THROW(lower(s));
}

// Without the overlap every REDUCE_GRAD follows the rank's last compute, in
// the order the pass placed them; the compute order is untouched.
TEST(DeferGradReductions, MovesEveryReductionAfterTheRanksLastAction) {
  const Schedule s = lower(generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(4)));
  const Schedule reduced = add_grad_reductions(s, 2, std::vector<int>(s.stages, 3));
  const Schedule deferred = defer_grad_reductions(reduced);
  for (int r = 0; r < 2; ++r) {
    const auto& list = deferred.actions[r];
    ASSERT_EQ(list.size(), reduced.actions[r].size());
    std::vector<Action> compute, reductions, want_reductions;
    for (const Action& a : list) (is_reduction(a.kind) ? reductions : compute).push_back(a);
    for (const Action& a : reduced.actions[r])
      if (is_reduction(a.kind)) want_reductions.push_back(a);
    EXPECT_EQ(compute, s.actions[r]) << "rank " << r;
    EXPECT_EQ(reductions, want_reductions) << "rank " << r;
    ASSERT_EQ(reductions.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(is_reduction(list[list.size() - 1 - i].kind));
  }
  // interleaved: a rank's second chunk finishes its backwards first, so the
  // pass reduces it while the first chunk still computes; deferred, it waits.
  const Schedule il =
      lower(generate("interleaved", GeneratorOptions().set_ranks(2).set_microbatches(4)));
  const Schedule il_reduced = add_grad_reductions(il, 2, std::vector<int>(il.stages, 1));
  const auto& placed = il_reduced.actions[0];
  EXPECT_FALSE(is_reduction(placed.back().kind) && is_reduction(placed[placed.size() - 2].kind))
      << "the pass should overlap one chunk's reduction with compute";
  const Schedule il_deferred = defer_grad_reductions(il_reduced);
  const auto& moved = il_deferred.actions[0];
  EXPECT_TRUE(is_reduction(moved.back().kind) && is_reduction(moved[moved.size() - 2].kind));
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
  EXPECT_EQ(tied_of(replicas, 0), (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0},
                                                       {ActionKind::REDUCE_TIED, 3, 3}}));
  EXPECT_EQ(tied_of(replicas, 3), (std::vector<Action>{{ActionKind::REDUCE_TIED, 0, 0},
                                                       {ActionKind::REDUCE_TIED, 3, 3}}));
  // A tied embedding joins stages 0 and 3 into one group.
  EXPECT_EQ(tie_groups(s, {{0, 3}}), (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(
      tied_of(add_tied_reductions(s, {{0, 3}}), 0),
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
  EXPECT_THAT(error_of([] {
                add_tied_reductions(
                    generate("2bw", GeneratorOptions{}.set_ranks(2).set_microbatches(4)), {{0, 1}});
              }),
              HasSubstr("no flush between steps"));
  const Schedule tied = add_tied_reductions(generated("1f1b", 2, 2), {{0, 1}});
  EXPECT_THAT(error_of([&] {
                add_tied_reductions(tied, {{0, 1}});
              }),
              HasSubstr("already has REDUCE_TIED"));
  EXPECT_THAT(error_of([] {
                add_tied_reductions(generated("1f1b", 2, 2), {{0, 2}});
              }),
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
  EXPECT_THAT(
      validate_error("0F0 0F1 0B0 0REDUCE_TIED0 0B1\n"),
      HasSubstr("0REDUCE_TIED0 comes before 0B1; a REDUCE_TIED waits for the other copies"));
  EXPECT_THAT(validate_error("0F0 0B0 1REDUCE_TIED0\n1F0 1B0\n"),
              HasSubstr("which rank 0 does not compute"));
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED0 0REDUCE_TIED0\n1F0 1B0\n"),
              HasSubstr("appears twice"));
  // Group 1 for stage 0 is above the stage: a group is named by its lowest stage.
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED1\n1F0 1B0 1REDUCE_TIED1\n"),
              HasSubstr("out of range"));
  // REDUCE_GRAD goes before it.
  EXPECT_EQ(validate_error("0F0 0B0 0REDUCE_GRAD0 0REDUCE_TIED0\n"), "");
  EXPECT_THAT(validate_error("0F0 0B0 0REDUCE_TIED0 0REDUCE_GRAD0\n"),
              HasSubstr("must follow all"));
}

TEST(TiedReductionRules, TheCopiesOfAReplicatedStageNameOneGroup) {
  // Stage 1 on ranks 0 and 1 (micro-batch 0 on rank 0, 1 on rank 1) in groups 0 and 1.
  EXPECT_THAT(validate_error("0F0 1F0 1B0 0B0 1REDUCE_TIED0 0REDUCE_TIED0\n"
                             "0F1 1F1 1B1 0B1 1REDUCE_TIED1 0REDUCE_TIED0\n"),
              HasSubstr("stage 1 is in tie group 0 on rank 0 but in group 1 on rank 1"));
}

}  // namespace
}  // namespace baton::schedule
