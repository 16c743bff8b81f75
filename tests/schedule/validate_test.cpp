// One hand-made schedule per class of mistake. Each error must name the rule
// and the action, and show the grid with the offending actions marked.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

// The error validate() throws ("" if it throws none).
std::string validate_error(const Schedule& s) {
  try {
    validate(s);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string validate_error(const std::string& text) {
  return validate_error(parse_schedule(text));
}

void expect_names(const std::string& message, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(message.empty()) << "validate() accepted the schedule";
  EXPECT_EQ(message.rfind("[schedule.validate] ", 0), 0u) << message;
  for (const char* part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "missing \"" << part << "\" in:\n"
                                                     << message;
}

TEST(Validate, AcceptsLoweredOneFOneB) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(3).set_microbatches(5));
  EXPECT_EQ(validate_error(s), "");
  EXPECT_EQ(validate_error(lower(s)), "");
}

TEST(Validate, RejectsAMissingForwardAndMarksTheBackward) {
  expect_names(validate_error("0F0 0B0 0B1"),
               {"stage 0 micro-batch 1 has 0 F actions", "needs exactly one", ">0B1<", "rank 0 |"});
}

TEST(Validate, RejectsADuplicateForward) {
  expect_names(validate_error("0F0 0F0 0B0"),
               {"stage 0 micro-batch 0 has 2 F actions", "needs exactly one", ">0F0<"});
}

TEST(Validate, RejectsBothAFullBackwardAndAnInputBackward) {
  expect_names(validate_error("0F0 0B0 0I0 0W0"),
               {"stage 0 micro-batch 0 has 1 B, 1 I and 1 W actions",
                "it needs one B, or one I and one W", ">0B0<", ">0I0<", ">0W0<"});
}

TEST(Validate, RejectsAWeightBackwardWithoutItsInputBackward) {
  expect_names(validate_error("0F0 0W0"),
               {"stage 0 micro-batch 0 has 0 B, 0 I and 1 W actions", ">0W0<"});
}

TEST(Validate, RejectsAWeightBackwardBeforeItsInputBackward) {
  expect_names(validate_error("0F0 0W0 0I0"), {"rank 0: stage 0 micro-batch 0 runs W before I",
                                               "0W0 needs 0I0 first", ">0W0<", ">0I0<"});
}

TEST(Validate, RejectsABackwardBeforeItsForwardOnTheSameRank) {
  expect_names(validate_error("0F0 0B1 0F1 0B0"), {"rank 0: stage 0 micro-batch 1 runs B before F",
                                                   "0B1 needs 0F1 first", ">0B1<", ">0F1<"});
}

TEST(Validate, RejectsForwardStagesOutOfOrderOnOneRank) {
  // Two stages on one rank (as interleaved at p = 1): stage 1 before stage 0.
  expect_names(validate_error("1F0 0F0 1B0 0B0"),
               {"rank 0: stage 1 micro-batch 0 runs F before stage 0's F (1F0 needs 0F0 first)",
                ">1F0<", ">0F0<"});
}

// Issue 16.9: with a stage on two ranks this said only "runs F before F".
TEST(Validate, AnOrderErrorNamesTheRanksOfAStagePlacedOnTwo) {
  // Both ranks hold stages 0 to 2 (a micro-batch each); rank 1 puts 1F1 before 0F1.
  expect_names(validate_error("0F0 1F0 2F0 2B0 1B0 0B0\n"
                              "1F1 0F1 2F1 2B1 1B1 0B1"),
               {"rank 1: stage 1 micro-batch 1 runs F before stage 0's F (1F1 needs 0F1 first, "
                "later on rank 1; stage 0 is placed on ranks 0 and 1, micro-batch 1 on rank 1)",
                ">1F1<", ">0F1<"});
}

TEST(Validate, RejectsAForwardBeforeItsReceive) {
  expect_names(validate_error("0F0 0SEND_F0 0RECV_B0 0B0\n"
                              "1F0 1RECV_F0 1B0 1SEND_B0"),
               {"rank 1: stage 1 micro-batch 0 runs F before RECV_F", "1F0 needs 1RECV_F0 first",
                ">1F0<", ">1RECV_F0<"});
}

TEST(Validate, RejectsAMissingSendAndMarksTheForwardThatShouldSend) {
  expect_names(validate_error("0F0 0RECV_B0 0B0\n"
                              "1RECV_F0 1F0 1B0 1SEND_B0"),
               {"rank 0 needs exactly one 0SEND_F0, found 0", ">0F0<"});
}

TEST(Validate, RejectsAMissingReceiveAndMarksTheBackwardThatShouldReceive) {
  expect_names(validate_error("0F0 0SEND_F0 0B0\n"
                              "1RECV_F0 1F0 1B0 1SEND_B0"),
               {"rank 0 needs exactly one 0RECV_B0, found 0", ">0B0<"});
}

TEST(Validate, RejectsASendOnTheWrongRank) {
  expect_names(validate_error("0F0 0RECV_B0 0B0\n"
                              "0SEND_F0 1RECV_F0 1F0 1B0 1SEND_B0"),
               {"0SEND_F0 is on rank 1 but stage 0 of micro-batch 0 runs on rank 0", ">0SEND_F0<"});
}

TEST(Validate, RejectsCommunicationBetweenStagesOnOneRank) {
  expect_names(validate_error("0F0 0SEND_F0 1RECV_F0 1F0 1B0 0B0"),
               {"0SEND_F0: stages 0 and 1 of micro-batch 0 are both on rank 0",
                "remove the communication", ">0SEND_F0<"});
}

TEST(Validate, RejectsCommunicationWithNoPeerStage) {
  expect_names(validate_error("0RECV_F0 0F0 0B0"),
               {"rank 0: 0RECV_F0 has no peer stage", ">0RECV_F0<"});
}

TEST(Validate, RejectsAnOutOfRangeStage) {
  Schedule s = parse_schedule("0F0 0B0");
  s.actions[0].push_back(Action{ActionKind::F, 1, 0});
  expect_names(validate_error(s), {"rank 0: 1F0 is out of range (stages 0..0", ">1F0<"});
}

TEST(Validate, RejectsAnOutOfRangeMicrobatch) {
  Schedule s = parse_schedule("0F0 0B0");
  s.actions[0].push_back(Action{ActionKind::B, 0, 3});
  expect_names(validate_error(s), {"rank 0: 0B3 is out of range", "micro-batches 0..0)", ">0B3<"});
}

TEST(Validate, RejectsAStageAndMicrobatchSplitAcrossRanks) {
  expect_names(validate_error("0F0\n0B0"),
               {"stage 0 micro-batch 0 has compute on rank 0 (0F0) and rank 1 (0B0)",
                "each (stage, micro-batch) runs on one rank", ">0F0<", ">0B0<"});
}

TEST(Validate, RejectsTwoRanksThatEachReceiveBeforeSending) {
  expect_names(validate_error("0F0 0RECV_B0 0SEND_F0 0B0\n"
                              "1RECV_F0 1F0 1B0 1SEND_B0"),
               {"deadlock: ", "rank 0 waits at 0RECV_B0 for 1SEND_B0 on rank 1",
                "rank 1 waits at 1RECV_F0 for 0SEND_F0 on rank 0", ">0RECV_B0<", ">1RECV_F0<"});
}

TEST(Validate, RejectsACrossRankCycleInAComputeOnlySchedule) {
  // Rank 0 wants micro-batch 0's gradient before it forwards micro-batch 1;
  // rank 1 wants micro-batch 1's forward before it touches micro-batch 0.
  expect_names(validate_error("0F0 0B0 0F1 0B1\n"
                              "1F1 1B1 1F0 1B0"),
               {"deadlock: ", "rank 0 waits at 0B0 for 1B0 on rank 1",
                "rank 1 waits at 1F1 for 0F1 on rank 0", ">0B0<", ">1F1<"});
}

// Issue 7.13: the error of a large invalid schedule printed its whole grid.
TEST(Validate, BoundsTheMessageOfALargeInvalidSchedule) {
  Schedule s = generate("1f1b", GeneratorOptions().set_ranks(64).set_microbatches(512));
  auto& list = s.actions[40];
  const auto f = std::find(list.begin(), list.end(), Action{ActionKind::F, 40, 300});
  const auto b = std::find(list.begin(), list.end(), Action{ActionKind::B, 40, 300});
  ASSERT_TRUE(f != list.end() && b != list.end());
  std::iter_swap(f, b);  // B before F, in the middle of 64 ranks of 1024 actions
  const std::string message = validate_error(s);
  ASSERT_FALSE(message.empty());
  EXPECT_LT(message.size(), 8u * 1024) << message.size();
  EXPECT_NE(message.find(">40"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 38 |"), std::string::npos) << message;
  EXPECT_EQ(message.find("rank 37 |"), std::string::npos) << message;
}

TEST(Validate, NamesAFewRanksOfADeadlockOfManyOnItsFirstLine) {
  // Rank 0 runs micro-batch 0 through; every other rank wants micro-batch 1 first.
  std::string text = "0F0 0B0 0F1 0B1\n";
  for (int r = 1; r < 40; ++r) {
    const std::string s = std::to_string(r);
    text += s + "F1 " + s + "F0 " + s + "B0 " + s + "B1\n";
  }
  const std::string message = validate_error(text);
  const std::string first_line = message.substr(0, message.find('\n'));
  expect_names(first_line,
               {"deadlock: ", "rank 0 waits at 0B0 for 1B0 on rank 1", "; 32 more ranks wait"});
  EXPECT_LT(first_line.size(), 600u) << first_line;
}

}  // namespace
}  // namespace baton::schedule
