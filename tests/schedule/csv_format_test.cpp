// torch.distributed.pipelining's schedule CSV: every generator's schedule
// writes and reads back unchanged in both formats; the CSVs the PyTorch wheel
// wrote (tests/schedule/pytorch_csv/, made by make_fixtures.py there) read as
// baton's own schedules; malformed files fail with one line naming the line,
// column and rule.
#include "baton/schedule/csv_format.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"

namespace baton::schedule {
namespace {

std::string csv_error(const std::string& text) {
  try {
    parse_csv_schedule(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(BATON_PYTORCH_CSV_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void expect_same(const Schedule& got, const Schedule& want) {
  EXPECT_EQ(got.ranks, want.ranks);
  EXPECT_EQ(got.stages, want.stages);
  EXPECT_EQ(got.microbatches, want.microbatches);
  // A CSV names no map: it is the one the actions show, which differs from the
  // generator's name only where they fit several (zb-v at p = 1 reads as loop,
  // chimera with m = 1 as loop).
  const StageMap shown = detect_stage_map(want, Placement(want));
  EXPECT_EQ(got.map, shown) << to_string(got.map) << " vs " << to_string(shown);
  if (want.ranks > 1 && want.microbatches > 1) {
    EXPECT_EQ(got.map, want.map) << to_string(got.map) << " vs " << to_string(want.map);
  }
  EXPECT_EQ(got.actions, want.actions);
}

class EveryGeneratorCsv : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryGeneratorCsv, WritesAndReadsBackTheSameLoweredScheduleInBothFormats) {
  int round_trips = 0;
  for (int p : {1, 2, 3, 4})
    for (int m : {1, 4, 8})
      for (int v : {0, 2, 3}) {
        Schedule s;
        try {
          s = generate(GetParam(),
                       GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
        } catch (const Error&) {
          continue;  // shapes the generator does not define
        }
        SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                     " v=" + std::to_string(v));
        const Schedule lowered = lower(s);
        if (s.carries) {  // no flush (2bw): PyTorch's format has no way to say so
          for (CsvFormat format : {CsvFormat::ComputeOnly, CsvFormat::ComputeComms})
            EXPECT_THROW(format_csv(s, format), Error);
          ++round_trips;
          continue;
        }
        for (CsvFormat format : {CsvFormat::ComputeOnly, CsvFormat::ComputeComms}) {
          SCOPED_TRACE(std::string(to_string(format)));
          const Schedule back = parse_csv_schedule(format_csv(s, format), s.name);
          EXPECT_EQ(back.name, s.name);
          expect_same(back, lowered);
          expect_same(parse_csv_schedule(format_csv(lowered, format)), lowered);
        }
        ++round_trips;
      }
  EXPECT_GT(round_trips, 0) << GetParam() << " generated no schedule at all";
}

INSTANTIATE_TEST_SUITE_P(AllNames, EveryGeneratorCsv, ::testing::ValuesIn(schedule_names()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

TEST(FormatCsv, WritesComputeOnlyRowsAsPyTorchsDumpCsvDoes) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(3));
  EXPECT_EQ(format_csv(s, CsvFormat::ComputeOnly),
            "0F0,0F1,0B0,0F2,0B1,0B2\n"
            "1F0,1B0,1F1,1B1,1F2,1B2\n");
}

// PyTorch's _add_wait_send: a forward send's wait follows the local backward
// of the same micro-batch; a backward send's wait comes at the end.
TEST(FormatCsv, WritesComputeCommsWithAWaitAfterEverySend) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(2));
  EXPECT_EQ(format_csv(s, CsvFormat::ComputeComms),
            "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1\n"
            "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1\n");
}

// The fixture is ScheduleInterleaved1F1B(p=4, 2 stages per rank, m=8) as the
// wheel's _dump_csv wrote it: rows padded with empty fields for idle steps.
// baton's interleaved generator follows the same warm-up rule, so the compute
// order is the same action for action.
TEST(PyTorchCsv, InterleavedComputeOnlyIsBatonsInterleavedSchedule) {
  const std::string text = fixture("interleaved_p4_v2_m8_compute_only.csv");
  ASSERT_NE(text.find(",,"), std::string::npos) << "expected PyTorch's empty idle steps";
  const Schedule got = parse_csv_schedule(text);
  expect_same(got,
              lower(generate("interleaved", GeneratorOptions().set_ranks(4).set_microbatches(8))));
}

// The same schedule lowered by the wheel. It adds what baton drops (UNSHARD,
// RESHARD, WAIT_REDUCE_GRAD, WAIT_SEND_*) and posts receives early; with each
// RECV moved to its consumer, it is baton's lowering exactly, and its
// REDUCE_GRADs stand where add_grad_reductions() puts one bucket per stage.
TEST(PyTorchCsv, InterleavedComputeCommsIsBatonsLoweredInterleavedSchedule) {
  const std::string text = fixture("interleaved_p4_v2_m8_compute_comms.csv");
  for (const char* kind : {"UNSHARD", "REDUCE_GRAD", "WAIT_SEND_F", "WAIT_SEND_B"})
    EXPECT_NE(text.find(kind), std::string::npos) << kind;
  // The wheel posts 4RECV_F0 on rank 0 before 0F1; baton waits right before 4F0.
  EXPECT_LT(text.find("4RECV_F0"), text.find("0F1"));
  const Schedule got = parse_csv_schedule(text);
  expect_same(
      got, add_grad_reductions(
               lower(generate("interleaved", GeneratorOptions().set_ranks(4).set_microbatches(8))),
               2, std::vector<int>(8, 1)));
}

// Schedule1F1B has no _dump_csv; its pipeline_order, written by csv.writer,
// carries REDUCE_GRAD and WAIT_REDUCE_GRAD at the end of every row. In torch
// 2.15 that order is wrong on the last rank: with no warm-up forwards there,
// _get_pipeline_order starts its forwards at micro-batch 1 and ends at 8
// (3F1 ... 3F8, no 3F0), so baton refuses the file. (The wheel's runtime does
// not run from this order; it is its IR for tools such as this CSV.) With the
// last row's forwards renumbered, it is baton's 1f1b action for action, its
// REDUCE_GRADs where add_grad_reductions() puts them.
TEST(PyTorchCsv, OneFOneBIsRefusedForTheWheelsOffByOneAndIsBatons1f1bOnceFixed) {
  const std::string text = fixture("1f1b_p4_m8_compute_only.csv");
  EXPECT_NE(text.find("0REDUCE_GRAD,0WAIT_REDUCE_GRAD"), std::string::npos);
  ASSERT_NE(text.find("3F8"), std::string::npos);
  EXPECT_NE(csv_error(text).find("micro-batch 8 has 0 F actions; it needs exactly one"),
            std::string::npos)
      << csv_error(text);
  std::string fixed = text;
  const size_t last_row = fixed.find("\n3F1");
  ASSERT_NE(last_row, std::string::npos);
  for (int mb = 1; mb <= 8; ++mb) {
    const std::string from = "3F" + std::to_string(mb) + ",";
    const size_t at = fixed.find(from, last_row);
    ASSERT_NE(at, std::string::npos) << from;
    fixed.replace(at, from.size(), "3F" + std::to_string(mb - 1) + ",");
  }
  expect_same(parse_csv_schedule(fixed),
              add_grad_reductions(
                  lower(generate("1f1b", GeneratorOptions().set_ranks(4).set_microbatches(8))), 2,
                  std::vector<int>(4, 1)));
}

TEST(FormatCsv, WritesOneBucketAsPyTorchDoesAndSeveralWithTheirNumbers) {
  const Schedule s = generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(1));
  EXPECT_EQ(format_csv(add_grad_reductions(s, 2, {1, 2}), CsvFormat::ComputeOnly),
            "0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD0,1REDUCE_GRAD1\n");
  const Schedule back =
      parse_csv_schedule(format_csv(add_grad_reductions(s, 2, {1, 2}), CsvFormat::ComputeComms));
  expect_same(back, add_grad_reductions(lower(s), 2, {1, 2}));
}

TEST(ParseCsv, SkipsEmptyFieldsAndReadsCrlfQuotesAndSpaces) {
  const Schedule s = parse_csv_schedule("0F0,,\"0F1\", 0B0 ,0B1\r\n,1F0,1B0,1F1,1B1\r\n\r\n");
  EXPECT_EQ(format_schedule(s),
            "# baton schedule: name=file pp=2 stages=2 microbatches=2 map=loop\n"
            "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
            "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
}

TEST(ParseCsv, ExpandsOverlapFBIntoItsActionsInOrder) {
  const Schedule s = parse_csv_schedule("0F0,(0F1;0B0)OVERLAP_F_B,0B1\n");
  EXPECT_EQ(format_schedule(s),
            "# baton schedule: name=file pp=1 stages=1 microbatches=2 map=loop\n"
            "0F0 0F1 0B0 0B1\n");
}

TEST(ParseCsv, NamesTheLineAndColumnOfAnUnknownAction) {
  const std::string e = csv_error("0F0,0B0\n1F0,1X0,1B0\n");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("line 2 (rank 1), column 2: action \"1X0\" has unknown kind \"X\""),
            std::string::npos)
      << e;
  // PyTorch's kinds are listed, not the text format's.
  EXPECT_NE(e.find("WAIT_REDUCE_GRAD or (...)OVERLAP_F_B)"), std::string::npos) << e;
}

// Regression (issue 30, item 14): a skip transfer was called a duplicate of
// the receive it is not.
TEST(ParseCsv, SaysASkipTransferIsBeyondPyTorchsCsvInsteadOfCallingItADuplicate) {
  const std::string e = csv_error("0F0,0RECV_B0,0RECV_B0@0,0B0\n");
  EXPECT_EQ(e.find("appears twice"), std::string::npos) << e;
  EXPECT_NE(e.find("column 3: 0RECV_B0@0 is a transfer of a skip connection, which PyTorch's "
                   "schedule CSV cannot describe"),
            std::string::npos)
      << e;
}

TEST(ParseCsv, NamesTheLineAndColumnOfABadStage) {
  EXPECT_NE(csv_error("0F0,F0\n")
                .find("line 1 (rank 0), column 2: action \"F0\" must start "
                      "with a stage number"),
            std::string::npos);
  const std::string e = csv_error("0F0,99999999F0\n");
  EXPECT_NE(e.find("column 2"), std::string::npos) << e;
  EXPECT_NE(e.find("exceeds the limit of " + std::to_string(kMaxStages - 1)), std::string::npos)
      << e;
}

// A short row: rank 1 lacks the backward of its micro-batch.
TEST(ParseCsv, NamesTheMissingActionOfARaggedRow) {
  const std::string e = csv_error("0F0,0B0,0F1,0B1\n1F0,1B0,1F1\n");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("stage 1 micro-batch 1 has 0 B, 0 I and 0 W"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2 (rank 1), column 3: 1F1"), std::string::npos) << e;
}

TEST(ParseCsv, NamesEveryWaitOfADeadlockOnOneLine) {
  const std::string e = csv_error("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("line 1 (rank 0), column 2: 0B0"), std::string::npos) << e;
  EXPECT_NE(e.find("line 2 (rank 1), column 1: 1F1"), std::string::npos) << e;
}

TEST(ParseCsv, NamesAnOrderErrorWithinARow) {
  const std::string e = csv_error("0B0,0F0\n");
  EXPECT_NE(e.find("runs B before F"), std::string::npos) << e;
  EXPECT_NE(e.find("line 1 (rank 0), column 1: 0B0"), std::string::npos) << e;
}

TEST(ParseCsv, RefusesAReceiveAfterItsConsumerOrWithoutOne) {
  EXPECT_NE(csv_error("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n")
                .find("line 2 (rank 1), column 2: 1RECV_F0 comes after 1F0 (column 1)"),
            std::string::npos);
  EXPECT_NE(csv_error("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1\n")
                .find("column 5: 1RECV_F1 has no action after it in this row"),
            std::string::npos);
}

TEST(ParseCsv, RefusesAWaitForASendNotMade) {
  EXPECT_NE(csv_error("0F0,0B0,0WAIT_SEND_F0\n")
                .find("column 3: \"0WAIT_SEND_F0\" waits for "
                      "0SEND_F0, which this row has not sent"),
            std::string::npos);
}

TEST(ParseCsv, RefusesEmptyLinesBetweenRowsAndEmptyFiles) {
  EXPECT_NE(csv_error("0F0,0B0\n\n1F0,1B0\n").find("line 2 is empty"), std::string::npos);
  EXPECT_NE(csv_error("\n\n").find("no rows"), std::string::npos);
}

// Found by fuzz/schedule_csv_fuzz.cpp: a row of dropped actions only was a
// rank with nothing to do, which wrote back as an empty line.
TEST(ParseCsv, RefusesARowWithoutComputeActions) {
  EXPECT_NE(csv_error("0F0,0B0\n1REDUCE_GRAD,,\n").find("line 2 (rank 1) has no F, B, I or W"),
            std::string::npos);
}

TEST(ParseCsv, RefusesMoreRowsThanTheRankLimit) {
  std::string text;
  for (int r = 0; r <= kMaxRanks; ++r)
    text += std::to_string(r) + "F0," + std::to_string(r) + "B0\n";
  EXPECT_NE(csv_error(text).find("more than " + std::to_string(kMaxRanks) + " rows"),
            std::string::npos);
}

TEST(ParseCsv, RefusesFarMorePairsThanActions) {
  EXPECT_NE(csv_error("0F0,4000000F1000000\n").find("(stage, micro-batch) pairs"),
            std::string::npos);
}

TEST(LoadScheduleFile, ReadsAPathEndingInCsvAsPyTorchsCsv) {
  const std::string path = ::testing::TempDir() + "/baton_csv_format_test.csv";
  {
    std::ofstream out(path);
    out << "0F0,0B0\n1F0,1B0\n";
  }
  const Schedule s = load_schedule_file(path);
  EXPECT_TRUE(s.has_communication());
  EXPECT_EQ(s.ranks, 2);
  std::remove(path.c_str());
}

TEST(CsvFormatName, ParsesBothNamesAndRefusesOthers) {
  EXPECT_EQ(parse_csv_format("compute_only"), CsvFormat::ComputeOnly);
  EXPECT_EQ(parse_csv_format("compute_comms"), CsvFormat::ComputeComms);
  EXPECT_THROW(parse_csv_format("both"), Error);
}

}  // namespace
}  // namespace baton::schedule
