// The files a command writes (the CLI's --svg, --trace, train's --metrics) and
// its standard output: paths checked before any work, so that one bad path
// fails the command before it writes anything, and write errors reported,
// never ignored. Shared by `baton simulate`, `plan` and `train`.
#pragma once

#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton {

// A path given with the flag that named it, for messages. A folder is
// taken whole: nothing else may lie inside it (an input folder such as
// --data-dir or --resume, an output folder such as --save).
struct NamedPath {
  std::string flag;  // "--svg"
  std::string path;
  bool folder = false;
};

// A write that failed after the paths were checked (a full disk, a closed
// standard output): a failure while running, exit code 1, not bad input.
class WriteError : public Error {
 public:
  using Error::Error;
};

// `where` starts every message below, e.g. "[simulate]".

// Throws baton::Error (one line) when an output is the same file as an
// input or another output, lies inside an input or output folder, or (an
// output folder) holds an input or another output; or when an output file
// cannot be written: its folder is missing, it is a folder, or it cannot be
// created or opened for writing (tried, not guessed from permissions, which
// root passes even for /proc). Paths are compared by identity: by device
// and inode where they exist (so a hard link is caught), else by the path
// with ".", ".." and symbolic links resolved. Creates nothing: a probe file
// made to test creation is removed again; output folders are only compared
// (their owner checks them). An empty output path is refused ("needs a file
// name": pass only the outputs given); empty inputs are skipped.
void check_output_paths(const std::string& where, const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs = {});

// True when `path` is the folder `folder` or lies inside it, by identity
// as check_output_paths compares.
bool path_within(const std::string& path, const std::string& folder);

// Flushes std::cout and C's stdout; throws WriteError if anything written to
// either was lost, now or earlier (the stream's error state is sticky).
void flush_stdout(const std::string& where);

// Throws WriteError if standard output is closed (file descriptor 1 is not
// open), before the command opens files that would take its place.
void check_stdout_open(const std::string& where);

}  // namespace baton
