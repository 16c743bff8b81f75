// A schedule file made ready to run: what `baton simulate --schedule-file`,
// `baton train --schedule-file` and PipelineOptions::schedule_file read.
#pragma once

#include <string>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// load_schedule_file(path), lowered when it holds compute actions only, and
// validated. Throws baton::Error naming the path (a missing or malformed
// file, an invalid schedule).
Schedule load_runnable_schedule(const std::string& path);

}  // namespace baton::schedule
