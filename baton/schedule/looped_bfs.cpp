#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule looped_bfs(const GeneratorOptions&) {
  BATON_CHECK(false, "[schedule.looped-bfs] not built yet");
  return {};
}

}  // namespace baton::schedule
