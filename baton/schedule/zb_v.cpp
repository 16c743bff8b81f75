#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule zb_v(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.zb-v] not built yet");
  return {};
}

}  // namespace baton::schedule
