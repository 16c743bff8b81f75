#include "baton/schedule/text_format.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "baton/core/error.h"

namespace baton::schedule {
namespace {

constexpr std::string_view kParsePrefix = "[schedule.parse] ";

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
    size_t start = pos;
    while (pos < line.size() && !std::isspace(static_cast<unsigned char>(line[pos]))) ++pos;
    if (pos > start) words.push_back(line.substr(start, pos - start));
  }
  return words;
}

int parse_count(std::string_view key, std::string_view value, int line_no) {
  int n = 0;
  for (char c : value) {
    BATON_CHECK(std::isdigit(static_cast<unsigned char>(c)) && n < 1000000,
                "[schedule.parse] line ", line_no, ": ", key, "=", value,
                " is not a positive integer");
    n = n * 10 + (c - '0');
  }
  BATON_CHECK(n > 0, "[schedule.parse] line ", line_no, ": ", key, "=", value,
              " must be at least 1");
  return n;
}

// Whether every placed (stage, micro-batch) sits where `map` puts it.
bool placement_fits(StageMap map, const Schedule& schedule, const Placement& placement) {
  const int p = schedule.ranks, S = schedule.stages;
  if (map == StageMap::Custom) return true;
  if (map == StageMap::Loop && S % p != 0) return false;
  if (map == StageMap::V && S != 2 * p) return false;
  if (map == StageMap::Bidirectional && S != p) return false;
  for (int mb = 0; mb < schedule.microbatches; ++mb) {
    bool down = true, up = true;
    for (int s = 0; s < S; ++s) {
      const int r = placement.rank_of(s, mb);
      if (r < 0) continue;
      if (map != StageMap::Bidirectional && r != rank_for_stage(map, p, s)) return false;
      down = down && r == s;
      up = up && r == p - 1 - s;
    }
    if (map == StageMap::Bidirectional && !down && !up) return false;
  }
  return true;
}

}  // namespace

std::string format_schedule(const Schedule& schedule) {
  std::ostringstream out;
  out << "# baton schedule: name=" << (schedule.name.empty() ? "file" : schedule.name)
      << " pp=" << schedule.ranks << " stages=" << schedule.stages
      << " microbatches=" << schedule.microbatches << " map=" << to_string(schedule.map)
      << "\n";
  for (const auto& list : schedule.actions) {
    for (size_t i = 0; i < list.size(); ++i) out << (i ? " " : "") << to_string(list[i]);
    out << "\n";
  }
  return out.str();
}

