#include "baton/schedule/csv_format.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

// How many marked actions a one-line validation message locates.
constexpr size_t kLocatedMarks = 4;

// PyTorch action kinds baton drops on reading (see the header).
constexpr std::string_view kDropped[] = {"UNSHARD", "RESHARD", "WAIT_REDUCE_GRAD"};

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// (kind, stage, micro-batch) as one key.
uint64_t key(ActionKind kind, int stage, int microbatch) {
  return (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(stage) << 28) |
         static_cast<uint64_t>(microbatch);
}

// A file's actions, with the 1-based field each came from.
struct Rows {
  Schedule schedule;
  std::vector<std::vector<size_t>> columns;
};

class RowReader {
 public:
  // `total`: actions read so far, this row's included.
  RowReader(Rows& rows, int line, size_t& total)
      : rows_(rows), line_(line), rank_(rows.schedule.actions.size()), total_(total) {
    rows_.schedule.actions.emplace_back();
    rows_.columns.emplace_back();
  }

  [[noreturn]] void fail(size_t column, const std::string& reason) const {
    throw Error(::baton::detail::concat("[schedule.csv] line ", line_, " (rank ", rank_,
                                        "), column ", column, ": ", reason));
  }

  void read_field(std::string_view field, size_t column) {
    field = trim(field);
    if (field.size() >= 2 && field.front() == '"' && field.back() == '"')
      field = trim(field.substr(1, field.size() - 2));
    if (field.empty()) return;  // an idle step
    if (field.front() == '(') return read_overlap(field, column);
    size_t pos = 0;
    while (pos < field.size() && std::isdigit(static_cast<unsigned char>(field[pos]))) ++pos;
    size_t end = pos;
    while (end < field.size() && !std::isdigit(static_cast<unsigned char>(field[end]))) ++end;
    const std::string_view kind = field.substr(pos, end - pos);
    const std::string_view stage = field.substr(0, pos), rest = field.substr(end);
    if (std::find(std::begin(kDropped), std::end(kDropped), kind) != std::end(kDropped)) {
      if (stage.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c));
          }))
        fail(column, "action \"" + printable(field) + "\" must be a stage number and " +
                         std::string(kind) + ", as in 0" + std::string(kind));
      return;
    }
    if (kind == "WAIT_SEND_F" || kind == "WAIT_SEND_B") {
      const std::string send = std::string(stage) + std::string(kind.substr(5)) + std::string(rest);
      const Action a = parse(send, column);
      if (sent_.count(key(a.kind, a.stage, a.microbatch)) == 0)
        fail(column, "\"" + printable(field) + "\" waits for " + send +
                         ", which this row has not sent before it");
      return;
    }
    add(parse(field, column), column);
  }

  // Places the receives before their consumers; see the header.
  void finish() {
    if (pending_.empty()) return;
    size_t column = SIZE_MAX;
    Action recv;
    for (const auto& [k, where] : pending_) {
      if (where.second < column) column = where.second, recv = where.first;
    }
    fail(column, to_string(recv) + " has no action after it in this row that consumes it (" +
                     std::to_string(recv.stage) +
                     (recv.kind == ActionKind::RECV_F ? "F" : "B or I") +
                     std::to_string(recv.microbatch) + ")");
  }

 private:
  Action parse(std::string_view token, size_t column) const {
    try {
      return parse_action(token);
    } catch (const Error& e) {
      std::string_view reason = e.what();
      const std::string_view prefix = "[schedule.parse] ";
      if (reason.substr(0, prefix.size()) == prefix) reason.remove_prefix(prefix.size());
      // parse_action's list of the text format's kinds, replaced by PyTorch's.
      const std::string_view hint =
          " (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD, REDUCE_TIED, "
          "CLIP_NORM, REDUCE_SCATTER, UNSHARD or RESHARD)";
      if (reason.size() > hint.size() && reason.substr(reason.size() - hint.size()) == hint) {
        reason.remove_suffix(hint.size());
        fail(column, std::string(reason) +
                         " (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, "
                         "WAIT_SEND_B, UNSHARD, RESHARD, REDUCE_GRAD, WAIT_REDUCE_GRAD or "
                         "(...)OVERLAP_F_B)");
      }
      fail(column, std::string(reason));
    }
  }

  void read_overlap(std::string_view field, size_t column) {
    const size_t close = field.find(')');
    if (close == std::string_view::npos || trim(field.substr(close + 1)) != "OVERLAP_F_B")
      fail(column, "action \"" + printable(field) +
                       "\": a parenthesised group must be (action;action;...)OVERLAP_F_B");
    std::string_view inner = field.substr(1, close - 1);
    while (!inner.empty()) {
      const size_t semi = std::min(inner.find(';'), inner.size());
      const std::string_view part = trim(inner.substr(0, semi));
      inner.remove_prefix(std::min(semi + 1, inner.size()));
      if (part.empty()) continue;
      const Action a = parse(part, column);
      if (!is_compute(a.kind))
        fail(column, "OVERLAP_F_B may group compute actions only, not " + to_string(a));
      add(a, column);
    }
  }

  void add(const Action& a, size_t column) {
    BATON_CHECK(++total_ <= kMaxActions, "[schedule.csv] line ", line_, ": more than ", kMaxActions,
                " actions, the limit of a schedule");
    if (a.skip >= 0)
      fail(column, to_string(a) +
                       " is a transfer of a skip connection, which PyTorch's schedule CSV cannot "
                       "describe; use baton's text format for schedules with skips");
    const uint64_t k = key(a.kind, a.stage, a.microbatch);
    if (a.kind == ActionKind::RECV_F || a.kind == ActionKind::RECV_B) {
      const ActionKind consumer = a.kind == ActionKind::RECV_F ? ActionKind::F : ActionKind::B;
      const auto done = consumed_.find(key(consumer, a.stage, a.microbatch));
      if (done != consumed_.end())
        fail(column, to_string(a) + " comes after " + to_string(done->second.first) + " (column " +
                         std::to_string(done->second.second) +
                         "), which consumes it; a receive must come before its consumer");
      if (!pending_.emplace(k, std::make_pair(a, column)).second)
        fail(column, to_string(a) + " appears twice in this row");
      return;
    }
    if (a.kind == ActionKind::SEND_F || a.kind == ActionKind::SEND_B) sent_.insert(k);
    // B and I consume RECV_B; key both as B.
    const ActionKind as = is_input_backward(a.kind) ? ActionKind::B : a.kind;
    if (as == ActionKind::F || as == ActionKind::B) {
      consumed_.emplace(key(as, a.stage, a.microbatch), std::make_pair(a, column));
      const ActionKind recv = as == ActionKind::F ? ActionKind::RECV_F : ActionKind::RECV_B;
      const auto it = pending_.find(key(recv, a.stage, a.microbatch));
      if (it != pending_.end()) {
        push(it->second.first, it->second.second);
        pending_.erase(it);
      }
    }
    push(a, column);
  }

  void push(const Action& a, size_t column) {
    rows_.schedule.actions[rank_].push_back(a);
    rows_.columns[rank_].push_back(column);
  }

  Rows& rows_;
  int line_;
  size_t rank_;
  size_t& total_;
  std::unordered_set<uint64_t> sent_;
  std::unordered_map<uint64_t, std::pair<Action, size_t>> pending_;   // receives not yet placed
  std::unordered_map<uint64_t, std::pair<Action, size_t>> consumed_;  // F, B/I seen
};

