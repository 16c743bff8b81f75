// Input files named on the command line (--text, --profile, the data files):
// read whole, but only when they are regular files of bounded size, so that a
// folder or a device such as /dev/zero is refused by name instead of read
// without end. Shared by `baton plan` and `train`; torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace baton {

// What is at `path` (following symbolic links), for messages: "a folder",
// "a character device", "a block device", "a FIFO", "a socket", "missing",
// or "" for a regular file.
std::string file_kind(const std::string& path);

// The whole regular file at `path`. `what` starts every message, e.g.
// "[plan] --profile" or "[data.text] the text corpus"; `hint` ends those about
// the kind of file, e.g. "; name a text file". Throws baton::Error (one line,
// the path made printable) when the path does not exist, is not a regular
// file, holds more than `max_bytes` bytes, or cannot be read.
std::string read_input_file(const std::string& what, const std::string& path, uint64_t max_bytes,
                            const std::string& hint = "");

// "1 GiB", "64 MiB", "512 bytes": a limit in messages.
std::string format_byte_limit(uint64_t bytes);

}  // namespace baton
