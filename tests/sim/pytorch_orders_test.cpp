// baton's generators against the orders PyTorch itself writes: every
// multi-stage schedule of torch.distributed.pipelining (2.15), as its
// _dump_csv wrote it (tests/schedule/pytorch_csv/orders/, made by
// make_fixtures.py there), read as a baton schedule and simulated with the
// same costs as baton's generator of the same kind: F = 1, B = 2 (I = W = 1)
// per rank's share, communication 0 and 0.2. baton's must be no slower.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "baton/schedule/csv_format.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::sim {
namespace {

using schedule::GeneratorOptions;
using schedule::Schedule;

// baton's name of each multi-stage schedule PyTorch has (the fixture's name).
const std::vector<std::string> kMultiStage = {"interleaved", "looped-bfs", "interleaved-zb", "zb-v",
                                              "dualpipev"};

std::string fixture(const std::string& name) {
  const std::string path = std::string(BATON_PYTORCH_CSV_DIR) + "/orders/" + name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

double makespan(const Schedule& lowered, double comm) {
  return simulate(lowered, uniform_cost_model(lowered, 1, 2, 1, comm)).stats.makespan;
}

// Relative slack for sums of the same costs added in another order.
constexpr double kRounding = 1e-9;

using Case = std::tuple<std::string, int, int, double>;  // schedule, p, m, comm

class PyTorchOrder : public ::testing::TestWithParam<Case> {};

TEST_P(PyTorchOrder, BatonsGeneratorOfTheSameScheduleIsNoSlower) {
  const auto& [name, p, m, comm] = GetParam();
  const Schedule theirs = schedule::parse_csv_schedule(
      fixture(name + "_p" + std::to_string(p) + "_m" + std::to_string(m) + ".csv"));
  const Schedule ours = schedule::lower(
      schedule::generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m)));
  // The same shape: p ranks, m micro-batches, 2 chunks per rank on the same map.
  ASSERT_EQ(theirs.ranks, ours.ranks);
  ASSERT_EQ(theirs.stages, ours.stages);
  ASSERT_EQ(theirs.microbatches, ours.microbatches);
  ASSERT_EQ(theirs.map, ours.map);
  const double t_theirs = makespan(theirs, comm), t_ours = makespan(ours, comm);
  EXPECT_LE(t_ours, t_theirs * (1 + kRounding))
      << name << " p=" << p << " m=" << m << " comm=" << comm;
  RecordProperty("pytorch_makespan", std::to_string(t_theirs));
  RecordProperty("baton_makespan", std::to_string(t_ours));
}

INSTANTIATE_TEST_SUITE_P(EveryMultiStageSchedule, PyTorchOrder,
                         ::testing::Combine(::testing::ValuesIn(kMultiStage),
                                            ::testing::Values(2, 4), ::testing::Values(8, 16),
                                            ::testing::Values(0.0, 0.2)),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string n = std::get<0>(info.param);
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n + "_p" + std::to_string(std::get<1>(info.param)) + "_m" +
                                  std::to_string(std::get<2>(info.param)) +
                                  (std::get<3>(info.param) > 0 ? "_comm" : "_no_comm");
                         });

// Where baton's interleaved-zb departs from PyTorch's order (a warm-up of
// 2 (p - 1 - r) chunk forwards beyond the (v - 1) g of both, not p - 1 - r),
// a communication delay no longer stalls the first input gradient: shorter
// with comm 0.2 in every case, equal without.
TEST(PyTorchOrder, InterleavedZbIsShorterThanPyTorchsWithCommunicationAndEqualWithout) {
  for (int p : {2, 4}) {
    for (int m : {8, 16}) {
      const Schedule theirs = schedule::parse_csv_schedule(
          fixture("interleaved-zb_p" + std::to_string(p) + "_m" + std::to_string(m) + ".csv"));
      const Schedule ours = schedule::lower(schedule::generate(
          "interleaved-zb", GeneratorOptions().set_ranks(p).set_microbatches(m)));
      EXPECT_DOUBLE_EQ(makespan(ours, 0), makespan(theirs, 0)) << "p=" << p << " m=" << m;
      EXPECT_LT(makespan(ours, 0.2), makespan(theirs, 0.2) - 0.1) << "p=" << p << " m=" << m;
    }
  }
}

}  // namespace
}  // namespace baton::sim
