// Megatron's scatter/gather in the simulator (CostModel::scatter_gather): a
// boundary crosses the pipeline link as 1/tp of its bytes and is gathered over
// the tp link (baton's all-reduce of zero-padded slices); without it the whole
// boundary crosses. Checked against hand computations of the ring formula and
// of a 2-rank, 1-micro-batch 1F1B step.
#include <gtest/gtest.h>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::sim {
namespace {

CostModel two_stages(int tp, bool scatter_gather) {
  const schedule::Schedule s =
      schedule::generate("1f1b", schedule::GeneratorOptions().set_ranks(2).set_microbatches(1));
  CostModel m = uniform_cost_model(s, /*tf=*/1, /*tb=*/2, /*tw=*/0, /*comm=*/0.5);
  for (auto& stage : m.stages) stage.boundary_bytes = 800;
  m.comm_bytes_per_time = 100;  // the pipeline link: 8 time units for the whole boundary
  m.tp = tp;
  m.tp_link = Link{0.25, 400};  // the tp link
  m.scatter_gather = scatter_gather;
  return m;
}

TEST(ScatterGather, SendsATthOverThePipelineLinkAndGathersOverTp) {
  // Whole: 0.5 + 800 / 100.
  EXPECT_DOUBLE_EQ(two_stages(4, false).comm_time(0), 8.5);
  // 0.5 + 200 / 100, plus the ring all-reduce over 4: 2*3*0.25 + 2*3/4*800/400.
  EXPECT_DOUBLE_EQ(two_stages(4, true).comm_time(0), 0.5 + 2 + 1.5 + 3);
  // tp = 1: nothing to scatter.
  EXPECT_DOUBLE_EQ(two_stages(1, true).comm_time(0), 8.5);
}

TEST(ScatterGather, AOneFOneBStepPaysItOnEachOfItsTwoTransfers) {
  const schedule::Schedule s = schedule::lower(
      schedule::generate("1f1b", schedule::GeneratorOptions().set_ranks(2).set_microbatches(1)));
  for (const bool sg : {false, true}) {
    const CostModel m = two_stages(2, sg);
    // F on rank 0, transfer, F and B on rank 1, transfer back, B on rank 0.
    const double expected = 1 + m.comm_time(0) + 1 + 2 + m.comm_time(0) + 2;
    EXPECT_DOUBLE_EQ(simulate(s, m).stats.makespan, expected) << "scatter/gather " << sg;
  }
  EXPECT_LT(two_stages(2, true).comm_time(0), two_stages(2, false).comm_time(0));
}

}  // namespace
}  // namespace baton::sim
