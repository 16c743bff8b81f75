#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <set>

#include "baton/core/error.h"
#include "baton/trace/writers.h"
#include "simulated_timeline.h"

namespace baton::trace {
namespace {

using schedule::ActionKind;
using ::testing::HasSubstr;
using ::testing::Not;

// An event's box as the SVG draws it, keyed by its tooltip ("rank 3: 3F0").
struct Box {
  double x, y, width, height;
  std::string fill;
};

std::map<std::string, Box> boxes_of(const std::string& svg) {
  static const std::regex kBox(
      R"re(<rect class="event" x="([^"]+)" y="([^"]+)" width="([^"]+)" height="([^"]+)" )re"
      R"re(fill="([^"]+)"[^>]*><title>(rank \d+: \w+) from)re");
  std::map<std::string, Box> boxes;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kBox), end; it != end; ++it) {
    const std::smatch& m = *it;
    boxes[m[6]] = {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4]), m[5]};
  }
  return boxes;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

// Every element closes, in order: a small well-formedness check of the tags.
bool tags_balance(const std::string& svg) {
  std::vector<std::string> open;
  for (size_t pos = svg.find('<'); pos != std::string::npos; pos = svg.find('<', pos + 1)) {
    const size_t close = svg.find('>', pos);
    if (close == std::string::npos) return false;
    const std::string tag = svg.substr(pos + 1, close - pos - 1);
    if (tag.back() == '/') continue;
    const std::string name = tag.substr(0, tag.find(' '));
    if (name[0] != '/') {
      open.push_back(name);
    } else if (open.empty() || open.back() != name.substr(1)) {
      return false;
    } else {
      open.pop_back();
    }
  }
  return open.empty();
}

Timeline split_backward_timeline() {
  Timeline timeline;
  timeline.title = "hand-built";
  timeline.ranks = 2;
  timeline.events = {{0, 0, 0, ActionKind::F, 0, 1},
                     {1, 1, 0, ActionKind::F, 1, 2},
                     {1, 1, 0, ActionKind::I, 2, 3},
                     {1, 1, 0, ActionKind::W, 3, 4},
                     {0, 0, 0, ActionKind::B, 3, 5}};
  return timeline;
}

TEST(SvgWriter, DrawsOneBoxPerEvent) {
  const Timeline timeline = testing::simulated_timeline("1f1b", 4, 8);
  const std::string svg = to_svg(timeline);
  EXPECT_EQ(count(svg, "<rect class=\"event\""), 2u * 4 * 8);
  EXPECT_EQ(boxes_of(svg).size(), timeline.events.size());
}

double height_of(const std::string& svg) {
  const size_t at = svg.find("height=\"") + 8;
  return std::stod(svg.substr(at, svg.find('"', at) - at));
}

// Memory points add a lane per rank under the axis (a title row of 22 px and
// 34 + 6 px a rank): each rank's bytes as one filled step, on the scale of
// the highest point, its peak named; the box of the highest point reaches
// the lane's top less 4 px. Points off the ranks are refused.
TEST(SvgWriter, DrawsEachRanksMemoryUnderTheAxisOnOneScale) {
  constexpr double kMiB = 1024.0 * 1024.0;
  Timeline timeline = split_backward_timeline();
  const std::string without = to_svg(timeline);
  EXPECT_THAT(without, Not(HasSubstr("memory")));
  timeline.memory = {{0, 0, 1 * kMiB}, {0, 1, 3 * kMiB}, {0, 5, 1 * kMiB}, {1, 0, 2 * kMiB}};
  const std::string svg = to_svg(timeline);
  EXPECT_TRUE(tags_balance(svg));
  EXPECT_EQ(count(svg, "<path class=\"memory\""), 2u);
  EXPECT_EQ(count(svg, "<rect class=\"memory-lane\""), 2u);
  EXPECT_THAT(svg, HasSubstr("memory (the lanes' scale: 3.00 MiB)"));
  EXPECT_THAT(svg, HasSubstr("rank 0: peak 3.00 MiB"));
  EXPECT_THAT(svg, HasSubstr("rank 1: peak 2.00 MiB"));
  EXPECT_DOUBLE_EQ(height_of(svg) - height_of(without), 22 + 2 * (34 + 6));
  // Rank 0's highest step (3 MiB from time 1 to 5) is at its lane's top + 4.
  const size_t lane = svg.find("<rect class=\"memory-lane\"");
  const size_t y_at = svg.find("y=\"", lane) + 3;
  const double top = std::stod(svg.substr(y_at, svg.find('"', y_at) - y_at));
  const size_t path = svg.find("<path class=\"memory\" d=\"");
  const std::string d = svg.substr(path, svg.find("\"", path + 27) - path);
  char step[64];
  std::snprintf(step, sizeof step, " %g L", top + 4);
  EXPECT_THAT(d, HasSubstr(step)) << d;
  timeline.memory.push_back({2, 0, 1});
  EXPECT_THAT([&] { to_svg(timeline); },
              ::testing::ThrowsMessage<Error>(HasSubstr("a memory point is on rank 2")));
}

TEST(SvgWriter, TitleCarriesTheTimelineTitleAndTheBubbleFromTheFormula) {
  // 1F1B's bubble is (p - 1) / (m + p - 1) = 3 / 11 = 27.27%.
  const std::string svg = to_svg(testing::simulated_timeline("1f1b", 4, 8));
  EXPECT_THAT(svg, HasSubstr("<text class=\"title\""));
  EXPECT_THAT(svg, HasSubstr("1f1b p=4 m=8 \u2014 bubble 27.3%</text>"));
}

TEST(SvgWriter, IsWellFormedEvenWithMarkupInTheTitle) {
  Timeline timeline = split_backward_timeline();
  timeline.title = "a<b & \"c\" 'd'>";
  const std::string svg = to_svg(timeline);
  EXPECT_THAT(svg, HasSubstr("a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;"));
  EXPECT_THAT(svg, Not(HasSubstr("a<b")));
  EXPECT_TRUE(tags_balance(svg));
  EXPECT_TRUE(tags_balance(to_svg(testing::simulated_timeline("interleaved", 4, 8, 1, 2, 0, 2))));
}

TEST(SvgWriter, LegendListsEachKindTheTimelineHolds) {
  const std::string one_f_one_b = to_svg(testing::simulated_timeline("1f1b", 4, 8));
  EXPECT_EQ(count(one_f_one_b, "<rect class=\"legend\""), 2u);
  EXPECT_THAT(one_f_one_b, HasSubstr(">F forward</text>"));
  EXPECT_THAT(one_f_one_b, HasSubstr(">B backward</text>"));
  EXPECT_THAT(one_f_one_b, Not(HasSubstr(">W weight-gradient backward</text>")));

  const std::string split = to_svg(split_backward_timeline());
  EXPECT_EQ(count(split, "<rect class=\"legend\""), 4u);
  EXPECT_THAT(split, HasSubstr(">I input-gradient backward</text>"));
  EXPECT_THAT(split, HasSubstr(">W weight-gradient backward</text>"));
}

TEST(SvgWriter, GivesEachComputeKindItsOwnColour) {
  const auto boxes = boxes_of(to_svg(split_backward_timeline()));
  ASSERT_EQ(boxes.size(), 5u);
  const std::set<std::string> fills = {boxes.at("rank 0: 0F0").fill, boxes.at("rank 0: 0B0").fill,
                                       boxes.at("rank 1: 1I0").fill, boxes.at("rank 1: 1W0").fill};
  EXPECT_EQ(fills.size(), 4u);
  EXPECT_EQ(boxes.at("rank 0: 0F0").fill, boxes.at("rank 1: 1F0").fill);
}

TEST(SvgWriter, PlacesBoxesInProportionToTime) {
  const auto boxes = boxes_of(to_svg(testing::simulated_timeline("1f1b", 4, 8)));
  const Box& first = boxes.at("rank 0: 0F0");
  const double unit = first.width;  // tf = 1
  EXPECT_NEAR(boxes.at("rank 0: 0B0").width, 2 * unit, 0.02);
  EXPECT_NEAR(boxes.at("rank 3: 3F0").x - first.x, 3 * unit, 0.02);
  EXPECT_NEAR(boxes.at("rank 0: 0B0").x - first.x, 10 * unit, 0.02);
  EXPECT_NEAR(boxes.at("rank 0: 0B7").x + boxes.at("rank 0: 0B7").width - first.x, 33 * unit, 0.02);
}

TEST(SvgWriter, StacksOneRowPerRank) {
  const auto boxes = boxes_of(to_svg(testing::simulated_timeline("1f1b", 4, 8)));
  for (int r = 1; r < 4; ++r) {
    const std::string rank = "rank " + std::to_string(r) + ": " + std::to_string(r);
    const std::string above = "rank " + std::to_string(r - 1) + ": " + std::to_string(r - 1);
    EXPECT_GT(boxes.at(rank + "F0").y, boxes.at(above + "F0").y + boxes.at(above + "F0").height);
    EXPECT_EQ(boxes.at(rank + "F0").y, boxes.at(rank + "B7").y);
  }
}

TEST(SvgWriter, WritesTheMicrobatchInEveryBoxOfASmallPipeline) {
  const std::string svg = to_svg(testing::simulated_timeline("1f1b", 4, 8));
  const std::string bold = "font-weight=\"bold\" text-anchor=\"middle\"";
  EXPECT_EQ(count(svg, bold), 64u);
  EXPECT_EQ(count(svg, "\">7</text>"), 8u);  // F7 and B7 on each of 4 ranks
  EXPECT_THAT(svg, Not(HasSubstr(">s0</text>")));
}

TEST(SvgWriter, NamesTheStageWhenARankHoldsSeveralStages) {
  const std::string svg = to_svg(testing::simulated_timeline("interleaved", 4, 8, 1, 2, 0, 2));
  EXPECT_THAT(svg, HasSubstr(">s2</text>"));
  EXPECT_THAT(svg, HasSubstr(">s6</text>"));
}

TEST(SvgWriter, TimeAxisTicksStepByRoundNumbersAcrossTheWholeSpan) {
  const std::string svg = to_svg(testing::simulated_timeline("1f1b", 8, 32));
  static const std::regex kTick(R"re(<text class="tick" x="[^"]+" y="[^"]+">([^<]+)</text>)re");
  std::vector<double> ticks;
  for (std::sregex_iterator it(svg.begin(), svg.end(), kTick), end; it != end; ++it)
    ticks.push_back(std::stod((*it)[1]));
  ASSERT_GE(ticks.size(), 5u);
  const double step = ticks[1] - ticks[0];
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
  EXPECT_EQ(ticks[0], 0);
  EXPECT_TRUE(mantissa == 1 || mantissa == 2 || mantissa == 5) << step;
  for (size_t i = 1; i < ticks.size(); ++i) EXPECT_DOUBLE_EQ(ticks[i] - ticks[i - 1], step);
  EXPECT_LE(ticks.back(), 117);  // (m + p - 1) * 3
  EXPECT_GT(ticks.back() + step, 117);
  EXPECT_THAT(svg, HasSubstr(">time (cost-model units)</text>"));
}

TEST(SvgWriter, DrawsCommunicationAsAThinStripThatLeavesComputeVisible) {
  Timeline timeline = split_backward_timeline();
  timeline.time_unit = "ms";
  timeline.events.push_back({1, 1, 0, ActionKind::RECV_F, 0.5, 1.5});
  const std::string svg = to_svg(timeline);
  const auto boxes = boxes_of(svg);
  const Box& recv = boxes.at("rank 1: 1RECV_F0");
  const Box& forward = boxes.at("rank 1: 1F0");
  EXPECT_LT(recv.height, forward.height / 2);
  EXPECT_NEAR(recv.y + recv.height, forward.y + forward.height, 0.01);
  EXPECT_GT(svg.find("<title>rank 1: 1RECV_F0"), svg.find("<title>rank 1: 1W0"));
  EXPECT_THAT(svg, HasSubstr(">time (ms)</text>"));
}

TEST(SvgWriter, DrawsAnEmptyTimelineWithNoBubble) {
  Timeline timeline;
  timeline.ranks = 2;
  const std::string svg = to_svg(timeline);
  EXPECT_EQ(count(svg, "<rect class=\"event\""), 0u);
  EXPECT_EQ(count(svg, "<rect class=\"lane\""), 2u);
  EXPECT_THAT(svg, HasSubstr("timeline \u2014 bubble 0.0%"));
  EXPECT_TRUE(tags_balance(svg));
}

TEST(SvgWriter, RejectsAnEventOnARankTheTimelineDoesNotHave) {
  Timeline timeline = split_backward_timeline();
  timeline.events.push_back({2, 0, 4, ActionKind::W, 0, 1});
  EXPECT_THROW(
      {
        try {
          to_svg(timeline);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("[trace.to_svg] event 0W4 is on rank 2"));
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace baton::trace
