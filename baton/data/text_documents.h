// The documents of text files, in order, for `baton data prepare`: a file
// whose name ends in .jsonl holds one per line in its "text" field (the input
// of Megatron-LM's tools/preprocess_data.py); any other file is one document,
// or one per line when `per_line`. Lines end at '\n' (a '\r' before it is
// dropped). Empty documents are skipped and counted. The files are
// memory-mapped, never read whole. Torch-free. Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/mapped_file.h"

namespace baton::data {

class DocumentReader {
 public:
  // Maps every input now, so that a missing input, a folder or a device is
  // refused (baton::Error, one line naming it) before anything is written.
  DocumentReader(const std::vector<std::string>& paths, bool per_line);

  // Sets `text` to the next non-empty document and returns true, or returns
  // false after the last; `text` stays valid until the next call. Throws
  // baton::Error naming the file and line when a .jsonl line is not a JSON
  // object with a string "text".
  bool next(std::string_view* text);
  // Back to the first document of the first file; the counts restart.
  void rewind();

  uint64_t total_bytes() const { return total_bytes_; }
  // Bytes of the inputs passed so far.
  uint64_t bytes_read() const { return bytes_before_ + position_; }
  int64_t documents() const { return documents_; }
  int64_t empty_documents() const { return empty_documents_; }

 private:
  bool next_in_file(std::string_view* text);
  std::string_view next_line();

  std::vector<MappedFile> files_;
  std::vector<bool> json_lines_;
  bool per_line_;
  uint64_t total_bytes_ = 0;
  size_t file_ = 0;            // the file being read
  uint64_t position_ = 0;      // its next byte
  uint64_t bytes_before_ = 0;  // bytes of the files before it
  int64_t line_number_ = 0;    // of the line last read in it
  std::string decoded_;        // a .jsonl line's "text"
  int64_t documents_ = 0;
  int64_t empty_documents_ = 0;
};

}  // namespace baton::data
