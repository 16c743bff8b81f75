#include "baton/core/choices.h"

#include <algorithm>
#include <string>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton {

std::optional<Precision> precision_named(std::string_view text) {
  for (const Precision p : {Precision::Fp32, Precision::Bf16, Precision::Fp16})
    if (text == to_string(p)) return p;
  return std::nullopt;
}

Precision parse_precision(std::string_view text) {
  if (const std::optional<Precision> p = precision_named(text)) return *p;
  throw Error(detail::concat("[runtime.precision] unknown precision \"", printable(text),
                             "\" (expected fp32, bf16 or fp16)"));
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp16:
      return "fp16";
    case Precision::Fp32:
      break;
  }
  return "fp32";
}

Recompute parse_recompute(std::string_view text) {
  if (text == "never") return Recompute::Never;
  if (text == "except_last" || text == "except-last") return Recompute::ExceptLast;
  if (text == "always") return Recompute::Always;
  if (text == "selective") return Recompute::Selective;
  throw Error(detail::concat("[runtime.recompute] unknown recompute mode \"", printable(text),
                             "\" (expected never, except_last, always or selective)"));
}

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::Never:
      return "never";
    case Recompute::ExceptLast:
      return "except_last";
    case Recompute::Always:
      return "always";
    case Recompute::Selective:
      return "selective";
  }
  return "never";
}

namespace {

// The value of `E` whose to_string is `text`, or throws naming `what` and the
// accepted names.
template <typename E, size_t N>
E parse_named(std::string_view text, const E (&values)[N], const char* what) {
  std::string known;
  for (const E value : values) {
    if (text == to_string(value)) return value;
    known += (known.empty() ? "" : ", ") + std::string(to_string(value));
  }
  throw Error(detail::concat("[train.config] unknown ", what, " \"", printable(text),
                             "\" (expected ", known, ")"));
}

}  // namespace

Optimizer parse_optimizer(std::string_view text) {
  static const Optimizer kAll[] = {Optimizer::Sgd, Optimizer::Adam, Optimizer::AdamW};
  return parse_named(text, kAll, "optimizer");
}

std::string_view to_string(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::Sgd:
      return "sgd";
    case Optimizer::AdamW:
      return "adamw";
    case Optimizer::Adam:
      break;
  }
  return "adam";
}

LrSchedule parse_lr_schedule(std::string_view text) {
  static const LrSchedule kAll[] = {LrSchedule::Constant, LrSchedule::Cosine};
  return parse_named(text, kAll, "learning-rate schedule");
}

std::string_view to_string(LrSchedule schedule) {
  return schedule == LrSchedule::Cosine ? "cosine" : "constant";
}

DeviceKind parse_device(std::string_view text) {
  constexpr std::string_view kIndexed = "cuda:";
  if (text.substr(0, kIndexed.size()) == kIndexed) {
    const std::string_view index = text.substr(kIndexed.size());
    const bool digits =
        !index.empty() && index.size() <= 4 &&
        std::all_of(index.begin(), index.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if (digits) return DeviceKind::Cuda;
  }
  if (text == "cpu") return DeviceKind::Cpu;
  if (text == "cuda") return DeviceKind::Cuda;
  throw Error(detail::concat("[train.config] unknown device \"", printable(text),
                             "\" (expected cpu, cuda, or cuda:N for GPU N)"));
}

TransportKind parse_transport(std::string_view text) {
  if (text == "auto") return TransportKind::kAuto;
  if (text == "shm") return TransportKind::kShm;
  if (text == "gloo") return TransportKind::kGloo;
  throw Error(
      detail::concat("[comm] unknown transport \"", text, "\" (expected auto, shm or gloo)"));
}

std::string_view to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::kShm:
      return "shm";
    case TransportKind::kGloo:
      return "gloo";
    case TransportKind::kAuto:
      break;
  }
  return "auto";
}

std::string_view to_string(DeviceKind device) {
  return device == DeviceKind::Cuda ? "cuda" : "cpu";
}

}  // namespace baton
