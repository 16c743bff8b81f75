#include "baton/comm/blame.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace baton::comm {
namespace {

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// Reads "N" or "N, M, ..." at `pos`, as many integers as are listed.
std::vector<int> read_rank_list(const std::string& text, size_t pos) {
  std::vector<int> ranks;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    size_t end = pos;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end - pos > 7) break;
    ranks.push_back(std::stoi(text.substr(pos, end - pos)));
    if (text.compare(end, 2, ", ") != 0) break;
    pos = end + 2;
  }
  return ranks;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  return text;
}

// The first wait failure among a rank's lines: the one that ended it.
const std::string* first_wait_failure(const RankReport& report) {
  for (const std::string& line : report.error_lines) {
    if (is_wait_failure(line)) return &line;
  }
  return nullptr;
}

}  // namespace

std::vector<int> ranks_waited_for(const std::string& line) {
  std::vector<int> ranks;
  for (const char* marker : {"peer rank ", "from rank ", "to rank ", "from ranks ", "to ranks "}) {
    for (size_t pos = line.find(marker); pos != std::string::npos;
         pos = line.find(marker, pos + 1)) {
      for (int r : read_rank_list(line, pos + std::char_traits<char>::length(marker))) {
        if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
      }
    }
  }
  return ranks;
}

bool is_wait_failure(const std::string& line) {
  return contains(line, "timed out") || contains(line, "closed the connection");
}

std::vector<int> waiting_ranks(const std::vector<RankReport>& reports) {
  std::vector<int> ranks;
  for (const RankReport& report : reports) {
    if (first_wait_failure(report) != nullptr) ranks.push_back(report.rank);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

std::vector<int> stuck_ranks(const std::vector<RankReport>& reports) {
  std::map<int, int> votes;  // rank -> how many ranks waited for it
  for (const RankReport& report : reports) {
    const std::string* line = first_wait_failure(report);
    if (line == nullptr) continue;
    for (int r : ranks_waited_for(*line)) {
      if (r != report.rank) ++votes[r];
    }
  }
  // A blamed rank that itself waited on another is a link in a chain of waits
  // (0 waits on 1, which waits on 2): blame the end of the chain when one is.
  const std::vector<int> waiters = waiting_ranks(reports);
  auto waited = [&](int r) {
    return std::find(waiters.begin(), waiters.end(), r) != waiters.end();
  };
  bool any_end = false;
  for (const auto& [rank, count] : votes) any_end = any_end || !waited(rank);
  std::vector<int> stuck;
  int most = 0;
  for (const auto& [rank, count] : votes) {
    if (!any_end || !waited(rank)) most = std::max(most, count);
  }
  for (const auto& [rank, count] : votes) {
    if (count == most && (!any_end || !waited(rank))) stuck.push_back(rank);
  }
  if (!stuck.empty()) return stuck;
  // Only collectives timed out: whoever never reported is the one missing.
  for (const RankReport& report : reports) {
    if (!report.exited && first_wait_failure(report) == nullptr) stuck.push_back(report.rank);
  }
  return stuck;
}

std::string describe_stuck_ranks(const std::vector<RankReport>& reports) {
  const std::vector<int> stuck = stuck_ranks(reports);
  if (stuck.empty()) return "";
  std::vector<int> waiting;
  bool all_timed_out = true;
  for (const RankReport& report : reports) {
    const std::string* line = first_wait_failure(report);
    if (line == nullptr || std::find(stuck.begin(), stuck.end(), report.rank) != stuck.end()) {
      continue;
    }
    waiting.push_back(report.rank);
    all_timed_out = all_timed_out && contains(*line, "timed out");
  }
  std::sort(waiting.begin(), waiting.end());
  std::string text = rank_list(stuck) + " stopped responding";
  if (!waiting.empty()) {
    text += " (" + rank_list(waiting) + (all_timed_out ? " timed out" : " failed") +
            " waiting for " + (stuck.size() == 1 ? "it)" : "them)");
  }
  return text;
}

}  // namespace baton::comm
