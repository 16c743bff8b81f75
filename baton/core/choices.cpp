#include "baton/core/choices.h"

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

}  // namespace baton
