// What a baton::Pipeline holds, shared by the files that implement it
// (pipeline.cpp: building and stepping; pipeline_checkpoint.cpp: save and
// load). Not part of the API.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "baton/comm/rank_layout.h"
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
  comm::RankLayout layout;  // the grid, this rank's place in it, its groups
  torch::Device device = torch::kCPU;
  schedule::Schedule schedule;  // with its reductions
  partition::Partition partition;
  std::vector<std::vector<double>> bucket_bytes;  // per stage, with dp > 1
  std::unique_ptr<runtime::Executor> executor;
  runtime::StepResult last;
  int64_t steps = 0;
  // ZeRO (options.zero() > 0, dp > 1; the executor's runtime::ZeroShards):
  // the step count when the parameters were last gathered outside a step
  // (eval, save, named_parameters), -1 once ZeRO-3 freed them again.
  int64_t gathered_at = 0;
};

}  // namespace baton
