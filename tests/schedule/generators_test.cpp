// Every generator over p = 1..16, m = 1..64, v = 0..4: it either builds a
// schedule that validates and lowers, or refuses with an error that names it.
// Then hand-derived orders for interleaved and looped-bfs.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <tuple>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

std::vector<Action> compute_only(const std::vector<Action>& list) {
  std::vector<Action> out;
  for (const Action& a : list)
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

std::vector<Action> parse_rank(const std::string& line) {
  return parse_schedule(line).actions.at(0);
}

// Checks one generated schedule; returns "" or what is wrong.
std::string check_generated(const std::string& name, int p, int m, int v, const Schedule& s) {
  if (s.name != name) return "name is \"" + s.name + "\"";
  if (s.ranks != p || static_cast<int>(s.actions.size()) != p) return "wrong number of ranks";
  if (s.microbatches != m) return "wrong micro-batch count";
  if (s.stages < p || s.stages % p != 0) return "stages not a multiple of p";
  if (v > 0 && s.map == StageMap::Loop && s.stages != p * v) return "stages != p * v";
  if (s.has_communication()) return "generator emitted communication";
  try {
    validate(s);
    const Schedule lowered = lower(s);
    validate(lowered);
    if (lowered.ranks != p) return "lowering changed p";
    for (int r = 0; r < p; ++r) {
      if (compute_only(lowered.actions[r]) != s.actions[r])
        return "lowering changed the compute of rank " + std::to_string(r);
    }
    if (p > 1 && !lowered.has_communication()) return "lowered schedule has no communication";
  } catch (const Error& e) {
    return std::string("generated schedule is invalid: ") + e.what();
  }
  return "";
}

class EveryGenerator : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(EveryGenerator, EitherBuildsAValidLowerableScheduleOrNamesItselfInTheError) {
  const auto& [name, p] = GetParam();
  const std::string tag = "[schedule." + name + "]";
  int built = 0, refused = 0, reported = 0;
  for (int m = 1; m <= 64; ++m) {
    for (int v = 0; v <= 4; ++v) {
      const auto options =
          GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v);
      std::string problem;
      try {
        const Schedule s = generate(name, options);
        problem = check_generated(name, p, m, v, s);
        ++built;
      } catch (const Error& e) {
        const std::string message = e.what();
        if (message.find(tag) == std::string::npos)
          problem = "error does not name " + tag + ": " + message;
        ++refused;
      } catch (const std::exception& e) {
        problem = std::string("threw something other than baton::Error: ") + e.what();
      }
      if (!problem.empty() && reported++ < 3) {
        ADD_FAILURE() << name << " p=" << p << " m=" << m << " v=" << v << ": " << problem;
      }
    }
  }
  EXPECT_EQ(reported, 0) << name << " p=" << p << ": " << reported << " of " << 64 * 5
                         << " cases failed (first 3 shown)";
  RecordProperty("built", built);
  RecordProperty("refused", refused);
}

