#include "baton/core/choices.h"

#include <algorithm>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/expected_list.h"
#include "baton/core/printable.h"

namespace baton {

namespace {

// "fp32, bf16 or fp16": the names of `E`'s values, for messages.
template <typename E>
std::string names_of() {
  std::vector<std::string> names;
  for (const E value : ChoiceValues<E>::kAll) names.emplace_back(to_string(value));
  return expected_list(names);
}

// The value of `E` named `text`, or throws "<tag> unknown <what> \"text\"
// (expected ...)".
template <typename E>
E parse_named(std::string_view text, const char* tag, const char* what) {
  if (const std::optional<E> value = choice_named<E>(text)) return *value;
  throw Error(detail::concat(tag, " unknown ", what, " \"", printable(text), "\" (expected ",
                             names_of<E>(), ")"));
}

}  // namespace

Precision parse_precision(std::string_view text) {
  return parse_named<Precision>(text, "[runtime.precision]", "precision");
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
  return parse_named<Recompute>(text, "[runtime.recompute]", "recompute mode");
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

Optimizer parse_optimizer(std::string_view text) {
  return parse_named<Optimizer>(text, "[train.config]", "optimizer");
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
  return parse_named<LrSchedule>(text, "[train.config]", "learning-rate schedule");
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
  return parse_named<TransportKind>(text, "[comm]", "transport");
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
