// CLIP_NORM: the pass that ends every rank's list with one, its notation, the
// validator's rules for it, and how runnable() keeps a file's.
#include "baton/schedule/clip_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/runnable.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "tests/schedule/error_of.h"

namespace baton::schedule {
namespace {

using test::error_of;
using test::validate_error;

using ::testing::HasSubstr;

Schedule lowered(const std::string& name, int p, int m) {
  return lower(generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m)));
}

TEST(ClipNorm, EndsEveryRankWithOneNamedByItsLowestStage) {
  for (const char* name : {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "chimera"}) {
    const Schedule s = lowered(name, 2, 4);
    const Schedule clipped = add_clip_norm(s);
    ASSERT_EQ(clipped.action_count(), s.action_count() + 2) << name;
    for (int r = 0; r < 2; ++r) {
      int lowest = s.stages;
      for (const Action& a : s.actions[r])
        if (is_compute(a.kind)) lowest = std::min(lowest, a.stage);
      EXPECT_EQ(clipped.actions[r].back(), (Action{ActionKind::CLIP_NORM, lowest, 0})) << name;
      // The rest of the list is untouched.
      EXPECT_TRUE(std::equal(s.actions[r].begin(), s.actions[r].end(), clipped.actions[r].begin()))
          << name;
    }
  }
  // zb-v's V: rank 1 holds stages 1 and 2.
  EXPECT_EQ(add_clip_norm(lowered("zb-v", 2, 4)).actions[1].back().stage, 1);
}

TEST(ClipNorm, RefusesSchedulesWithoutAFlushForwardOnlyAndASecondPass) {
  for (const char* name : {"2bw", "pipedream", "async", "pipemare"}) {
    EXPECT_THAT(error_of([&] { add_clip_norm(lowered(name, 2, 4)); }),
                HasSubstr("has no flush between steps"))
        << name;
  }
  const Schedule forward =
      lower(forward_only(generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(2)), 2));
  EXPECT_THAT(error_of([&] { add_clip_norm(forward); }), HasSubstr("forward-only"));
  const Schedule once = add_clip_norm(lowered("1f1b", 2, 2));
  EXPECT_THAT(error_of([&] { add_clip_norm(once); }), HasSubstr("already has CLIP_NORM"));
}

TEST(ClipNorm, ReadsAndWritesItsNotation) {
  const Schedule s = add_clip_norm(lowered("1f1b", 2, 2));
  const Schedule back = parse_schedule(format_schedule(s));
  EXPECT_EQ(back.actions, s.actions);
  EXPECT_EQ(parse_action("1CLIP_NORM0"), (Action{ActionKind::CLIP_NORM, 1, 0}));
  EXPECT_THAT(error_of([] { parse_action("1CLIP_NORM"); }),
              HasSubstr("must end with a clip number, as in 0CLIP_NORM0"));
}

TEST(ClipNorm, TheValidatorWantsOneOnEveryRankLastAndOnItsLowestStage) {
  const std::string head = "# p=2 m=1\n";
  // Well placed.
  EXPECT_EQ(validate_error(head + "0F0 0SEND_F0 0RECV_B0 0B0 0CLIP_NORM0\n"
                                  "1RECV_F0 1F0 1B0 1SEND_B0 1CLIP_NORM0\n"),
            "");
  EXPECT_THAT(validate_error(head + "0F0 0SEND_F0 0RECV_B0 0B0 0CLIP_NORM0\n"
                                    "1RECV_F0 1F0 1B0 1SEND_B0\n"),
              HasSubstr("rank 1 has no CLIP_NORM but other ranks do"));
  EXPECT_THAT(validate_error(head + "0F0 0SEND_F0 0CLIP_NORM0 0RECV_B0 0B0\n"
                                    "1RECV_F0 1F0 1B0 1SEND_B0 1CLIP_NORM0\n"),
              HasSubstr("0CLIP_NORM0 comes before 0B0"));
  EXPECT_THAT(validate_error(head + "0F0 0SEND_F0 0RECV_B0 0B0 0CLIP_NORM0 0CLIP_NORM0\n"
                                    "1RECV_F0 1F0 1B0 1SEND_B0 1CLIP_NORM0\n"),
              HasSubstr("appears twice"));
  EXPECT_THAT(validate_error(head + "0F0 0SEND_F0 0RECV_B0 0B0 1CLIP_NORM0\n"
                                    "1RECV_F0 1F0 1B0 1SEND_B0 1CLIP_NORM0\n"),
              HasSubstr("names stage 1 but the lowest stage rank 0 computes is 0"));
  EXPECT_THAT(validate_error(head + "0F0 0SEND_F0 0RECV_B0 0B0 0CLIP_NORM1\n"
                                    "1RECV_F0 1F0 1B0 1SEND_B0 1CLIP_NORM0\n"),
              HasSubstr("a CLIP_NORM's number is 0"));
}

TEST(ClipNorm, RunnableKeepsAFilesClipsLastAfterTheReductionsItAdds) {
  // A file with clips but no reductions, run with dp 2 and a tied pair of
  // stages: the passes append REDUCE_GRAD and REDUCE_TIED, and the clips
  // stay each rank's last action.
  const Schedule file = add_clip_norm(lowered("1f1b", 2, 2));
  const Schedule s = add_reductions(
      file, ReductionOptions().set_dp(2).set_tied({{0, 1}}).set_overlap_grad_reduce(false));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(s.actions[r].back().kind, ActionKind::CLIP_NORM) << r;
    EXPECT_EQ(s.actions[r][s.actions[r].size() - 2].kind, ActionKind::REDUCE_TIED) << r;
  }
  // Without clip and without clips in the schedule, none are added.
  EXPECT_FALSE(add_reductions(lowered("1f1b", 2, 2), ReductionOptions()).has_clip_norm());
  EXPECT_TRUE(
      add_reductions(lowered("1f1b", 2, 2), ReductionOptions().set_clip(true)).has_clip_norm());
}

}  // namespace
}  // namespace baton::schedule