Rows read_rows(std::string_view text) {
  Rows rows;
  size_t total = 0;
  int line_no = 0;
  // Blank lines at the end are no rows (csv writers end with a newline).
  size_t last = text.find_last_not_of(" \t\r\n");
  text = text.substr(0, last == std::string_view::npos ? 0 : last + 1);
  BATON_CHECK(!text.empty(),
              "[schedule.csv] no rows: a schedule CSV has one row of actions per "
              "rank, such as \"0F0,0B0\"");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    BATON_CHECK(rows.schedule.actions.size() < static_cast<size_t>(kMaxRanks),
                "[schedule.csv] line ", line_no, ": more than ", kMaxRanks,
                " rows; a schedule has one row per rank and at "
                "most ",
                kMaxRanks, " ranks");
    BATON_CHECK(!trim(line).empty(), "[schedule.csv] line ", line_no,
                " is empty: each line holds the actions of one rank (this one would be rank ",
                rows.schedule.actions.size(), ")");
    RowReader row(rows, line_no, total);
    size_t column = 0, start = 0;
    while (start <= line.size()) {
      const size_t comma = std::min(line.find(',', start), line.size());
      row.read_field(line.substr(start, comma - start), ++column);
      start = comma + 1;
    }
    row.finish();
    const auto& list = rows.schedule.actions.back();
    BATON_CHECK(
        std::any_of(list.begin(), list.end(), [](const Action& a) { return is_compute(a.kind); }),
        "[schedule.csv] line ", line_no, " (rank ", rows.schedule.actions.size() - 1,
        ") has no F, B, I or W: every rank runs at least one stage");
  }
  rows.schedule.ranks = static_cast<int>(rows.schedule.actions.size());
  infer_shape(rows.schedule, total);
  return rows;
}

