// The stats-only simulator against the full one, and the closed-form action
// sources against the generators, swept over schedules, p and m.
#include <gtest/gtest.h>

#include <tuple>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/stream_stats.h"

namespace baton::sim {
namespace {

using Shape = std::tuple<std::string, int, int>;  // schedule, p, m

class StreamStatsTest : public ::testing::TestWithParam<Shape> {};

schedule::GeneratorOptions options_of(int p, int m) {
  return schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(m);
}

// Unequal stage costs and a link, so that any slip in a dependency shows.
CostModel skewed_costs(int stages) {
  CostModel costs;
  costs.comm_latency = 0.3;
  costs.comm_bytes_per_time = 4;
  for (int s = 0; s < stages; ++s) {
    StageCost c;
    c.forward = 1 + 0.25 * (s % 3);
    c.input_backward = 1.5 + 0.5 * (s % 2);
    c.weight_backward = 0.75;
    c.activation_bytes = 10 + s;
    c.weight_stash_bytes = 3;
    c.boundary_bytes = 2;
    c.parameter_bytes = 100 + s;
    costs.stages.push_back(c);
  }
  return costs;
}

TEST_P(StreamStatsTest, GivesTheFullSimulatorsStatistics) {
  const auto& [name, p, m] = GetParam();
  const schedule::Schedule generated = schedule::generate(name, options_of(p, m));
  const CostModel costs = skewed_costs(generated.stages);
  if (generated.carries) {  // no flush (2bw): only simulate() unrolls it
    EXPECT_THROW(schedule_source(generated), Error);
    return;
  }
  const Stats full = simulate(schedule::lower(generated), costs).stats;
  const auto source = schedule_source(generated);
  const Stats fast = simulate_stats(*source, costs);
  EXPECT_DOUBLE_EQ(fast.makespan, full.makespan);
  EXPECT_DOUBLE_EQ(fast.steady_step, full.steady_step);
  EXPECT_NEAR(fast.bubble_fraction, full.bubble_fraction, 1e-12);
  EXPECT_EQ(fast.busy, full.busy);
  EXPECT_EQ(fast.idle_within_span, full.idle_within_span);
  EXPECT_EQ(fast.peak_inflight, full.peak_inflight);
  EXPECT_EQ(fast.peak_activation_bytes, full.peak_activation_bytes);
  EXPECT_EQ(fast.parameter_bytes, full.parameter_bytes);
  EXPECT_EQ(source->lowered_action_count(), schedule::lower(generated).action_count());
}

class ClosedFormTest : public ::testing::TestWithParam<Shape> {};

TEST_P(ClosedFormTest, SourceReadsTheGeneratorsActions) {
  const auto& [name, p, m] = GetParam();
  ASSERT_TRUE(has_closed_form(name));
  schedule::Schedule generated;
  try {
    generated = schedule::generate(name, options_of(p, m));
  } catch (const Error&) {
    EXPECT_THROW(closed_form_source(name, options_of(p, m)), Error);
    return;
  }
  const auto source = closed_form_source(name, options_of(p, m));
  ASSERT_EQ(source->stages(), generated.stages);
  for (int r = 0; r < p; ++r) {
    ASSERT_EQ(source->size(r), generated.actions[r].size()) << "rank " << r;
    std::vector<schedule::Action> read(source->size(r));
    // Odd-sized reads, as the simulator's buffer may cut anywhere.
    for (size_t from = 0; from < read.size(); from += 5)
      source->read(r, from, std::min<size_t>(5, read.size() - from), &read[from]);
    EXPECT_EQ(read, generated.actions[r]) << "rank " << r;
  }
}

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  std::string name = std::get<0>(info.param);
  for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name + "_p" + std::to_string(std::get<1>(info.param)) + "_m" +
         std::to_string(std::get<2>(info.param));
}

// Every generator at every shape it is defined for (zb-h2 and dualpipev need
// m >= 2p, chimera an even p, ...): the undefined ones are left out, not skipped.
std::vector<Shape> defined_shapes() {
  std::vector<Shape> out;
  for (const std::string& name : schedule::schedule_names()) {
    for (int p : {1, 2, 3, 4}) {
      for (int m : {1, 2, 4, 5, 8, 12}) {
        try {
          schedule::generate(name, options_of(p, m));
          out.emplace_back(name, p, m);
        } catch (const Error&) {
        }
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(SchedulesByShape, StreamStatsTest, ::testing::ValuesIn(defined_shapes()),
                         shape_name);

INSTANTIATE_TEST_SUITE_P(SchedulesByShape, ClosedFormTest,
                         ::testing::Combine(::testing::Values("1f1b", "gpipe", "interleaved"),
                                            ::testing::Values(1, 2, 3, 4, 7),
                                            ::testing::Values(1, 2, 4, 5, 8, 12, 14)),
                         shape_name);

TEST(StreamStats, InterleavedWithFourChunksMatchesTheGenerator) {
  const auto o = options_of(4, 8).set_virtual_stages(4);
  const schedule::Schedule generated = schedule::generate("interleaved", o);
  const auto source = closed_form_source("interleaved", o);
  const CostModel costs = skewed_costs(generated.stages);
  EXPECT_DOUBLE_EQ(simulate_stats(*source, costs).steady_step,
                   simulate(schedule::lower(generated), costs).stats.steady_step);
}

TEST(StreamStats, RefusesMoreCellsThanItsLimit) {
  EXPECT_THROW(closed_form_source("1f1b", options_of(4096, 1 << 20)), Error);
}

}  // namespace
}  // namespace baton::sim
