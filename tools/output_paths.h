// The files a command writes (--svg, --trace): checked before any work, so that
// one bad path fails the command before it writes anything, and written after,
// so that a failed write leaves no partial file behind.
#pragma once

#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::cli {

// A path given with the flag that named it, for messages.
struct NamedPath {
  std::string flag;  // "--svg"
  std::string path;
};

// A write that failed after the paths were checked (a full disk, a closed
// standard output): a failure while running, exit code 1, not bad input.
class WriteError : public Error {
 public:
  using Error::Error;
};

// Throws baton::Error (one line) when two outputs name the same file (after
// resolving ".", ".." and symbolic links) or an output names an input, or an
// output cannot be written: its folder is missing, it is a folder, or it
// cannot be created or opened. Creates nothing: a probe file made to test
// creation is removed again.
void check_output_paths(const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs);

// Writes `text` to `output.path`; throws WriteError naming the flag and path,
// after removing what it wrote, if the write fails.
void write_output(const NamedPath& output, const std::string& text);

// Flushes std::cout; throws WriteError if anything written to it was lost.
void flush_stdout();

// Throws WriteError if standard output is closed (file descriptor 1 is not
// open), before the command opens files that would take its place.
void check_stdout_open();

}  // namespace baton::cli
