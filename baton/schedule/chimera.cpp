#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule chimera(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.chimera] not built yet");
  return {};
}

}  // namespace baton::schedule
