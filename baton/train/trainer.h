// `baton train`'s loop: a config -> the model zoo's ModelSpec and a data
// source -> a baton::Pipeline (which wires communicator, schedule, partition,
// stages and executor) -> steps with the configured optimizer, with progress
// and metrics (progress.h, memory_report.h), the lr schedule (optimizer.h),
// test accuracy (evaluate.h) and the measured timeline (timeline_output.h).
#pragma once

#include <string>

#include "baton/comm/rank_env.h"
#include "baton/core/error.h"
#include "baton/nn/layer_spec.h"
#include "baton/train/config.h"

namespace baton::train {

// Checks what can be checked before any rank starts, so bad input fails once
// with one line: the schedule is defined for (pp, microbatches, virtual), the
// model exists, it has at least as many layers as stages, a hand-written
// --balance fits, the data is there, the output files can be written (each its
// own), and the parameters fit in this machine's memory. `check_outputs`
// false leaves the output files to another process: the ranks of one job
// would race trying the same paths, so only rank 0 tries them.
void check_setup(const TrainConfig& config, bool check_outputs = true);

// --max-memory-gb before any rank starts (baton train's launcher): the
// layers measured in this process, each rank's predicted peak as `baton
// simulate --profile` predicts it (plan::profiled_rank_memory: the ranks'
// own prediction less the data batch, so a lower bound of it), and one line
// refusing the layout when a rank exceeds the cap. Only where that
// prediction holds: whole layers (tp = 1) on any dp and ZeRO level, a cut
// the plan knows without measuring costs (uniform, or layer counts), any
// recomputation, on the CPU; elsewhere, and for what the data batch adds,
// the ranks check their own prediction before the first step.
void check_memory_cap_before_start(const TrainConfig& config);

// The model zoo's ModelSpec for the config's model flags.
nn::ModelSpec model_spec(const TrainConfig& config);

// Runs the whole training as the rank `env` describes (from the launcher or
// torchrun, unchanged; a default RankEnv: one process alone). Rank 0 prints progress and writes the
// metrics, trace and SVG. Throws baton::Error for bad input and for failures
// of peers (naming the rank, stage and action that waited).
void train(const TrainConfig& config, const comm::RankEnv& env);

// Bad input a rank finds before its first step that no check before the ranks
// could (a layout predicted above --max-memory-gb): the rank exits 2, as for
// check_setup's, and no launcher restarts it. Rank 0 carries the message;
// the others an empty one.
class RefusedBeforeFirstStep : public Error {
 public:
  using Error::Error;
};

}  // namespace baton::train
