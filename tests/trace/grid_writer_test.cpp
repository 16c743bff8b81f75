#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "baton/core/error.h"
#include "baton/trace/writers.h"
#include "simulated_timeline.h"

namespace baton::trace {
namespace {

using schedule::ActionKind;
using ::testing::HasSubstr;

// The grid's cells, row by row, with the "rank r |" prefix dropped.
std::vector<std::vector<std::string>> cells_of(const std::string& grid) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(grid);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line.substr(line.find('|') + 1));
    rows.emplace_back();
    for (std::string word; words >> word;) rows.back().push_back(word);
  }
  return rows;
}

TEST(GridWriter, DrawsAHandBuiltTimelineCellForCell) {
  Timeline timeline;
  timeline.ranks = 2;
  timeline.events = {{0, 0, 0, ActionKind::F, 0, 1},
                     {1, 1, 0, ActionKind::F, 1, 2},
                     {1, 1, 0, ActionKind::B, 2, 4},
                     {0, 0, 0, ActionKind::B, 4, 6}};
  EXPECT_EQ(to_grid(timeline),
            "rank 0 | F0 .  .  .  B0 B0\n"
            "rank 1 | .  F0 B0 B0 .  .\n");
}

TEST(GridWriter, OneFOneBWithFourRanksAndEightMicrobatchesSpansThirtyThreeColumns) {
  const auto rows = cells_of(to_grid(testing::simulated_timeline("1f1b", 4, 8)));
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& row : rows) EXPECT_EQ(row.size(), 33u);  // (m + p - 1) * (tf + tb)
  EXPECT_EQ(rows[0][0], "F0");
  EXPECT_EQ(rows[0][3], "F3");
  EXPECT_EQ(rows[0][4], ".");
  EXPECT_EQ(rows[0][10], "B0");  // B0 climbs back through ranks 3, 2, 1 at 2 cells each
  EXPECT_EQ(rows[0][11], "B0");
  EXPECT_EQ(rows[0][32], "B7");
  EXPECT_EQ(rows[3][2], ".");
  EXPECT_EQ(rows[3][3], "F0");
  EXPECT_EQ(rows[3][4], "B0");
  EXPECT_EQ(rows[3][6], "F1");
}

TEST(GridWriter, IdleCellsMatchTheOneFOneBBubbleFormula) {
  const auto rows = cells_of(to_grid(testing::simulated_timeline("1f1b", 4, 8)));
  int idle = 0;
  for (const auto& row : rows)
    for (const auto& cell : row) idle += cell == ".";
  EXPECT_EQ(idle, 4 * 3 * 3);  // p (p - 1) (tf + tb)
}

TEST(GridWriter, LabelsCarryTheStageWhenARankHoldsSeveralStages) {
  const auto rows = cells_of(to_grid(testing::simulated_timeline("interleaved", 2, 4, 1, 2, 0, 2)));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "0F0");
  bool saw_stage_two = false;
  for (const auto& cell : rows[0]) saw_stage_two |= cell.rfind("2F", 0) == 0;
  EXPECT_TRUE(saw_stage_two);
}

TEST(GridWriter, CellWidthGrowsWithTheWidestLabel) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.events = {{0, 0, 9, ActionKind::F, 0, 1}, {0, 0, 10, ActionKind::F, 1, 2}};
  EXPECT_EQ(to_grid(timeline), "rank 0 | F9  F10\n");
}

TEST(GridWriter, RankLabelsAlignPastTenRanks) {
  Timeline timeline;
  timeline.ranks = 11;
  timeline.events = {{10, 10, 0, ActionKind::F, 0, 1}};
  const std::string grid = to_grid(timeline);
  EXPECT_THAT(grid, HasSubstr("rank 0  | .\n"));
  EXPECT_THAT(grid, HasSubstr("rank 10 | F0\n"));
}

TEST(GridWriter, RoundingNeverLetsTwoEventsOfARankShareACell) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.events = {{0, 0, 0, ActionKind::F, 0.5, 2.0}, {0, 0, 1, ActionKind::F, 2.0, 3.0}};
  EXPECT_EQ(to_grid(timeline), "rank 0 | .  F0 F0 F1\n");
}

TEST(GridWriter, AVeryShortEventDoesNotStretchTheGridPastAThousandColumns) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.time_unit = "ms";
  timeline.events = {{0, 0, 0, ActionKind::F, 0, 0.001}, {0, 0, 0, ActionKind::B, 0.001, 100}};
  const auto rows = cells_of(to_grid(timeline));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_LE(rows[0].size(), 1001u);
  EXPECT_GE(rows[0].size(), 999u);
  EXPECT_EQ(rows[0].front(), "F0");
  EXPECT_EQ(rows[0].back(), "B0");
}

TEST(GridWriter, AnEmptyTimelineDrawsEmptyRows) {
  Timeline timeline;
  timeline.ranks = 2;
  EXPECT_EQ(to_grid(timeline), "rank 0 |\nrank 1 |\n");
}

TEST(GridWriter, RejectsAnEventOnARankTheTimelineDoesNotHave) {
  Timeline timeline;
  timeline.ranks = 2;
  timeline.events = {{5, 1, 3, ActionKind::F, 0, 1}};
  try {
    to_grid(timeline);
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[trace.to_grid] event 1F3 is on rank 5"));
    EXPECT_THAT(e.what(), HasSubstr("2 ranks"));
  }
}

TEST(GridWriter, RejectsAnEventThatEndsBeforeItStarts) {
  Timeline timeline;
  timeline.ranks = 1;
  timeline.events = {{0, 0, 2, ActionKind::B, 3, 1}};
  EXPECT_THROW(to_grid(timeline), Error);
}

}  // namespace
}  // namespace baton::trace
