// What `baton train` writes (--metrics, --trace, --svg, --profile-out, the
// --save folder), checked before any rank starts against what it reads
// (--config, --text, --schedule-file, --data-dir, --resume), so that a bad
// path fails at once with one line and no output ever overwrites an input.
#pragma once

#include "baton/train/config.h"

namespace baton::train {

// Throws baton::Error naming the flags and the paths when an output file
// cannot be written, or an output is the same file as an input or another
// output, or lies inside the --data-dir, --resume or --save folder, or the
// --save folder holds an input (baton/core/output_files.h). --resume may be
// the --save folder or a step folder inside it (a run that continues where
// it saves). Creates nothing.
void check_output_paths(const TrainConfig& config);

}  // namespace baton::train