std::vector<int> ranks_1_to_16() {
  std::vector<int> out;
  for (int p = 1; p <= 16; ++p) out.push_back(p);
  return out;
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, int>>& info) {
  std::string name = std::get<0>(info.param);
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name + "_p" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(NamesByRanks, EveryGenerator,
                         ::testing::Combine(::testing::ValuesIn(schedule_names()),
                                            ::testing::ValuesIn(ranks_1_to_16())),
                         case_name);

class EachGenerator : public ::testing::TestWithParam<std::string> {};

// Guards the sweep above against a generator that refuses everything.
TEST_P(EachGenerator, BuildsItsDefaultShapeOfFourRanksAndEightMicrobatches) {
  const Schedule s = generate(GetParam(), GeneratorOptions().set_ranks(4).set_microbatches(8));
  EXPECT_EQ(check_generated(GetParam(), 4, 8, 0, s), "");
}

// The registry's flush property, which the planner and the stats simulator
// read instead of comparing names, is what the generator builds.
TEST_P(EachGenerator, FlushesExactlyWhenItsScheduleCarriesNothingBetweenSteps) {
  const Schedule s = generate(GetParam(), GeneratorOptions().set_ranks(4).set_microbatches(8));
  EXPECT_EQ(flushes(GetParam()), !s.carries) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(AllNames, EachGenerator, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(Generate, RejectsAnUnknownNameAndListsTheKnownOnes) {
  try {
    generate("2f2b", GeneratorOptions());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown schedule \"2f2b\""), std::string::npos) << message;
    EXPECT_NE(message.find("interleaved"), std::string::npos) << message;
    EXPECT_NE(message.find("looped-bfs"), std::string::npos) << message;
  }
}

// Issue 7.3: p = 4096, m = 2^20 went on to build tens of billions of actions.
class EachGeneratorPastTheLimit : public ::testing::TestWithParam<std::string> {};

TEST_P(EachGeneratorPastTheLimit, RefusesTheShapeBeforeBuildingIt) {
  try {
    generate(GetParam(), GeneratorOptions().set_ranks(4096).set_microbatches(1 << 20));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[schedule.generate] " + GetParam() + " with pp=4096, m=1048576"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("more than the limit of 50000000"), std::string::npos) << message;
  }
}

INSTANTIATE_TEST_SUITE_P(AllNames, EachGeneratorPastTheLimit, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(Generate, RefusesRanksMicrobatchesAndChunksPastTheirLimits) {
  auto message = [](const GeneratorOptions& options) -> std::string {
    try {
      generate("interleaved", options);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message(GeneratorOptions().set_ranks(5000).set_microbatches(1))
                .find("pp=5000 exceeds the limit of 4096"),
            std::string::npos);
  EXPECT_NE(message(GeneratorOptions().set_ranks(1).set_microbatches(2000000))
                .find("m=2000000 exceeds the limit of 1048576"),
            std::string::npos);
  EXPECT_NE(message(GeneratorOptions().set_ranks(1).set_microbatches(1).set_virtual_stages(2000))
                .find("v=2000 exceeds the limit of 1024"),
            std::string::npos);
}

// Megatron's formulas applied by hand for p = 2, v = 2, m = 4: forward k runs
// chunk (k % 4) / 2 of micro-batch (k / 4) * 2 + k % 2; backward k runs chunk
// 1 - (k % 4) / 2; warmup is 4 on rank 0 and 2 on rank 1.
TEST(Interleaved, FollowsMegatronsOrderForTwoRanksTwoChunksFourMicrobatches) {
  const Schedule s = interleaved(GeneratorOptions().set_ranks(2).set_microbatches(4));
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.map, StageMap::Loop);
  EXPECT_EQ(s.actions[0], parse_rank("0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 "
                                     "2B2 2B3 0B2 0B3"));
  EXPECT_EQ(s.actions[1], parse_rank("1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 "
                                     "3F3 3B3 1B2 1B3"));
}

TEST(Interleaved, WarmsUpWithEveryForwardWhenMicrobatchesEqualRanks) {
  const Schedule s = interleaved(GeneratorOptions().set_ranks(2).set_microbatches(2));
  EXPECT_EQ(s.actions[1], parse_rank("1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1"));
}

TEST(Interleaved, UsesTheRequestedNumberOfChunksOnTheLoopMap) {
  const Schedule s =
      interleaved(GeneratorOptions().set_ranks(3).set_microbatches(6).set_virtual_stages(4));
  EXPECT_EQ(s.stages, 12);
  EXPECT_EQ(s.stages_per_rank(), 4);
  const Placement placement(s);
  for (int stage = 0; stage < 12; ++stage) EXPECT_EQ(placement.rank_of(stage, 5), stage % 3);
}

TEST(Interleaved, RejectsOneChunkAndPointsToOneFOneB) {
  try {
    interleaved(GeneratorOptions().set_ranks(2).set_microbatches(4).set_virtual_stages(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[schedule.interleaved]"), std::string::npos) << message;
    EXPECT_NE(message.find("1f1b"), std::string::npos) << message;
  }
}

TEST(Interleaved, RejectsMicrobatchesThatDoNotSplitIntoEqualGroupsOfAtLeastRanks) {
  try {
    interleaved(GeneratorOptions().set_ranks(4).set_microbatches(9));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[schedule.interleaved]"), std::string::npos) << message;
    EXPECT_NE(message.find("m=9 with pp=4"), std::string::npos) << message;
    EXPECT_NE(message.find("groups of p"), std::string::npos) << message;
    EXPECT_NE(message.find("try m=12"), std::string::npos) << message;
  }
}

// As PyTorch's ScheduleInterleaved1F1B: m = 6, p = 4 is one group of six
// micro-batches; warmup is (v - 1) * 6 + 2 * (p - 1 - r) chunk forwards.
TEST(Interleaved, RunsMicrobatchesNotAMultipleOfRanksInOneGroupAsPyTorchDoes) {
  const Schedule s = interleaved(GeneratorOptions().set_ranks(4).set_microbatches(6));
  EXPECT_NO_THROW(validate(s));
  EXPECT_EQ(s.actions[3], parse_rank("3F0 3F1 3F2 3F3 3F4 3F5 7F0 7B0 7F1 7B1 7F2 7B2 7F3 7B3 "
                                     "7F4 7B4 7F5 7B5 3B0 3B1 3B2 3B3 3B4 3B5"));
  // Rank 0 warms up with 6 + 6 = 12 forwards: all of them.
  EXPECT_EQ(s.actions[0][11], parse_rank("4F5")[0]);
  EXPECT_EQ(s.actions[0][12], parse_rank("4B0")[0]);
}

TEST(LoopedBfs, RunsAllForwardsChunkByChunkThenBackwardsInReverse) {
  const Schedule s = looped_bfs(GeneratorOptions().set_ranks(2).set_microbatches(3));
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.actions[0], parse_rank("0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0"));
  EXPECT_EQ(s.actions[1], parse_rank("1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0"));
}

TEST(LoopedBfs, WithOneChunkRunsGpipesForwards) {
  const auto options = GeneratorOptions().set_ranks(3).set_microbatches(5).set_virtual_stages(1);
  const Schedule bfs = looped_bfs(options), gp = gpipe(options);
  ASSERT_EQ(bfs.stages, 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(std::vector<Action>(bfs.actions[r].begin(), bfs.actions[r].begin() + 5),
              std::vector<Action>(gp.actions[r].begin(), gp.actions[r].begin() + 5));
  }
}

}  // namespace
}  // namespace baton::schedule
