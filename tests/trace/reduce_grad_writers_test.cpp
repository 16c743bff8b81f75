// Every writer shows REDUCE_GRAD, on a row or track of the rank's own, since
// it overlaps the rank's compute.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

using schedule::ActionKind;
using ::testing::HasSubstr;

// Rank 1 reduces [4, 6] while rank 0 runs B0; rank 0 reduces [6, 7].
Timeline reduced_timeline() {
  Timeline timeline;
  timeline.ranks = 2;
  timeline.events = {{0, 0, 0, ActionKind::F, 0, 1}, {1, 1, 0, ActionKind::F, 1, 2},
                     {1, 1, 0, ActionKind::B, 2, 4}, {1, 1, 0, ActionKind::REDUCE_GRAD, 4, 6},
                     {0, 0, 0, ActionKind::B, 4, 6}, {0, 0, 0, ActionKind::REDUCE_GRAD, 6, 7}};
  return timeline;
}

TEST(ReduceGradWriters, GridDrawsReductionsOnADpRowBelowTheirRank) {
  EXPECT_EQ(to_grid(reduced_timeline()),
            "rank 0 | F0 .  .  .  B0 B0 .\n"
            "    dp | .  .  .  .  .  .  R0\n"
            "rank 1 | .  F0 B0 B0 .  .  .\n"
            "    dp | .  .  .  .  R0 R0 .\n");
}

TEST(ReduceGradWriters, ReductionsAreNotBusyTimeButLengthenTheStep) {
  const Timeline timeline = reduced_timeline();
  EXPECT_EQ(busy_time(timeline), (std::vector<double>{3, 3}));
  EXPECT_DOUBLE_EQ(makespan(timeline), 7);
}

TEST(ReduceGradWriters, ChromeTracePutsReductionsOnATrackBelowEachRank) {
  const nlohmann::json trace = nlohmann::json::parse(to_chrome_trace(reduced_timeline()));
  std::map<int, std::string> names;
  std::map<int, int> order;
  int reductions = 0;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("name") == "thread_name") names[e.at("tid")] = e.at("args").at("name");
    if (e.at("name") == "thread_sort_index") order[e.at("tid")] = e.at("args").at("sort_index");
    if (e.at("ph") == "X" && e.at("cat") == "REDUCE_GRAD") {
      ++reductions;
      EXPECT_EQ(e.at("tid"), 2 + e.at("args").at("stage").get<int>()) << e;
      EXPECT_EQ(e.at("args").at("bucket"), 0);
      EXPECT_EQ(e.at("name"), "REDUCE_GRAD0");
    }
  }
  EXPECT_EQ(reductions, 2);
  EXPECT_EQ(names[2], "rank 0 dp");
  EXPECT_EQ(names[3], "rank 1 dp");
  EXPECT_EQ((std::vector<int>{order[0], order[2], order[1], order[3]}),
            (std::vector<int>{0, 1, 2, 3}));
}

TEST(ReduceGradWriters, SvgDrawsReductionsAsAStripWithALegendEntry) {
  const std::string svg = to_svg(reduced_timeline());
  EXPECT_THAT(svg, HasSubstr("<title>rank 1: 1REDUCE_GRAD0 from 4 to 6</title>"));
  EXPECT_THAT(svg, HasSubstr("REDUCE_GRAD gradient all-reduce (dp)"));
}

}  // namespace
}  // namespace baton::trace
