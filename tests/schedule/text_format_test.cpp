// The compact text form: every generator's schedule prints and parses back
// unchanged, the header is read and checked, and what is missing is inferred.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"

namespace baton::schedule {
namespace {

std::string parse_error(const std::string& text) {
  try {
    parse_schedule(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_same(const Schedule& got, const Schedule& want) {
  EXPECT_EQ(got.name, want.name);
  EXPECT_EQ(got.ranks, want.ranks);
  EXPECT_EQ(got.stages, want.stages);
  EXPECT_EQ(got.microbatches, want.microbatches);
  EXPECT_EQ(got.map, want.map) << to_string(got.map) << " vs " << to_string(want.map);
  EXPECT_EQ(got.actions, want.actions);
  EXPECT_EQ(got.carries, want.carries);
}

class EveryGeneratorText : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGeneratorText, PrintsAndParsesBackTheSameScheduleComputeOnlyAndLowered) {
  int round_trips = 0;
  for (int p : {1, 2, 3, 4})
    for (int m : {1, 4, 8})
      for (int v : {0, 2, 3}) {
        Schedule s;
        try {
          s = generate(GetParam(),
                       GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
        } catch (const Error&) {
          continue;  // shapes the generator does not define; the generator test covers them
        }
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " v=" + std::to_string(v));
        expect_same(parse_schedule(format_schedule(s)), s);
        const Schedule lowered = lower(s);
        expect_same(parse_schedule(format_schedule(lowered)), lowered);
        ++round_trips;
      }
  EXPECT_GT(round_trips, 0) << GetParam() << " generated no schedule at all";
}

INSTANTIATE_TEST_SUITE_P(AllNames, EveryGeneratorText, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(FormatSchedule, WritesAHeaderAndOneLinePerRank) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(3));
  EXPECT_EQ(format_schedule(s),
            "# baton schedule: name=1f1b pp=2 stages=2 microbatches=3 map=loop\n"
            "0F0 0F1 0B0 0F2 0B1 0B2\n"
            "1F0 1B0 1F1 1B1 1F2 1B2\n");
}

TEST(ParseSchedule, ReadsEveryHeaderEntry) {
  const Schedule s = parse_schedule(
      "# a comment first\n"
      "#   baton schedule: name=mine pp=2 stages=2 microbatches=2 map=custom\n"
      "0F0 0B0 0F1 0B1\n"
      "\n"
      "1F0 1B0 1F1 1B1\n");
  EXPECT_EQ(s.name, "mine");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.stages, 2);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.map, StageMap::Custom);
  EXPECT_EQ(s.actions[1].size(), 4u);
}

TEST(ParseSchedule, InfersRanksStagesMicrobatchesAndLoopMapWithoutAHeader) {
  const Schedule s = parse_schedule(
      "0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1\n"
      "1F0 1F1 3F0 3F1 3B0 3B1 1B0 1B1\n");
  EXPECT_EQ(s.name, "file");
  EXPECT_EQ(s.ranks, 2);
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.microbatches, 2);
  EXPECT_EQ(s.map, StageMap::Loop);
  EXPECT_EQ(s.stages_per_rank(), 2);
}

TEST(ParseSchedule, InfersTheVMap) {
  const Schedule s = parse_schedule("0F0 3F0 3B0 0B0\n1F0 2F0 2B0 1B0\n");
  EXPECT_EQ(s.stages, 4);
  EXPECT_EQ(s.map, StageMap::V);
}

TEST(ParseSchedule, InfersTheBidirectionalMap) {
  // Micro-batch 0 runs down (stage s on rank s), micro-batch 1 up.
  const Schedule s = parse_schedule("0F0 1F1 1B1 0B0\n1F0 0F1 0B1 1B0\n");
  EXPECT_EQ(s.map, StageMap::Bidirectional);
}

TEST(ParseSchedule, InfersACustomMap) {
  const Schedule s = parse_schedule("0F0 2F0 2B0 0B0\n1F0 1B0\n");
  EXPECT_EQ(s.map, StageMap::Custom);
}

TEST(ParseSchedule, AcceptsADeclaredMapThatFitsOneRankAsWellAsTheInferredOne) {
  // At p = 1 loop and v place stages alike; the header decides.
  const Schedule s = parse_schedule("# baton schedule: map=v\n0F0 1F0 1B0 0B0\n");
  EXPECT_EQ(s.map, StageMap::V);
}

