#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule zb_h1(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.zb-h1] not built yet");
  return {};
}

}  // namespace baton::schedule