// One line: the rule, then where its marked actions are in the file.
[[noreturn]] void fail_located(const ValidationError& e, const Rows& rows) {
  std::string located;
  size_t n = 0;
  for (const auto& [rank, index] : e.marks()) {
    if (rank < 0 || index >= rows.columns[rank].size()) continue;
    if (n++ == kLocatedMarks) break;
    located += ::baton::detail::concat(located.empty() ? "" : "; ", "line ", rank + 1, " (rank ",
                                       rank, "), column ", rows.columns[rank][index], ": ",
                                       to_string(rows.schedule.actions[rank][index]));
  }
  throw Error("[schedule.csv] " + e.rule() + (located.empty() ? "" : " [at " + located + "]"));
}

}  // namespace

std::string_view to_string(CsvFormat format) {
  return format == CsvFormat::ComputeOnly ? "compute_only" : "compute_comms";
}

CsvFormat parse_csv_format(std::string_view text) {
  if (text == "compute_only") return CsvFormat::ComputeOnly;
  if (text == "compute_comms") return CsvFormat::ComputeComms;
  BATON_CHECK(false, "[schedule.csv] unknown CSV format \"", printable(text),
              "\" (expected compute_only or compute_comms)");
  return CsvFormat::ComputeOnly;
}

std::string format_csv(const Schedule& schedule, CsvFormat format) {
  BATON_CHECK(!schedule.carries, "[schedule.csv] schedule \"", schedule.name,
              "\" has no flush between steps (its backwards carry into the next step); "
              "PyTorch's schedule CSV describes one flushed step, so it cannot be written as one");
  BATON_CHECK(schedule.skips.empty(), "[schedule.csv] schedule \"", schedule.name, "\" has ",
              schedule.skips.size(),
              " skip connections across stages, which PyTorch's schedule CSV cannot describe; "
              "write baton's text format");
  const bool comms = format == CsvFormat::ComputeComms;
  const Schedule lowered = comms && !schedule.has_communication() ? lower(schedule) : Schedule{};
  const Schedule& source = comms && !schedule.has_communication() ? lowered : schedule;
  std::string out;
  for (const auto& list : source.actions) {
    // Sends in order, whether each has its wait yet, and the forward sends
    // whose local backward has not run.
    std::vector<Action> sends;
    std::vector<bool> waited;
    std::unordered_map<uint64_t, size_t> forward_sends;
    // A stage reduced in one bucket is written as PyTorch does, "1REDUCE_GRAD".
    std::unordered_map<int, int> buckets;
    for (const Action& a : list)
      if (a.kind == ActionKind::REDUCE_GRAD) ++buckets[a.stage];
    bool first = true;
    auto write = [&](const Action& a, std::string_view kind) {
      out += first ? "" : ",";
      if (a.kind == ActionKind::REDUCE_GRAD && buckets[a.stage] == 1 && a.microbatch == 0) {
        out += std::to_string(a.stage) + "REDUCE_GRAD";
      } else {
        out += kind.empty()
                   ? to_string(a)
                   : std::to_string(a.stage) + std::string(kind) + std::to_string(a.microbatch);
      }
      first = false;
    };
    for (const Action& a : list) {
      // PyTorch has no action for tied copies (its pipelining syncs them outside the
      // schedule) nor for the norm clip (torch.nn.utils.clip_grad_norm_ runs after the step).
      if (a.kind == ActionKind::REDUCE_TIED || a.kind == ActionKind::CLIP_NORM) continue;
      if (!comms && !is_compute(a.kind) && !is_step_action(a.kind)) continue;
      write(a, "");
      if (!comms) continue;
      if (a.kind == ActionKind::SEND_F || a.kind == ActionKind::SEND_B) {
        if (a.kind == ActionKind::SEND_F)
          forward_sends[key(a.kind, a.stage, a.microbatch)] = sends.size();
        sends.push_back(a);
        waited.push_back(false);
      }
      if (!is_input_backward(a.kind)) continue;
      const auto it = forward_sends.find(key(ActionKind::SEND_F, a.stage, a.microbatch));
      if (it == forward_sends.end()) continue;
      write(sends[it->second], "WAIT_SEND_F");
      waited[it->second] = true;
      forward_sends.erase(it);
    }
    for (size_t i = 0; i < sends.size(); ++i) {
      if (!waited[i])
        write(sends[i], sends[i].kind == ActionKind::SEND_F ? "WAIT_SEND_F" : "WAIT_SEND_B");
    }
    out += "\n";
  }
  return out;
}

Schedule parse_csv_schedule(std::string_view text, std::string name) {
  Rows rows = read_rows(text);
  rows.schedule.name = std::move(name);
  try {
    validate(rows.schedule);
  } catch (const ValidationError& e) {
    fail_located(e, rows);
  } catch (const Error& e) {
    const std::string what = e.what();
    throw Error("[schedule.csv] " + what.substr(0, what.find('\n')));
  }
  return rows.schedule.has_communication() ? rows.schedule : lower(rows.schedule);
}

}  // namespace baton::schedule