TEST(ParseSchedule, NamesTheLineAndTokenOfAnUnknownActionKind) {
  const std::string message = parse_error("0F0 0B0\n\n0F1 0X1\n");
  EXPECT_NE(message.find("[schedule.parse] line 3 (rank 1)"), std::string::npos) << message;
  EXPECT_NE(message.find("\"0X1\""), std::string::npos) << message;
  EXPECT_NE(message.find("unknown kind \"X\""), std::string::npos) << message;
  EXPECT_EQ(message.find("[schedule.parse]", 1), std::string::npos) << "prefix twice: " << message;
}

TEST(ParseSchedule, NamesTheLineAndTokenOfAnActionWithoutStage) {
  const std::string message = parse_error("F0 B0\n");
  EXPECT_NE(message.find("line 1 (rank 0)"), std::string::npos) << message;
  EXPECT_NE(message.find("\"F0\" must start with a stage number"), std::string::npos) << message;
}

TEST(ParseSchedule, NamesTheLineAndTokenOfAnActionWithoutMicrobatch) {
  const std::string message = parse_error("# header-less comment\n0F0 0B\n");
  EXPECT_NE(message.find("line 2 (rank 0)"), std::string::npos) << message;
  EXPECT_NE(message.find("\"0B\" must end with a micro-batch number"), std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsTrailingCharactersAfterTheMicrobatch) {
  const std::string message = parse_error("0F0x\n");
  EXPECT_NE(message.find("\"0F0x\""), std::string::npos) << message;
}

TEST(ParseSchedule, RejectsTextWithoutActionLines) {
  const std::string message = parse_error("# only a comment\n\n");
  EXPECT_NE(message.find("no action lines"), std::string::npos) << message;
}

TEST(ParseSchedule, RejectsAHeaderEntryThatIsNotKeyEqualsValue) {
  const std::string message = parse_error("# baton schedule: pp\n0F0 0B0\n");
  EXPECT_NE(message.find("line 1: header entry \"pp\" is not key=value"), std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsAnUnknownHeaderKey) {
  const std::string message = parse_error("# baton schedule: chunks=2\n0F0 0B0\n");
  EXPECT_NE(message.find("unknown header key \"chunks\""), std::string::npos) << message;
}

TEST(ParseSchedule, NamesTheHeaderLineOfANonNumericCount) {
  const std::string message = parse_error("\n# baton schedule: pp=two\n0F0 0B0\n");
  EXPECT_NE(message.find("line 2: pp=two is not a positive integer"), std::string::npos) << message;
}

TEST(ParseSchedule, RejectsAHeaderWhoseRanksDisagreeWithTheActionLines) {
  const std::string message = parse_error("# baton schedule: pp=3\n0F0 0B0\n1F0 1B0\n");
  EXPECT_NE(message.find("header says pp=3 but the file has 2 action lines"), std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsAHeaderWithFewerStagesThanTheActionsName) {
  const std::string message = parse_error("# baton schedule: stages=1\n0F0 0B0\n1F0 1B0\n");
  EXPECT_NE(message.find("header says stages=1 but an action names stage 1"), std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsAHeaderWithFewerMicrobatchesThanTheActionsName) {
  const std::string message = parse_error("# baton schedule: microbatches=1\n0F0 0F1 0B0 0B1\n");
  EXPECT_NE(message.find("header says microbatches=1 but an action names micro-batch 1"),
            std::string::npos)
      << message;
}

// Issue 7.17: stages=99999 used to pass and be reported as a map mismatch.
TEST(ParseSchedule, RejectsAHeaderWithMoreStagesThanTheActionsName) {
  const std::string message =
      parse_error("# baton schedule: stages=99999 map=loop\n0F0 0B0\n1F0 1B0\n");
  EXPECT_NE(message.find("header says stages=99999 but the actions name stages 0..1 only"),
            std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsAHeaderWithMoreMicrobatchesThanTheActionsName) {
  const std::string message = parse_error("# baton schedule: microbatches=3\n0F0 0B0\n");
  EXPECT_NE(message.find("header says microbatches=3 but the actions name micro-batches 0..0"),
            std::string::npos)
      << message;
}

// Issue 7.17: a count too large to read was called "not a positive integer".
TEST(ParseSchedule, SaysAHeaderCountAboveTheLimitExceedsIt) {
  const std::string message = parse_error("# baton schedule: microbatches=2000000000\n0F0 0B0\n");
  EXPECT_NE(message.find("line 1: microbatches=2000000000 exceeds the limit of 1048576"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("not a positive integer"), std::string::npos) << message;
  EXPECT_NE(parse_error("# baton schedule: pp=99999999999999999999999\n0F0 0B0\n")
                .find("pp=99999999999999999999999 exceeds the limit of 4096"),
            std::string::npos);
}

TEST(ParseSchedule, RejectsAZeroHeaderCount) {
  EXPECT_NE(parse_error("# baton schedule: pp=0\n0F0 0B0\n").find("pp=0 must be at least 1"),
            std::string::npos);
}

TEST(ParseSchedule, SaysAnActionStageAboveTheLimitExceedsIt) {
  const std::string message = parse_error("0F0 0B0\n99999999999F0\n");
  EXPECT_NE(message.find("line 2 (rank 1): action \"99999999999F0\": stage 99999999999 exceeds "
                         "the limit of 4194303"),
            std::string::npos)
      << message;
}

TEST(ParseSchedule, SaysAnActionMicrobatchAboveTheLimitExceedsIt) {
  const std::string message = parse_error("0F2000000\n");
  EXPECT_NE(message.find("micro-batch 2000000 exceeds the limit of 1048575"), std::string::npos)
      << message;
}

// Issue 7.3: a tiny file naming a huge stage and micro-batch made the
// per-(stage, micro-batch) tables exhaust memory.
TEST(ParseSchedule, RefusesFarMorePairsThanTheFileHasActions) {
  const std::string message = parse_error("0F0\n4000000F1000000\n");
  EXPECT_NE(message.find("4000005000001 (stage, micro-batch) pairs, but the file has only 2 "
                         "actions"),
            std::string::npos)
      << message;
}

// Issue 7.14: a NUL byte cut the message off where the NUL was.
TEST(ParseSchedule, EscapesANulByteInTheMessage) {
  const std::string message = parse_error(std::string("0F0 0\0B0 0B0\n", 14));
  EXPECT_NE(message.find("action \"0\\x00B0\" has unknown kind \"\\x00B\""), std::string::npos)
      << message;
}

TEST(ParseSchedule, EscapesControlBytesInHeaderValuesSoTheMessageIsOneLine) {
  const std::string message = parse_error("# baton schedule: map=\x1b[31m\r\n0F0 0B0\n");
  EXPECT_EQ(message.find_first_of("\r\n\x1b"), std::string::npos) << message;
  EXPECT_NE(message.find("\\x1b[31m"), std::string::npos) << message;
}

TEST(ParseSchedule, RejectsANameThatIsNotPrintable) {
  EXPECT_NE(parse_error("# baton schedule: name=a\x01\n0F0 0B0\n")
                .find("name=a\\x01 must be 1 to 64 printable ASCII characters"),
            std::string::npos);
}

// Found by fuzz/schedule_text_fuzz: "name=" parsed as an empty name, which
// format_schedule() prints as name=file, so the schedule did not print back.
TEST(ParseSchedule, RejectsAnEmptyNameThatWouldNotPrintBack) {
  EXPECT_NE(parse_error("# baton schedule: name= map=loop\n0F0 0B0\n")
                .find("line 1: name= must be 1 to 64 printable ASCII characters"),
            std::string::npos);
}

TEST(ParseSchedule, RejectsAHeaderKeyGivenTwice) {
  EXPECT_NE(parse_error("# baton schedule: map=zig map=loop\n0F0 0B0\n")
                .find("line 1: header key \"map\" given more than once"),
            std::string::npos);
}

TEST(ParseSchedule, ShortensAnEnormousTokenInTheMessage) {
  const std::string message = parse_error("0F0 0B0 " + std::string(1 << 20, 'Z') + "\n");
  EXPECT_LT(message.size(), 400u) << message.substr(0, 400);
  EXPECT_NE(message.find("(1048576 bytes)"), std::string::npos) << message;
}

TEST(ParseSchedule, RejectsMoreRanksThanTheLimit) {
  std::string text;
  for (int r = 0; r <= 4096; ++r) text += "0F0\n";
  EXPECT_NE(parse_error(text).find("line 4097: more than 4096 action lines"), std::string::npos);
}

TEST(ParseSchedule, RejectsAHeaderMapTheActionsContradict) {
  const std::string message =
      parse_error("# baton schedule: map=v\n0F0 2F0 2B0 0B0\n1F0 3F0 3B0 1B0\n");
  EXPECT_NE(message.find("header says map=v but the actions place stages as map=loop"),
            std::string::npos)
      << message;
}

TEST(ParseSchedule, RejectsAnUnknownMapName) {
  const std::string message = parse_error("# baton schedule: map=zigzag\n0F0 0B0\n");
  EXPECT_NE(message.find("unknown stage-to-rank map \"zigzag\""), std::string::npos) << message;
}

TEST(ParseSchedule, ParsesAStageSplitAcrossRanksSoValidateCanReportIt) {
  const Schedule s = parse_schedule("0F0\n0B0\n");
  EXPECT_EQ(s.map, StageMap::Custom);
}

TEST(LoadScheduleFile, ReadsAFileAndNamesThePathInErrors) {
  const std::string path = ::testing::TempDir() + "baton_text_format_test.txt";
  {
    std::ofstream out(path);
    out << "0F0 0B0\n0Q0\n";
  }
  try {
    load_schedule_file(path);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path + ": [schedule.parse] line 2", 0), 0u) << message;
  }
  {
    std::ofstream out(path);
    out << "0F0 0B0\n";
  }
  EXPECT_EQ(load_schedule_file(path).actions[0].size(), 2u);
  std::remove(path.c_str());
}

TEST(LoadScheduleFile, NamesAMissingFile) {
  try {
    load_schedule_file("/nonexistent/baton.schedule");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("cannot read schedule file \"/nonexistent/baton.schedule\""),
        std::string::npos)
        << e.what();
  }
}

TEST(FormatGrid, AlignsColumnsAndMarksTheGivenActions) {
  const Schedule s = parse_schedule("0F0 0SEND_F0 0B0\n1RECV_F0 1F0 1B0\n");
  EXPECT_EQ(format_grid(s, {{1, 1}}),
            "rank 0 | 0F0       0SEND_F0  0B0\n"
            "rank 1 | 1RECV_F0 >1F0<      1B0\n");
}

}  // namespace
}  // namespace baton::schedule

namespace baton::schedule {
namespace {

// Issue 7.13: the grid of a 14 MB file was printed whole in the error.
TEST(FormatGrid, CutsALargeGridToTheRanksAndColumnsAroundTheMarks) {
  std::string text;
  for (int r = 0; r < 100; ++r) {
    for (int i = 0; i < 1000; ++i) text += std::to_string(r) + "F" + std::to_string(i) + " ";
    text += "\n";
  }
  const Schedule s = parse_schedule(text);
  const std::string grid = format_grid(s, {{50, 500}});
  EXPECT_LT(grid.size(), 2000u) << grid;
  EXPECT_EQ(grid,
            "...\n"
            "rank 48  | ...     48F492  48F493  48F494  48F495  48F496  48F497  48F498  48F499  "
            "48F500  48F501  48F502  48F503  48F504  48F505  48F506  48F507  48F508  ...\n"
            "rank 49  | ...     49F492  49F493  49F494  49F495  49F496  49F497  49F498  49F499  "
            "49F500  49F501  49F502  49F503  49F504  49F505  49F506  49F507  49F508  ...\n"
            "rank 50  | ...     50F492  50F493  50F494  50F495  50F496  50F497  50F498  50F499 "
            ">50F500< 50F501  50F502  50F503  50F504  50F505  50F506  50F507  50F508  ...\n"
            "rank 51  | ...     51F492  51F493  51F494  51F495  51F496  51F497  51F498  51F499  "
            "51F500  51F501  51F502  51F503  51F504  51F505  51F506  51F507  51F508  ...\n"
            "rank 52  | ...     52F492  52F493  52F494  52F495  52F496  52F497  52F498  52F499  "
            "52F500  52F501  52F502  52F503  52F504  52F505  52F506  52F507  52F508  ...\n"
            "...\n");
}

TEST(FormatGrid, BoundsTheTextWhateverTheNumberOfMarks) {
  std::string text;
  for (int r = 0; r < 4000; ++r) {
    for (int i = 0; i < 100; ++i) text += std::to_string(r) + "SEND_F" + std::to_string(i) + " ";
    text += "\n";
  }
  const Schedule s = parse_schedule(text);
  std::vector<std::pair<int, size_t>> marks;
  for (int r = 0; r < 4000; ++r) marks.push_back({r, static_cast<size_t>(r % 100)});
  const std::string grid = format_grid(s, marks);
  EXPECT_LT(grid.size(), 20u * 1024) << grid.size();
  EXPECT_NE(grid.find(">0SEND_F0<"), std::string::npos);
}

}  // namespace
}  // namespace baton::schedule
