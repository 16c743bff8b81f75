// Reading the ranks' error lines to tell which rank a failed job waited on.
// When one rank stops (SIGSTOP, a hung kernel, a swapped-out host), the others
// time out waiting for it; the rank that exits first is rarely the culprit.
// Each rank's [comm] error names the peer it waited for ("... RECV_F from
// rank 2", "peer rank 2 closed the connection"), so the rank most of them
// blame, or else the one that never reported, is the one that stopped.
#pragma once

#include <string>
#include <vector>

namespace baton::comm {

// The ranks an error line says this rank waited for: "from rank 2",
// "to rank 2", "peer rank 2", "from ranks 1, 3". Empty when it names none
// (a collective, or a line that is no wait at all).
std::vector<int> ranks_waited_for(const std::string& line);

// True when the line reports a wait that ran out of time or lost its peer:
// the failure of a rank that was waiting on another, not its own fault.
bool is_wait_failure(const std::string& line);

// What the launcher knows of one rank when it names the culprit.
struct RankReport {
  int rank = 0;
  bool exited = false;                   // false: still running (or stopped)
  std::vector<std::string> error_lines;  // its stderr lines, oldest first
};

// The rank(s) the others waited for: among the ranks named by wait failures,
// those that did not fail waiting themselves (the end of a chain of waits:
// 0 waits on 1, which waits on 2), the one named most often; without any
// named, the ranks still running that reported no wait failure. Empty when
// neither applies.
std::vector<int> stuck_ranks(const std::vector<RankReport>& reports);

// The ranks whose error lines hold a wait failure, in rank order.
std::vector<int> waiting_ranks(const std::vector<RankReport>& reports);

// "rank 2 stopped responding (ranks 0, 1, 3 timed out waiting for it)", or
// empty when stuck_ranks finds no one.
std::string describe_stuck_ranks(const std::vector<RankReport>& reports);

}  // namespace baton::comm
