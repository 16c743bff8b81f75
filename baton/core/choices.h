// The choices of a run, each parsed from its text in one place: the compute
// precision, the recomputation mode, the optimizer, the learning-rate
// schedule, the point-to-point transport and the device kind.
// Torch-free, so the options table, the TOML reader and the planner parse
// with the runtime's own parser (runtime/precision.h and runtime/executor.h
// use these enums).
#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

namespace baton {

// Each closed choice's values, in the order messages list them
// (`ChoiceValues<Precision>::kAll`). The parsers below and the options table
// (train/options.h) take the names from these lists and nowhere else.
template <typename E>
struct ChoiceValues;

// The layers' compute dtype, with fp32 weights (runtime/precision.h).
enum class Precision { Fp32, Bf16, Fp16 };
template <>
struct ChoiceValues<Precision> {
  static constexpr Precision kAll[] = {Precision::Fp32, Precision::Bf16, Precision::Fp16};
};

// "fp32", "bf16", "fp16"; throws baton::Error naming the value otherwise.
Precision parse_precision(std::string_view text);
std::string_view to_string(Precision precision);

// Activation recomputation (torchgpipe's "checkpoint" modes; named Recompute
// here so that "checkpoint" means saved training state): which micro-batches
// keep only their stage input in the forward and recompute the forward right
// before their backward. Selective: every micro-batch keeps its tensors but
// those of the layers' marked regions (nn/recompute_region.h), which run
// again in the backward.
enum class Recompute { Never, ExceptLast, Always, Selective };
template <>
struct ChoiceValues<Recompute> {
  static constexpr Recompute kAll[] = {Recompute::Never, Recompute::ExceptLast, Recompute::Always,
                                       Recompute::Selective};
};

// "never", "except_last" (also "except-last"), "always", "selective"; throws otherwise.
Recompute parse_recompute(std::string_view text);
std::string_view to_string(Recompute recompute);

// The optimizer (train/optimizer.h): SGD without momentum, Adam, AdamW.
enum class Optimizer { Sgd, Adam, AdamW };
template <>
struct ChoiceValues<Optimizer> {
  static constexpr Optimizer kAll[] = {Optimizer::Sgd, Optimizer::Adam, Optimizer::AdamW};
};
// "sgd", "adam", "adamw"; throws baton::Error otherwise.
Optimizer parse_optimizer(std::string_view text);
std::string_view to_string(Optimizer optimizer);

// The learning-rate schedule after the warm-up: constant, or cosine to 0.
enum class LrSchedule { Constant, Cosine };
template <>
struct ChoiceValues<LrSchedule> {
  static constexpr LrSchedule kAll[] = {LrSchedule::Constant, LrSchedule::Cosine};
};
// "constant", "cosine"; throws baton::Error otherwise.
LrSchedule parse_lr_schedule(std::string_view text);
std::string_view to_string(LrSchedule schedule);

// Where the stages run (torch::Device's type): "cuda" puts each rank on the
// GPU of its local rank, "cuda:N" every rank of the machine on GPU N.
enum class DeviceKind { Cpu, Cuda };
// "cpu", "cuda", "cuda:N" (N up to 4 digits); throws baton::Error otherwise.
DeviceKind parse_device(std::string_view text);
std::string_view to_string(DeviceKind device);

// How point-to-point tensors reach a peer (comm/communicator.h). kAuto:
// shared memory for ranks on this host, Gloo over TCP for the others. kShm
// insists on shared memory (connect fails naming a rank on another host);
// kGloo never uses it. Collectives always go over Gloo (or NCCL).
enum class TransportKind { kAuto, kShm, kGloo };
template <>
struct ChoiceValues<TransportKind> {
  static constexpr TransportKind kAll[] = {TransportKind::kAuto, TransportKind::kShm,
                                           TransportKind::kGloo};
};
// "auto", "shm", "gloo"; throws baton::Error naming the text otherwise.
TransportKind parse_transport(std::string_view text);
std::string_view to_string(TransportKind kind);

// The value of `E` named `text` (its to_string, or recompute's older
// spelling "except-last"), empty for any other text: for callers with their
// own message.
template <typename E>
std::optional<E> choice_named(std::string_view text) {
  for (const E value : ChoiceValues<E>::kAll) {
    if (text == to_string(value)) return value;
  }
  if constexpr (std::is_same_v<E, Recompute>) {
    if (text == "except-last") return Recompute::ExceptLast;
  }
  return std::nullopt;
}

}  // namespace baton
