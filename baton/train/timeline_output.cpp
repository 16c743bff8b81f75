#include "baton/train/timeline_output.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "baton/core/output_files.h"
#include "baton/trace/writers.h"
#include "baton/train/compare_sim.h"
#include "baton/train/timeline_gather.h"

namespace baton::train {

trace::Timeline gather_step_timeline(const TrainConfig& c, const Pipeline& pipeline) {
  const runtime::StepResult& last = pipeline.last_step();
  return gather_timeline(pipeline.communicator(), last.events, last.start_ms, pipeline.rank(),
                         pipeline.world_size(),
                         pipeline.schedule().name + " p=" + std::to_string(c.pp) +
                             " m=" + std::to_string(c.microbatches) + " (measured)");
}

void write_timelines(const TrainConfig& c, const Pipeline& pipeline, const comm::P2pCost& link,
                     const std::vector<trace::Timeline>& earlier,
                     const ComparedActivations& activations) {
  const schedule::Schedule& lowered = pipeline.schedule();
  const runtime::StepResult& last = pipeline.last_step();
  comm::Communicator& comm = pipeline.communicator();
  const trace::Timeline timeline = gather_step_timeline(c, pipeline);
  std::map<int, double> stage_bytes =
      gather_stage_bytes(comm, last.stage_activation_bytes, lowered.stages);
  const bool kept = !activations.stage_kept.empty();
  if (kept) {
    for (int s = 0; s < lowered.stages; ++s) stage_bytes[s] = activations.stage_kept.at(s);
  }
  const std::map<int, double> boundary_bytes =
      gather_stage_bytes(comm, last.stage_boundary_bytes, lowered.stages);
  const std::map<int, double> skip_bytes =
      lowered.skips.empty()
          ? std::map<int, double>{}
          : gather_stage_bytes(comm, last.skip_bytes, static_cast<int>(lowered.skips.size()));
  // The dp all-reduce's cost, probed now (collective over each dp group)
  // with the largest bucket, for the simulator to charge REDUCE_GRAD.
  DataParallelCosts dp;
  const comm::RankLayout& layout = pipeline.layout();
  if (c.compare_sim && layout.grid.dp() > 1) {
    dp.dp = layout.grid.dp();
    dp.world_per_pipeline_rank = layout.grid.dp() * layout.grid.tp();
    dp.bucket_bytes = pipeline.gradient_bucket_bytes();
    double largest = 0;
    for (const auto& buckets : dp.bucket_bytes)
      for (double bytes : buckets) largest = std::max(largest, bytes);
    dp.link = comm::measure_allreduce_cost(*layout.dp, largest);
  }
  if (pipeline.rank() != 0) return;
  if (!c.trace.empty()) trace::write_file(c.trace, trace::to_chrome_trace(timeline));
  if (!c.svg.empty()) trace::write_file(c.svg, trace::to_svg(timeline));
  if (c.compare_sim) {
    const PeakActivations peak{kept ? activations.measured : last.peak_activation_bytes, 0, kept};
    compare_with_simulation(lowered, timeline, stage_bytes, boundary_bytes, link, peak,
                            dp.dp > 1 ? &dp : nullptr, skip_bytes, earlier);
  }
  flush_stdout("[train]");
}

}  // namespace baton::train
