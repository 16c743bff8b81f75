#include "baton/train/timeline_gather.h"

#include <algorithm>

namespace baton::train {

trace::Timeline gather_timeline(comm::Communicator& comm, const std::vector<trace::Event>& events,
                                double start_ms, int rank, int world_size,
                                const std::string& title) {
  trace::Timeline timeline;
  timeline.title = title;
  timeline.time_unit = "ms";
  timeline.ranks = world_size;
  if (comm.world_size() == 1) {
    timeline.events = events;
    return timeline;
  }
  // Row 0: events per rank; row 1: each rank's step start.
  std::vector<torch::Tensor> counts{torch::zeros({2, world_size}, torch::kFloat64)};
  counts[0][0][rank] = static_cast<double>(events.size());
  counts[0][1][rank] = start_ms;
  comm.all_reduce_sum(counts, "the timeline gather (sizes)");
  const int64_t most = static_cast<int64_t>(counts[0][0].max().item<double>());
  const double first_start = counts[0][1].min().item<double>();
  // [rank, event, (stage, microbatch, kind, start, end)], zero elsewhere.
  std::vector<torch::Tensor> table{
      torch::zeros({world_size, std::max<int64_t>(most, 1), 5}, torch::kFloat64)};
  auto mine = table[0][rank];
  for (size_t i = 0; i < events.size(); ++i) {
    const trace::Event& e = events[i];
    mine[i][0] = e.stage;
    mine[i][1] = e.microbatch;
    mine[i][2] = static_cast<double>(e.kind);
    mine[i][3] = e.start;
    mine[i][4] = e.end;
  }
  comm.all_reduce_sum(table, "the timeline gather (events)");
  auto data = table[0].accessor<double, 3>();
  for (int r = 0; r < world_size; ++r) {
    const int64_t n = static_cast<int64_t>(counts[0][0][r].item<double>());
    const double shift = counts[0][1][r].item<double>() - first_start;
    for (int64_t i = 0; i < n; ++i) {
      timeline.events.push_back({r, static_cast<int>(data[r][i][0]),
                                 static_cast<int>(data[r][i][1]),
                                 static_cast<schedule::ActionKind>(static_cast<int>(data[r][i][2])),
                                 data[r][i][3] + shift, data[r][i][4] + shift});
    }
  }
  return timeline;
}

std::map<int, double> gather_stage_bytes(comm::Communicator& comm,
                                         const std::map<int, double>& local, int stages) {
  std::vector<torch::Tensor> t{torch::zeros({2, stages}, torch::kFloat64)};
  for (const auto& [s, bytes] : local) {
    t[0][0][s] = bytes;
    t[0][1][s] = 1;
  }
  comm.all_reduce_sum(t, "the activation bytes gather");
  std::map<int, double> out;
  for (int s = 0; s < stages; ++s) {
    const double n = t[0][1][s].item<double>();
    if (n > 0) out[s] = t[0][0][s].item<double>() / n;
  }
  return out;
}

}  // namespace baton::train
