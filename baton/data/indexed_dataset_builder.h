// Writes Megatron-LM's indexed dataset (indexed_dataset.h) in the byte layout
// megatron-core's IndexedDatasetBuilder and _IndexWriter write, version 1: the
// tokens go to the .bin as they come, the lengths and document index stay in
// memory (12 bytes per sequence, 8 per document) until finalize() writes the
// .idx. Torch-free. Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "baton/data/token_span.h"

namespace baton::data {

class IndexedDatasetBuilder {
 public:
  // Creates (or truncates) the .bin at `bin_path`, storing ids as `type`.
  // Throws baton::Error naming it when it cannot be created.
  IndexedDatasetBuilder(const std::string& bin_path, TokenType type);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  // A document of one sequence (megatron-core's add_document with one length,
  // as its preprocessing writes without --split-sentences). Throws
  // baton::Error when an id does not fit `type`, naming it and its position;
  // WriteError when the write fails.
  void add_document(const int32_t* ids, size_t count);
  // A sequence of the current document, which end_document() closes
  // (megatron-core's add_item and end_document).
  void add_sequence(const int32_t* ids, size_t count);
  void end_document();

  int64_t token_count() const { return token_count_; }
  int64_t document_count() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t sequence_count() const { return static_cast<int64_t>(sequence_lengths_.size()); }

  // Flushes and closes the .bin, then writes the .idx at `idx_path`. Throws
  // WriteError (baton/core/output_files.h) naming the file when a write
  // fails. REQUIRES: called once, and no sequence after it.
  void finalize(const std::string& idx_path);

 private:
  void write_bin(const void* bytes, size_t size);

  std::string bin_path_;
  TokenType type_;
  std::FILE* bin_ = nullptr;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_{0};
  std::vector<unsigned char> buffer_;  // one sequence converted to `type`
  int64_t token_count_ = 0;
};

}  // namespace baton::data
