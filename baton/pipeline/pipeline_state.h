// What a baton::Pipeline holds, shared by the files that implement it
// (pipeline.cpp: building and stepping; pipeline_checkpoint.cpp: save and
// load). Not part of the API.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/nn/layer_spec.h"
#include "baton/partition/partition.h"
#include "baton/pipeline/pipeline.h"
#include "baton/pipeline/pipeline_options.h"
#include "baton/runtime/executor.h"
#include "baton/schedule/schedule.h"

namespace baton {

struct Pipeline::State {
  PipelineOptions options;
  nn::ModelSpec model;
  std::optional<comm::Communicator> owned;
  comm::Communicator* comm = nullptr;
  int rank = 0;  // in the world
  int world_size = 1;
  int dp = 1, pp = 1, tp = 1;
  int tp_rank = 0;        // this rank's index in its tensor-parallel group
  std::optional<comm::Communicator> tp_group;
  int pipeline_rank = 0;  // this rank's pp index: its rank in the schedule
  int dp_rank = 0;        // which replica of the pipeline
  std::vector<int> world_ranks;  // the world rank of each pipeline rank of this replica
  std::optional<comm::Communicator> dp_group;
  int local_rank = 0;  // this process's index on its machine: its GPU
  torch::Device device = torch::kCPU;
  schedule::Schedule schedule;
  partition::Partition partition;
  std::unique_ptr<runtime::Executor> executor;
  std::optional<std::vector<partition::LayerCost>> profiled;
  runtime::StepResult last;
  int64_t steps = 0;
  // ZeRO-1 (options.zero() == 1, dp > 1): the parameters this replica
  // steps, and the others, which it receives from their owners.
  bool zero = false;
  std::vector<torch::Tensor> zero_owned, zero_others;
  std::vector<bool> zero_owns;  // per executor parameter, in its order
  int64_t zero_gathered_at = 0;  // the step count at the last gather
};


}  // namespace baton
