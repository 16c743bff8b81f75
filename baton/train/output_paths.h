// The files `baton train` writes (--metrics, --trace, --svg, --profile-out), checked before
// any rank starts, so a bad path fails at once with one line instead of on
// rank 0 after the whole run.
#pragma once

#include "baton/train/config.h"

namespace baton::train {

// Throws baton::Error naming the flag and the path when an output path is a
// folder, its folder does not exist, it cannot be created or opened for
// writing (tried, as baton/core/output_files.h does), or two outputs, or an
// output and the --schedule-file or --text input, name the same file.
// Creates nothing.
void check_output_paths(const TrainConfig& config);

}  // namespace baton::train
