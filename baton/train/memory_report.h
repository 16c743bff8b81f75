// What each rank holds in memory at the end of training, as the GPipe
// tutorial reports it per GPU: parameter, gradient, optimizer-state and peak
// activation bytes, and the process's peak resident memory.
#pragma once

#include <torch/optim/optimizer.h>

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"
#include "baton/comm/memory_counter.h"
#include "baton/sim/memory_model.h"
#include "baton/train/config.h"

namespace baton::train {

struct RankMemory {
  int rank = 0;
  double parameter_bytes = 0;
  double gradient_bytes = 0;
  double optimizer_bytes = 0;
  // The runtime's count of the stage inputs kept at once, at most over all
  // steps (runtime::StepResult::peak_activation_bytes): what autograd keeps
  // is far more; peak_activation_bytes() is the allocator's figure.
  double peak_stage_input_bytes = 0;
  double peak_rss_bytes = 0;  // getrusage's ru_maxrss: the whole process
  // Weight versions held at once, at most (2 on the ranks of a schedule
  // without a flush that carry backwards; runtime/weight_versions.h): the
  // weights take weight_versions x parameter_bytes.
  int weight_versions = 1;
  // dp > 1 (else 0): the median step's gradient all-reduce time on this rank
  // and the part of it exposed past the rank's last compute
  // (runtime::StepResult::reduction_ms, exposed_reduction_ms).
  double reduction_ms = 0;
  double exposed_reduction_ms = 0;
  // The counting allocator's figures (runtime/memory_counter.h), when it is
  // installed (0 otherwise): the most bytes held at once since the peak was
  // last reset (at steady state: from the run's third step), and by
  // category at that peak.
  double measured_peak_bytes = 0;
  std::array<double, comm::kMemoryCategories> measured = {};
  // The activation model's (sim/memory_model.h) peak for a steady-state
  // step, by the same categories (0 when not predicted).
  double predicted_peak_bytes = 0;
  std::array<double, comm::kMemoryCategories> predicted = {};
  // On a CUDA device the caching allocator measures instead of the counter
  // (comm/device_memory.h): measured_peak_bytes is its peak allocated bytes
  // (blocks of 512), `measured` stays zero (it keeps no categories), and
  // these are its peaks of the bytes asked for and of those reserved.
  bool measured_on_device = false;
  double measured_requested_peak_bytes = 0;
  double measured_reserved_peak_bytes = 0;

  // The activations at the rank's peak: the counting allocator's where it
  // measured, else (a GPU, no counter) the stage inputs kept.
  double peak_activation_bytes() const;
  // Which allocator measured: "cpu counter", "cuda caching allocator" or "none".
  const char* measured_by() const;
};

// What an optimizer keeps per parameter byte, and its step's temporaries
// beyond that, for an optimizer named as --optimizer names them.
double optimizer_state_per_parameter_byte(Optimizer optimizer);

// --max-memory-gb, collective: every rank's predicted peak against `cap_bytes`.
// Throws RefusedBeforeFirstStep (train/trainer.h), on every rank, when a rank's
// parameters alone or its predicted peak exceed it; rank 0's names the first
// such rank, its bytes and its largest part, the others' are empty.
void check_memory_cap(comm::Communicator& comm, int rank, const sim::MemoryPrediction& predicted,
                      double cap_gb);
// The one line refusing `all` ranks' predictions under `cap_gb`: the first
// rank whose parameters alone exceed it, or the rank with the highest peak
// and its largest part; "" when every rank fits.
std::string memory_cap_refusal(const std::vector<RankMemory>& all, double cap_gb);

// The prediction's figures into `memory`.
void set_prediction(RankMemory& memory, const sim::MemoryPrediction& prediction);

// This rank's figures: its parameters and their gradients, the optimizer's
// state, `peak_activation_bytes` and `weight_versions` as the runtime
// measured them (the allocator's peak: take_allocator_peak).
RankMemory measure_memory(int rank, const std::vector<torch::Tensor>& parameters,
                          torch::optim::Optimizer& optimizer, double peak_activation_bytes,
                          int weight_versions = 1);

// What the messages between a config's ranks hold, for the memory model
// (sim::StaticMemory's terms of the same names). Over shared memory (local
// ranks on the CPU) sends up to the inline size are copied out at once, and
// receives below the kept-buffer size live from arrival to their B; on a GPU
// every send is copied to the host (or taken by NCCL from the tensor its
// stage holds anyway) and every message is copied to the device when taken;
// over Gloo every message is held all step (0, 0).
struct MessageTerms {
  double sends_copied_up_to = 0;
  double receives_on_arrival_up_to = 0;
};
MessageTerms message_terms(const TrainConfig& config, torch::Device device);

// The allocator's peak so far into `memory`'s measured fields: the counting
// allocator's when it is installed, or on a CUDA `device` the caching
// allocator's. `baton train` takes it after the last step, before the test
// set is evaluated, so that the peak is the steps'.
void take_allocator_peak(RankMemory& memory, torch::Device device);
// `from`'s measured fields into `to`.
void copy_allocator_peak(RankMemory& to, const RankMemory& from);

// Collective: every rank's figures, by rank.
std::vector<RankMemory> gather_memory(comm::Communicator& comm, const RankMemory& local);

// "rank 0: parameters 270.34 kB, gradients 270.34 kB, optimizer 540.67 kB,
// peak activations 1.20 MB, peak RSS 310.42 MB" (decimal units; with more
// than one weight version, ", weight versions 2" after the parameters; with
// all-reduces, ", all-reduce 12.30 ms a step (exposed 4.50 ms)" at the end)
std::string format_memory(const RankMemory& memory);
// "rank 0: predicted peak 2.40 MB: parameters ..." (empty when not predicted).
std::string format_predicted_memory(const RankMemory& memory);
// "rank 0: allocator peak 2.31 MB: parameters 270.34 kB, gradients ..., other
// 1.00 kB" (empty when the counter measured nothing).
std::string format_measured_memory(const RankMemory& memory);
// The figures at rest as fields ("parameter_bytes", ...), and the allocator's
// as "measured_peak_bytes" and "measured": {category: bytes at the peak}.
nlohmann::json to_json(const RankMemory& memory);

}  // namespace baton::train
