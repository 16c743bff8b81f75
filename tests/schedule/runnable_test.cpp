// The runnable schedule's one builder: a generator's or a file's schedule,
// lowered, with the reductions a run adds, and the rule for the reductions a
// file already carries (they stay). Issue 17: `baton train --dp 2` refused a
// CSV that `baton simulate --dp 2` had exported and accepts.
#include "baton/schedule/runnable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/csv_format.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/tied_reduction.h"
#include "tests/schedule/error_of.h"

namespace baton::schedule {
namespace {

using test::error_of;

using ::testing::HasSubstr;
using ::testing::StartsWith;

GeneratorOptions shape(int p, int m) {
  return GeneratorOptions{}.set_ranks(p).set_microbatches(m);
}

// `text` in a file of the test's temporary folder named `name`; returns its path.
std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/baton_runnable_test_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

int count_of(const Schedule& s, ActionKind kind) {
  int n = 0;
  for (const auto& list : s.actions)
    for (const Action& a : list) n += a.kind == kind;
  return n;
}

// What `baton simulate --schedule 1f1b --pp 2 --microbatches 4 --dp 2
// --export-csv x.csv --csv-format compute_comms` writes.
std::string exported_1f1b_dp2_csv() {
  const Schedule s =
      runnable(ScheduleSource::generated("1f1b", shape(2, 4)), ReductionOptions{}.set_dp(2));
  return format_csv(s, CsvFormat::ComputeComms);
}

TEST(LoweredSchedule, OfAGeneratorIsItsOutputLowered) {
  EXPECT_EQ(lowered_schedule(ScheduleSource::generated("interleaved", shape(2, 4))).actions,
            lower(generate("interleaved", shape(2, 4))).actions);
}

TEST(LoweredSchedule, OfAComputeOnlyFileIsTheFileLowered) {
  const std::string path = write_file("compute.txt", "0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n");
  EXPECT_EQ(lowered_schedule(ScheduleSource::from_file(path)).actions,
            lower(parse_schedule("0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n")).actions);
}

TEST(LoweredSchedule, NamesTheFileInItsErrors) {
  const std::string path = write_file("b_before_f.txt", "0B0 0F0\n");
  const std::string error = error_of([&] { lowered_schedule(ScheduleSource::from_file(path)); });
  EXPECT_THAT(error, StartsWith(path + ": "));
  EXPECT_THAT(error, HasSubstr("runs B before F"));
  EXPECT_THAT(error_of([] { lowered_schedule(ScheduleSource::from_file("/nonexistent/x.csv")); }),
              HasSubstr("/nonexistent/x.csv"));
}

TEST(LoweredSchedule, RefusesAFileWhoseGradientReductionsAreIncomplete) {
  // Stage 1 computes on rank 1 but is never reduced there.
  const std::string path = write_file("half_reduced.txt", "0F0 0B0 0REDUCE_GRAD0\n1F0 1B0\n");
  const std::string error = error_of([&] { lowered_schedule(ScheduleSource::from_file(path)); });
  EXPECT_THAT(error, StartsWith(path + ": "));
  EXPECT_THAT(error, HasSubstr("every stage on every rank needs its buckets reduced"));
}

TEST(Runnable, AddsTheGivenBucketsAfterEachStagesLastBackwardWithTwoReplicas) {
  const Schedule got = runnable(ScheduleSource::generated("1f1b", shape(2, 4)),
                                ReductionOptions{}.set_dp(2).set_buckets_per_stage({2, 3}));
  EXPECT_EQ(got.actions,
            add_grad_reductions(lower(generate("1f1b", shape(2, 4))), 2, {2, 3}).actions);
}

TEST(Runnable, AddsOneBucketPerStageWhenNoCountsAreGiven) {
  const Schedule got =
      runnable(ScheduleSource::generated("interleaved", shape(2, 4)), ReductionOptions{}.set_dp(4));
  EXPECT_EQ(
      got.actions,
      add_grad_reductions(lower(generate("interleaved", shape(2, 4))), 4, {1, 1, 1, 1}).actions);
}

TEST(Runnable, AddsNoReductionsWithOneReplicaAndNoCopies) {
  const Schedule got = runnable(ScheduleSource::generated("1f1b", shape(3, 6)),
                                ReductionOptions{}.set_buckets_per_stage({4, 4, 4}));
  EXPECT_EQ(got.actions, lower(generate("1f1b", shape(3, 6))).actions);
}

TEST(Runnable, MovesTheReductionsToTheEndWhenOverlapIsOff) {
  const Schedule got = runnable(
      ScheduleSource::generated("1f1b", shape(2, 4)),
      ReductionOptions{}.set_dp(2).set_buckets_per_stage({2, 1}).set_overlap_grad_reduce(false));
  EXPECT_EQ(got.actions, defer_grad_reductions(
                             add_grad_reductions(lower(generate("1f1b", shape(2, 4))), 2, {2, 1}))
                             .actions);
  // With one replica there is nothing to defer.
  EXPECT_EQ(runnable(ScheduleSource::generated("1f1b", shape(2, 4)),
                     ReductionOptions{}.set_overlap_grad_reduce(false))
                .actions,
            lower(generate("1f1b", shape(2, 4))).actions);
}

TEST(Runnable, SumsTiedStagesAndReplicatedStagesCopies) {
  const Schedule tied = runnable(ScheduleSource::generated("1f1b", shape(2, 4)),
                                 ReductionOptions{}.set_dp(2).set_tied({{0, 1}}));
  EXPECT_EQ(tied.actions,
            add_tied_reductions(
                add_grad_reductions(lower(generate("1f1b", shape(2, 4))), 2, {1, 1}), {{0, 1}})
                .actions);
  // Chimera runs every stage on two ranks: its copies are summed unasked.
  const Schedule chimera = runnable(ScheduleSource::generated("chimera", shape(2, 4)), {});
  EXPECT_EQ(count_of(chimera, ActionKind::REDUCE_TIED), 4);
}

TEST(Runnable, RefusesDpBelowOneAndTwoReplicasOfAScheduleWithoutAFlush) {
  const Schedule s = lowered_schedule(ScheduleSource::generated("1f1b", shape(2, 2)));
  EXPECT_THAT(error_of([&] { add_reductions(s, ReductionOptions{}.set_dp(0)); }),
              HasSubstr("[schedule.reduce_grad] dp must be >= 1, got 0"));
  EXPECT_THAT(error_of([] {
                runnable(ScheduleSource::generated("2bw", shape(2, 4)),
                         ReductionOptions{}.set_dp(2));
              }),
              HasSubstr("has no flush between steps"));
  EXPECT_THAT(
      error_of([&] { add_reductions(s, ReductionOptions{}.set_dp(2).set_buckets_per_stage({1})); }),
      HasSubstr("1 bucket counts for 2 stages"));
}

// Issue 17: the ranks' Pipeline refused this CSV with "already has
// REDUCE_GRAD actions"; it runs as the generator it came from.
TEST(Runnable, KeepsTheReductionsOfACsvThatSimulateExportedWithTwoReplicas) {
  const std::string path = write_file("1f1b_dp2.csv", exported_1f1b_dp2_csv());
  const Schedule got = runnable(ScheduleSource::from_file(path), ReductionOptions{}.set_dp(2));
  EXPECT_EQ(got.actions,
            runnable(ScheduleSource::generated("1f1b", shape(2, 4)), ReductionOptions{}.set_dp(2))
                .actions);
}

TEST(Runnable, KeepsAFilesReductionsWithOneReplica) {
  const std::string path = write_file("1f1b_dp2_at_dp1.csv", exported_1f1b_dp2_csv());
  const Schedule got = runnable(ScheduleSource::from_file(path), {});
  EXPECT_EQ(got.actions, lowered_schedule(ScheduleSource::from_file(path)).actions);
  EXPECT_EQ(count_of(got, ActionKind::REDUCE_GRAD), 2);
}

TEST(Runnable, KeepsAFilesBucketCountsOverTheGivenOnes) {
  const Schedule three = runnable(ScheduleSource::generated("1f1b", shape(2, 4)),
                                  ReductionOptions{}.set_dp(2).set_buckets_per_stage({3, 3}));
  const std::string path = write_file("three_buckets.txt", format_schedule(three));
  const Schedule got = runnable(ScheduleSource::from_file(path),
                                ReductionOptions{}.set_dp(2).set_buckets_per_stage({1, 1}));
  EXPECT_EQ(got.actions, three.actions);
}

TEST(Runnable, MovesAFilesReductionsToTheEndWhenOverlapIsOff) {
  const std::string path = write_file("1f1b_dp2_deferred.csv", exported_1f1b_dp2_csv());
  const Schedule got = runnable(ScheduleSource::from_file(path),
                                ReductionOptions{}.set_dp(2).set_overlap_grad_reduce(false));
  EXPECT_EQ(got.actions, runnable(ScheduleSource::generated("1f1b", shape(2, 4)),
                                  ReductionOptions{}.set_dp(2).set_overlap_grad_reduce(false))
                             .actions);
}

TEST(Runnable, GivesAFileWithoutReductionsTheGeneratorsOnes) {
  const std::string path = write_file(
      "1f1b_plain.csv", format_csv(generate("1f1b", shape(2, 4)), CsvFormat::ComputeOnly));
  const ReductionOptions dp2 = ReductionOptions{}.set_dp(2).set_buckets_per_stage({2, 2});
  EXPECT_EQ(runnable(ScheduleSource::from_file(path), dp2).actions,
            runnable(ScheduleSource::generated("1f1b", shape(2, 4)), dp2).actions);
}

TEST(Runnable, KeepsAFilesTiedReductionsAndAddsNoneToThem) {
  const Schedule chimera = runnable(ScheduleSource::generated("chimera", shape(2, 4)), {});
  const std::string path = write_file("chimera.txt", format_schedule(chimera));
  const Schedule got =
      runnable(ScheduleSource::from_file(path), ReductionOptions{}.set_tied({{0, 1}}));
  EXPECT_EQ(got.actions, chimera.actions);
}

// Every generator with a flush, reduced for two replicas and written in
// either CSV form or the text form, reads back as itself: what simulate
// exports, simulate and train run alike.
class EveryGeneratorsExport : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(EveryGeneratorsExport, ReadsBackWithItsReductionsUnchangedWithTwoReplicas) {
  const auto& [name, p, m] = GetParam();
  const Schedule made =
      runnable(ScheduleSource::generated(name, shape(p, m)), ReductionOptions{}.set_dp(2));
  const std::string stem = name + "_" + std::to_string(p) + "_" + std::to_string(m);
  const std::vector<std::pair<std::string, std::string>> files{
      {stem + "_comms.csv", format_csv(made, CsvFormat::ComputeComms)},
      {stem + "_compute.csv", format_csv(made, CsvFormat::ComputeOnly)},
      {stem + ".txt", format_schedule(made)}};
  for (const auto& [file, text] : files) {
    const std::string path = write_file(file, text);
    const Schedule got = runnable(ScheduleSource::from_file(path), ReductionOptions{}.set_dp(2));
    EXPECT_EQ(got.actions, made.actions) << file;
  }
}

// Every (generator, p, m) with p in {2, 4}, m in {4, 8} that runs with dp 2:
// not the schedules without a flush (dp reduces whole steps), and not the
// shapes zb-h2 and dualpipev refuse (m < 2p).
std::vector<std::tuple<std::string, int, int>> exportable() {
  std::vector<std::tuple<std::string, int, int>> out;
  for (const std::string& name : schedule_names()) {
    if (name == "2bw" || name == "pipedream" || name == "async" || name == "pipemare") continue;
    for (int p : {2, 4}) {
      for (int m : {4, 8}) {
        if ((name == "zb-h2" || name == "dualpipev") && m < 2 * p) continue;
        out.emplace_back(name, p, m);
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryGeneratorsExport, ::testing::ValuesIn(exportable()),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_p" +
                                           std::to_string(std::get<1>(info.param)) + "_m" +
                                           std::to_string(std::get<2>(info.param));
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace baton::schedule