Schedule parse_schedule(std::string_view text, std::string name) {
  Schedule schedule;
  schedule.name = std::move(name);
  std::map<std::string, std::string> declared;
  int header_line = 0;
  int line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const auto words = split_words(line);
    if (words.empty()) continue;
    if (words[0].front() == '#') {
      const size_t header = line.find("baton schedule:");
      if (header == std::string_view::npos) continue;
      header_line = line_no;
      for (auto word : split_words(line.substr(header + 15))) {
        const size_t eq = word.find('=');
        BATON_CHECK(eq != std::string_view::npos, "[schedule.parse] line ", line_no,
                    ": header entry \"", word, "\" is not key=value");
        const std::string key(word.substr(0, eq));
        BATON_CHECK(key == "name" || key == "pp" || key == "stages" || key == "microbatches" ||
                        key == "map",
                    "[schedule.parse] line ", line_no, ": unknown header key \"", key,
                    "\" (expected name, pp, stages, microbatches, map)");
        declared[key] = std::string(word.substr(eq + 1));
      }
      continue;
    }
    std::vector<Action> list;
    for (auto word : words) {
      try {
        list.push_back(parse_action(word));
      } catch (const Error& e) {
        std::string_view reason = e.what();
        if (reason.substr(0, kParsePrefix.size()) == kParsePrefix)
          reason.remove_prefix(kParsePrefix.size());
        throw Error(detail::concat("[schedule.parse] line ", line_no, " (rank ",
                                   schedule.actions.size(), "): ", reason));
      }
    }
    schedule.actions.push_back(std::move(list));
  }
  BATON_CHECK(!schedule.actions.empty(), "[schedule.parse] no action lines: a schedule has one "
              "line of actions per rank, such as \"0F0 0B0\"");
  schedule.ranks = static_cast<int>(schedule.actions.size());
  int max_stage = -1, max_microbatch = -1;
  for (const auto& list : schedule.actions)
    for (const auto& a : list) {
      max_stage = std::max(max_stage, a.stage);
      max_microbatch = std::max(max_microbatch, a.microbatch);
    }
  schedule.stages = max_stage + 1;
  schedule.microbatches = max_microbatch + 1;
  if (declared.count("name")) schedule.name = declared["name"];
  if (declared.count("pp")) {
    const int pp = parse_count("pp", declared["pp"], header_line);
    BATON_CHECK(pp == schedule.ranks, "[schedule.parse] header says pp=", pp, " but the file has ",
                schedule.ranks, " action lines (one per rank)");
  }
  if (declared.count("stages")) {
    const int stages = parse_count("stages", declared["stages"], header_line);
    BATON_CHECK(stages >= schedule.stages, "[schedule.parse] header says stages=", stages,
                " but an action names stage ", max_stage);
    schedule.stages = stages;
  }
  if (declared.count("microbatches")) {
    const int m = parse_count("microbatches", declared["microbatches"], header_line);
    BATON_CHECK(m >= schedule.microbatches, "[schedule.parse] header says microbatches=", m,
                " but an action names micro-batch ", max_microbatch);
    schedule.microbatches = m;
  }
  // A (stage, micro-batch) with compute on two ranks has no map; validate()
  // reports it with the grid, so parsing still succeeds.
  std::optional<Placement> placement;
  try {
    placement.emplace(schedule);
  } catch (const Error&) {
  }
  schedule.map = placement ? detect_stage_map(schedule, *placement) : StageMap::Custom;
  if (declared.count("map")) {
    const StageMap map = parse_stage_map(declared["map"]);
    // At p = 1 several maps describe the same placement (loop and v, say).
    BATON_CHECK(map == schedule.map || (placement && placement_fits(map, schedule, *placement)),
                "[schedule.parse] line ", header_line, ": header says map=", declared["map"],
                " but the actions place stages as map=", to_string(schedule.map));
    schedule.map = map;
  }
  return schedule;
}

Schedule load_schedule_file(const std::string& path) {
  std::ifstream in(path);
  BATON_CHECK(in.good(), "[schedule.load] cannot read schedule file \"", path, "\"");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return parse_schedule(buffer.str(), "file");
  } catch (const Error& e) {
    throw Error(detail::concat(path, ": ", e.what()));
  }
}

std::string format_grid(const Schedule& schedule,
                        const std::vector<std::pair<int, size_t>>& marks) {
  const std::set<std::pair<int, size_t>> marked(marks.begin(), marks.end());
  size_t width = 3;
  for (const auto& list : schedule.actions)
    for (const auto& a : list) width = std::max(width, to_string(a).size() + 2);
  std::ostringstream out;
  const int label_width = static_cast<int>(std::to_string(schedule.actions.size()).size());
  for (size_t r = 0; r < schedule.actions.size(); ++r) {
    std::string row = "rank " + std::to_string(r);
    row.append(label_width - std::to_string(r).size(), ' ');
    row += " |";
    const auto& list = schedule.actions[r];
    for (size_t i = 0; i < list.size(); ++i) {
      std::string cell = to_string(list[i]);
      cell = marked.count({static_cast<int>(r), i}) ? ">" + cell + "<" : " " + cell + " ";
      cell.append(width - cell.size(), ' ');
      row += cell;
    }
    while (!row.empty() && row.back() == ' ') row.pop_back();
    out << row << "\n";
  }
  return out.str();
}

}  // namespace baton::schedule
