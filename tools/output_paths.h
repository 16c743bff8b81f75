// The files a command writes (--svg, --trace): checked before any work by
// baton/core/output_files.h, and written after, so that a failed write leaves
// no partial file behind.
#pragma once

#include <string>

#include "baton/core/output_files.h"

namespace baton::cli {

// Writes `text` to `output.path`; throws WriteError starting with `where`
// (e.g. "[simulate]") and naming the flag and path, after removing what it
// wrote, if the write fails.
void write_output(const std::string& where, const NamedPath& output, const std::string& text);

}  // namespace baton::cli
