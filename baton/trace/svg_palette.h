// Colours of the SVG Gantt chart, one per action kind: compute kinds in
// distinct hues (Tableau 10), communication in greys, the dp gradient
// reduction in purple; text colours chosen to
// read on their fill.
#pragma once

#include <array>

#include "baton/schedule/action.h"

namespace baton::trace::detail {

struct KindStyle {
  const char* fill;
  const char* text;
  const char* meaning;  // for the legend
};

inline const KindStyle& svg_style(schedule::ActionKind kind) {
  static const std::array<KindStyle, schedule::kActionKindCount> kStyles = {{
      {"#4e79a7", "#ffffff", "forward"},
      {"#e15759", "#ffffff", "backward"},
      {"#f28e2b", "#222222", "input-gradient backward"},
      {"#59a14f", "#ffffff", "weight-gradient backward"},
      {"#bab0ac", "#222222", "send activation"},
      {"#d7d2cf", "#222222", "receive activation"},
      {"#8c8580", "#ffffff", "send gradient"},
      {"#a59d98", "#222222", "receive gradient"},
      {"#b07aa1", "#ffffff", "gradient all-reduce (dp)"},
      {"#76b7b2", "#222222", "tied copies' gradient sum"},
      {"#edc948", "#222222", "global-norm clip"},
      {"#9c755f", "#ffffff", "gradient reduce-scatter (ZeRO-2/3)"},
      {"#ff9da7", "#222222", "parameter all-gather (ZeRO)"},
      {"#79706e", "#ffffff", "parameters freed (ZeRO-3)"},
  }};
  return kStyles[static_cast<size_t>(kind)];
}

}  // namespace baton::trace::detail
