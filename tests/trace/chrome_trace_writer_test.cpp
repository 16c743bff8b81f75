#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/trace/writers.h"
#include "simulated_timeline.h"

namespace baton::trace {
namespace {

using nlohmann::json;
using schedule::ActionKind;
using ::testing::HasSubstr;

std::vector<json> events_with_phase(const json& trace, const std::string& phase) {
  std::vector<json> events;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == phase) events.push_back(e);
  return events;
}

TEST(ChromeTraceWriter, WritesOneCompleteEventPerTimelineEvent) {
  const Timeline timeline = testing::simulated_timeline("1f1b", 4, 8);
  const json trace = json::parse(to_chrome_trace(timeline));
  EXPECT_EQ(events_with_phase(trace, "X").size(), timeline.events.size());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
}

// Memory points are counters, one named track per rank, in MiB at their
// times (cost-model units as ms, in microseconds); none without points.
TEST(ChromeTraceWriter, WritesMemoryPointsAsCountersPerRank) {
  Timeline timeline = testing::simulated_timeline("1f1b", 2, 2);
  EXPECT_TRUE(events_with_phase(json::parse(to_chrome_trace(timeline)), "C").empty());
  timeline.memory = {{0, 0, 1048576}, {1, 2.5, 3 * 1048576}};
  const std::vector<json> counters = events_with_phase(json::parse(to_chrome_trace(timeline)), "C");
  ASSERT_EQ(counters.size(), 2u);
  EXPECT_EQ(counters[0].at("name"), "memory rank 0");
  EXPECT_DOUBLE_EQ(counters[0].at("args").at("MiB").get<double>(), 1);
  EXPECT_EQ(counters[1].at("name"), "memory rank 1");
  EXPECT_DOUBLE_EQ(counters[1].at("ts").get<double>(), 2500);
  EXPECT_DOUBLE_EQ(counters[1].at("args").at("MiB").get<double>(), 3);
}

TEST(ChromeTraceWriter, WritesCostUnitsAsMillisecondsInMicroseconds) {
  const Timeline timeline = testing::simulated_timeline("1f1b", 4, 8);
  const std::vector<json> written = events_with_phase(json::parse(to_chrome_trace(timeline)), "X");
  ASSERT_EQ(written.size(), timeline.events.size());
  for (size_t i = 0; i < written.size(); ++i) {
    const Event& e = timeline.events[i];
    const json& w = written[i];
    EXPECT_EQ(w.at("pid"), 0);
    EXPECT_EQ(w.at("tid"), e.rank);
    EXPECT_DOUBLE_EQ(w.at("ts").get<double>(), e.start * 1000);
    EXPECT_DOUBLE_EQ(w.at("dur").get<double>(), (e.end - e.start) * 1000);
  }
  // Independent of the simulator's numbers: rank 3 runs F0 over [3, 4) and B0 over [4, 6).
  bool saw_b0 = false;
  for (const json& w : written) {
    if (w.at("tid") == 3 && w.at("name") == "B0") {
      saw_b0 = true;
      EXPECT_DOUBLE_EQ(w.at("ts").get<double>(), 4000);
      EXPECT_DOUBLE_EQ(w.at("dur").get<double>(), 2000);
    }
  }
  EXPECT_TRUE(saw_b0);
}

TEST(ChromeTraceWriter, NamesEventsLikeF3AndTagsThemWithStageMicrobatchAndKind) {
  Timeline timeline;
  timeline.ranks = 2;
  timeline.events = {{1, 1, 3, ActionKind::F, 0, 1}, {1, 1, 3, ActionKind::W, 2, 2.5}};
  const std::vector<json> written = events_with_phase(json::parse(to_chrome_trace(timeline)), "X");
  ASSERT_EQ(written.size(), 2u);
  EXPECT_EQ(written[0].at("name"), "F3");
  EXPECT_EQ(written[1].at("name"), "W3");
  EXPECT_EQ(written[1].at("args"), json({{"stage", 1}, {"microbatch", 3}, {"kind", "W"}}));
  EXPECT_EQ(written[1].at("cat"), "W");
}

TEST(ChromeTraceWriter, NamesTheStageTooWhenARankHoldsSeveralStages) {
  const Timeline timeline = testing::simulated_timeline("interleaved", 2, 4, 1, 2, 0, 2);
  std::set<std::string> names;
  for (const json& w : events_with_phase(json::parse(to_chrome_trace(timeline)), "X"))
    names.insert(w.at("name").get<std::string>());
  EXPECT_TRUE(names.count("0F0"));
  EXPECT_TRUE(names.count("2F0"));
  EXPECT_TRUE(names.count("3B3"));
  EXPECT_FALSE(names.count("F0"));
}

TEST(ChromeTraceWriter, GivesEachRankANamedTrackInRankOrder) {
  const json trace = json::parse(to_chrome_trace(testing::simulated_timeline("1f1b", 12, 12)));
  std::map<int, std::string> names;
  std::map<int, int> sort_index;
  for (const json& e : events_with_phase(trace, "M")) {
    if (e.at("name") == "thread_name") names[e.at("tid")] = e.at("args").at("name");
    if (e.at("name") == "thread_sort_index")
      sort_index[e.at("tid")] = e.at("args").at("sort_index");
    if (e.at("name") == "process_name") {
      EXPECT_EQ(e.at("args").at("name"), "1f1b p=12 m=12");
    }
  }
  ASSERT_EQ(names.size(), 12u);
  for (int r = 0; r < 12; ++r) {
    EXPECT_EQ(names[r], "rank " + std::to_string(r));
    EXPECT_EQ(sort_index[r], r);
  }
}

TEST(ChromeTraceWriter, KeepsMeasuredMicrosecondsAsTheyAre) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.time_unit = "us";
  timeline.events = {{0, 0, 0, ActionKind::F, 12.5, 40}};
  const std::vector<json> written = events_with_phase(json::parse(to_chrome_trace(timeline)), "X");
  ASSERT_EQ(written.size(), 1u);
  EXPECT_DOUBLE_EQ(written[0].at("ts").get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(written[0].at("dur").get<double>(), 27.5);
}

TEST(ChromeTraceWriter, RecordsTheBubbleFraction) {
  const json trace = json::parse(to_chrome_trace(testing::simulated_timeline("1f1b", 4, 8)));
  EXPECT_NEAR(trace.at("otherData").at("bubble_fraction").get<double>(), 3.0 / 11, 1e-12);
}

TEST(ChromeTraceWriter, RejectsATimeUnitItCannotConvert) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.time_unit = "fortnights";
  try {
    to_chrome_trace(timeline);
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[trace.to_chrome_trace] time unit \"fortnights\""));
  }
}

}  // namespace
}  // namespace baton::trace
