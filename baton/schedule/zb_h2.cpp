#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule zb_h2(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.zb-h2] not built yet");
  return {};
}

}  // namespace baton::schedule
