#include "baton/schedule/text_format.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/csv_format.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/limits.h"

namespace baton::schedule {
namespace {

constexpr std::string_view kParsePrefix = "[schedule.parse] ";
constexpr size_t kMaxNameBytes = 64;
// Enough for kMaxActions actions of a dozen characters each.
constexpr size_t kMaxFileBytes = size_t{1} << 30;
// Pairs a file may name beyond its action count, so that a small incomplete
// file still reaches the validator, whose message points at what is missing.
constexpr size_t kMaxPairsWithoutActions = 1 << 20;

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

// A header count: digits only, from 1 to `limit`.
int parse_count(std::string_view key, std::string_view value, int line_no, int limit) {
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  BATON_CHECK(digits, "[schedule.parse] line ", line_no, ": ", key, "=", printable(value),
              " is not a positive integer");
  long n = 0;
  for (char c : value) n = std::min<long>(n * 10 + (c - '0'), long{limit} + 1);
  BATON_CHECK(n <= limit, "[schedule.parse] line ", line_no, ": ", key, "=", printable(value),
              " exceeds the limit of ", limit);
  BATON_CHECK(n > 0, "[schedule.parse] line ", line_no, ": ", key, "=", printable(value),
              " must be at least 1");
  return static_cast<int>(n);
}

// A header count must equal what the actions name, `named` `things` (0 to
// named - 1), since every one of them needs its actions.
void check_declared(const char* key, int declared, int named, const char* thing,
                    const char* things) {
  BATON_CHECK(declared >= named, "[schedule.parse] header says ", key, "=", declared,
              " but an action names ", thing, " ", named - 1);
  BATON_CHECK(declared == named, "[schedule.parse] header says ", key, "=", declared,
              " but the actions name ", things, " 0..", named - 1,
              " only; each needs its actions, so the header must say ", key, "=", named);
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

// Digits at `pos` (advanced past them), capped at limit + 1; -1 if none.
long digits_at(const std::string& text, size_t& pos, long limit) {
  const size_t start = pos;
  long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    if (value <= limit) value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  return pos == start ? -1 : std::min(value, limit + 1);
}

// "name:from:to,name:from:to": the skip connections (Schedule::skips). A name
// is letters, digits, '_', '.' and '-'; validate() checks the stages.
std::vector<Skip> parse_skips(const std::string& text, int line) {
  std::vector<Skip> skips;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string entry = text.substr(start, end - start);
    const size_t a = entry.find(':'), b = entry.rfind(':');
    bool ok = a != std::string::npos && b != a && a > 0;
    for (size_t i = 0; ok && i < a; ++i) {
      const char c = entry[i];
      ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
    }
    Skip skip;
    if (ok) {
      skip.name = entry.substr(0, a);
      size_t pos = a + 1;
      skip.from = static_cast<int>(digits_at(entry, pos, kMaxStages));
      ok = pos == b;
      pos = b + 1;
      skip.to = static_cast<int>(digits_at(entry, pos, kMaxStages));
      ok = ok && pos == entry.size() && skip.from >= 0 && skip.to >= 0;
    }
    BATON_CHECK(ok, "[schedule.parse] line ", line, ": skips entry \"", printable(entry),
                "\" is not name:from:to (a name of letters, digits, _ . -, and two stages)");
    BATON_CHECK(skips.size() < static_cast<size_t>(kMaxSkips), "[schedule.parse] line ", line,
                ": more than ", kMaxSkips, " skips");
    skips.push_back(skip);
    start = end + 1;
  }
  return skips;
}

}  // namespace

std::string format_schedule(const Schedule& schedule) {
  std::ostringstream out;
  out << "# baton schedule: name=" << (schedule.name.empty() ? "file" : schedule.name)
      << " pp=" << schedule.ranks << " stages=" << schedule.stages
      << " microbatches=" << schedule.microbatches << " map=" << to_string(schedule.map)
      << (schedule.carries ? " carries=1" : "");
  for (size_t k = 0; k < schedule.skips.size(); ++k) {
    const Skip& skip = schedule.skips[k];
    out << (k ? "," : " skips=") << skip.name << ":" << skip.from << ":" << skip.to;
  }
  out << "\n";
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
  size_t action_count = 0;
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
                    ": header entry \"", printable(word), "\" is not key=value");
        const std::string key(word.substr(0, eq));
        BATON_CHECK(key == "name" || key == "pp" || key == "stages" || key == "microbatches" ||
                        key == "map" || key == "carries" || key == "skips",
                    "[schedule.parse] line ", line_no, ": unknown header key \"", printable(key),
                    "\" (expected name, pp, stages, microbatches, map, carries, skips)");
        BATON_CHECK(declared.count(key) == 0, "[schedule.parse] line ", line_no, ": header key \"",
                    key, "\" given more than once");
        declared[key] = std::string(word.substr(eq + 1));
      }
      continue;
    }
    BATON_CHECK(schedule.actions.size() < static_cast<size_t>(kMaxRanks), "[schedule.parse] line ",
                line_no, ": more than ", kMaxRanks,
                " action lines; a schedule has one line per rank and at most ", kMaxRanks,
                " ranks");
    action_count += words.size();
    BATON_CHECK(action_count <= kMaxActions, "[schedule.parse] line ", line_no, ": more than ",
                kMaxActions, " actions, the limit of a schedule");
    std::vector<Action> list;
    list.reserve(words.size());
    for (auto word : words) {
      try {
        list.push_back(parse_action(word));
      } catch (const Error& e) {
        std::string_view reason = e.what();
        if (reason.substr(0, kParsePrefix.size()) == kParsePrefix)
          reason.remove_prefix(kParsePrefix.size());
        throw Error(::baton::detail::concat("[schedule.parse] line ", line_no, " (rank ",
                                            schedule.actions.size(), "): ", reason));
      }
    }
    schedule.actions.push_back(std::move(list));
  }
  BATON_CHECK(!schedule.actions.empty(),
              "[schedule.parse] no action lines: a schedule has one "
              "line of actions per rank, such as \"0F0 0B0\"");
  schedule.ranks = static_cast<int>(schedule.actions.size());
  infer_shape(schedule, action_count);
  if (declared.count("name")) {
    const std::string& n = declared["name"];
    // Not empty: format_schedule() writes an empty name as "file".
    BATON_CHECK(!n.empty() && n.size() <= kMaxNameBytes && printable(n, kMaxNameBytes) == n,
                "[schedule.parse] line ", header_line, ": name=", printable(n), " must be 1 to ",
                kMaxNameBytes, " printable ASCII characters");
    schedule.name = n;
  }
  schedule.updates = updates_of(schedule.name);
  if (declared.count("pp")) {
    const int pp = parse_count("pp", declared["pp"], header_line, kMaxRanks);
    BATON_CHECK(pp == schedule.ranks, "[schedule.parse] header says pp=", pp, " but the file has ",
                schedule.ranks, " action lines (one per rank)");
  }
  if (declared.count("stages")) {
    check_declared("stages", parse_count("stages", declared["stages"], header_line, kMaxStages),
                   schedule.stages, "stage", "stages");
  }
  if (declared.count("microbatches")) {
    check_declared(
        "microbatches",
        parse_count("microbatches", declared["microbatches"], header_line, kMaxMicrobatches),
        schedule.microbatches, "micro-batch", "micro-batches");
  }
  if (declared.count("map")) {
    std::optional<Placement> placement;
    try {
      placement.emplace(schedule);
    } catch (const Error&) {
    }
    const StageMap map = parse_stage_map(declared["map"]);
    // At p = 1 several maps describe the same placement (loop and v, say).
    BATON_CHECK(map == schedule.map || (placement && placement_fits(map, schedule, *placement)),
                "[schedule.parse] line ", header_line,
                ": header says map=", printable(declared["map"]),
                " but the actions place stages as map=", to_string(schedule.map));
    schedule.map = map;
  }
  if (declared.count("carries")) {
    const std::string& c = declared["carries"];
    BATON_CHECK(c == "0" || c == "1", "[schedule.parse] line ", header_line,
                ": carries=", printable(c),
                " must be 0 or 1 (1: no flush, backwards carried into the next step)");
    schedule.carries = c == "1";
  }
  if (declared.count("skips")) schedule.skips = parse_skips(declared["skips"], header_line);
  return schedule;
}

