#include "baton/partition/balance.h"

namespace baton::partition {

Partition uniform(int layers, int stages) {
  detail::check_shape(layers, stages);
  const int base = layers / stages;
  const int extra = layers % stages;
  std::vector<int> counts(stages, base);
  for (int s = 0; s < extra; ++s) ++counts[s];
  return Partition(std::move(counts));
}

}  // namespace baton::partition
