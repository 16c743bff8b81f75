// What each rank holds in memory at the end of training, as the GPipe
// tutorial reports it per GPU: parameter, gradient, optimizer-state and peak
// activation bytes, and the process's peak resident memory.
#pragma once

#include <torch/optim/optimizer.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"

namespace baton::train {

struct RankMemory {
  int rank = 0;
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  double optimizer_bytes = 0;
  double peak_activation_bytes = 0;  // most stashed activation bytes at once, over all steps
  double peak_rss_bytes = 0;         // getrusage's ru_maxrss: the whole process
  // Weight versions held at once, at most (2 on the ranks of a schedule
  // without a flush that carry backwards; runtime/weight_versions.h): the
  // weights take weight_versions x parameter_bytes.
  int weight_versions = 1;
  // dp > 1 (else 0): the median step's gradient all-reduce time on this rank
  // and the part of it exposed past the rank's last compute
  // (runtime::StepResult::reduction_ms, exposed_reduction_ms).
  double reduction_ms = 0;
  double exposed_reduction_ms = 0;
};

// This rank's figures: its parameters and their gradients, the optimizer's
// state, and `peak_activation_bytes` and `weight_versions` as the runtime
// measured them.
RankMemory measure_memory(int rank, const std::vector<torch::Tensor>& parameters,
                          torch::optim::Optimizer& optimizer, double peak_activation_bytes,
                          int weight_versions = 1);

// Collective: every rank's figures, by rank.
std::vector<RankMemory> gather_memory(comm::Communicator& comm, const RankMemory& local);

// "rank 0: parameters 270.34 kB, gradients 270.34 kB, optimizer 540.67 kB,
// peak activations 1.20 MB, peak RSS 310.42 MB" (decimal units; with more
// than one weight version, ", weight versions 2" after the parameters; with
// all-reduces, ", all-reduce 12.30 ms a step (exposed 4.50 ms)" at the end)
std::string format_memory(const RankMemory& memory);
nlohmann::json to_json(const RankMemory& memory);

}  // namespace baton::train