void infer_shape(Schedule& schedule, size_t action_count) {
  int max_stage = -1, max_microbatch = -1;
  for (const auto& list : schedule.actions)
    for (const auto& a : list) {
      max_stage = std::max(max_stage, a.stage);
      // A REDUCE_GRAD's number is a bucket, not a micro-batch.
      if (!is_step_action(a.kind)) max_microbatch = std::max(max_microbatch, a.microbatch);
    }
  schedule.stages = max_stage + 1;
  schedule.microbatches = max_microbatch + 1;
  // Each (stage, micro-batch) needs an F and a B; the validator's tables have
  // one entry per pair, so far more pairs than actions are refused here.
  const size_t pairs = static_cast<size_t>(schedule.stages) * schedule.microbatches;
  BATON_CHECK(pairs <= std::max(action_count, kMaxPairsWithoutActions),
              "[schedule.parse] the actions name stages 0..", max_stage, " and micro-batches 0..",
              max_microbatch, ", ", pairs, " (stage, micro-batch) pairs, but the file has only ",
              action_count, " actions; each pair needs an F and a B");
  // A (stage, micro-batch) with compute on two ranks has no map; validate()
  // reports it with the grid, so parsing still succeeds.
  try {
    schedule.map = detect_stage_map(schedule, Placement(schedule));
  } catch (const Error&) {
    schedule.map = StageMap::Custom;
  }
}

std::string read_schedule_file(const std::string& path) {
  const std::string quoted = "\"" + printable(path, 256) + "\"";
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK(in.good(), "[schedule.load] cannot read schedule file ", quoted);
  // Bounded, so that a device such as /dev/zero fails instead of filling memory.
  std::string text;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
    BATON_CHECK(text.size() <= kMaxFileBytes, "[schedule.load] schedule file ", quoted,
                " is larger than ", kMaxFileBytes >> 20, " MiB, the limit of a schedule file");
  }
  BATON_CHECK(in.eof(), "[schedule.load] cannot read schedule file ", quoted);
  return text;
}

bool is_csv_path(std::string_view path) {
  return path.size() >= 4 && path.substr(path.size() - 4) == ".csv";
}

Schedule load_schedule_file(const std::string& path) {
  const std::string text = read_schedule_file(path);
  try {
    return is_csv_path(path) ? parse_csv_schedule(text, "file") : parse_schedule(text, "file");
  } catch (const Error& e) {
    throw Error(::baton::detail::concat(printable(path, 256), ": ", e.what()));
  }
}

}  // namespace baton::schedule
