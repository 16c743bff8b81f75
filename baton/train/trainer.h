// `baton train`'s loop: a config -> the model zoo's ModelSpec and a data
// source -> a baton::Pipeline (which wires communicator, schedule, partition,
// stages and executor) -> steps with the configured optimizer, with progress
// and metrics (progress.h, memory_report.h), the lr schedule (optimizer.h),
// test accuracy (evaluate.h) and the measured timeline (timeline_output.h).
#pragma once

#include <string>

#include "baton/comm/rank_env.h"
#include "baton/nn/layer_spec.h"
#include "baton/train/config.h"

namespace baton::train {

// Who this process is among the ranks of the job: the fields of a
// comm::RankEnv, which from_env() and rank_env() carry over unchanged.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int local_rank = 0;  // this process's index on its machine: its GPU under --device cuda

  static RankContext from_env(const comm::RankEnv& env) {
    return RankContext{env.rank,        env.world_size,  env.local_world_size,
                       env.master_addr, env.master_port, env.local_rank};
  }
  comm::RankEnv rank_env() const {
    comm::RankEnv env;
    env.rank = rank;
    env.world_size = world_size;
    env.local_rank = local_rank;
    env.local_world_size = local_world_size;
    env.master_addr = master_addr;
    env.master_port = master_port;
    return env;
  }
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
