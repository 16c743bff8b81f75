#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule interleaved(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.interleaved] not built yet");
  return {};
}

}  // namespace baton::schedule
