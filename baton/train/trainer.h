// `baton train`'s loop: a config -> the model zoo's ModelSpec and a data
// source -> a baton::Pipeline (which wires communicator, schedule, partition,
// stages and executor) -> steps with the configured optimizer, with progress
// and metrics (progress.h, memory_report.h), the lr schedule (optimizer.h),
// test accuracy (evaluate.h) and the measured timeline (timeline_output.h).
#pragma once

#include <string>

#include "baton/nn/layer_spec.h"
#include "baton/train/config.h"

namespace baton::train {

// Who this process is among the ranks of the job.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Checks what can be checked before any rank starts, so bad input fails once
// with one line: the schedule is defined for (pp, microbatches, virtual), the
// model exists, it has at least as many layers as stages, a hand-written
// --balance fits, the data is there, the output files can be written (each its
// own), and the parameters fit in this machine's memory.
void check_setup(const TrainConfig& config);

// The model zoo's ModelSpec for the config's model flags.
nn::ModelSpec model_spec(const TrainConfig& config);

// Runs the whole training on this rank. Rank 0 prints progress and writes the
// metrics, trace and SVG. Throws baton::Error for bad input and for failures
// of peers (naming the rank, stage and action that waited).
void train(const TrainConfig& config, const RankContext& context);

}  // namespace baton::train
