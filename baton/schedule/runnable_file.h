// Superseded by runnable.h (lowered_schedule); kept while
// tools/torch/train_command.cpp reads a file's micro-batch count through it.
#pragma once

#include <string>

#include "baton/schedule/runnable.h"

namespace baton::schedule {

// lowered_schedule(ScheduleSource::from_file(path)).
inline Schedule load_runnable_schedule(const std::string& path) {
  return lowered_schedule(ScheduleSource::from_file(path));
}

}  // namespace baton::schedule
