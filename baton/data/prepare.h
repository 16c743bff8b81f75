// `baton data prepare` as a library call: tokenize text documents
// (text_documents.h) with a Tokenizer, append its end-of-document id to each,
// and write Megatron-LM's indexed dataset PREFIX.bin and PREFIX.idx
// (indexed_dataset_builder.h), each document one sequence, ids stored as
// megatron-core's preprocessing stores them (token_type_for_vocab). Torch-free.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "baton/data/text_documents.h"
#include "baton/data/token_span.h"
#include "baton/data/tokenizer.h"

namespace baton::data {

struct PrepareProgress {
  uint64_t bytes_read = 0;
  uint64_t total_bytes = 0;
  int64_t documents = 0;
  int64_t tokens = 0;
  double seconds = 0;
};

struct PrepareSummary {
  PrepareProgress totals;
  int64_t empty_documents = 0;  // skipped
  int64_t vocab_size = 0;
  int32_t end_of_document_id = 0;
  TokenType type = TokenType::kUint16;
  std::string bin_path;
  std::string idx_path;
};

// Called about once a second while documents are tokenized.
using ProgressCallback = std::function<void(const PrepareProgress&)>;

// Reads every document of `documents` from its start, writes
// `output_prefix`.bin and .idx, and returns what it wrote. The files are
// written under temporary names beside them and renamed at the end, so an
// error leaves neither half-written. Throws baton::Error when the inputs hold
// no document ("empty input"), or a tokenizer or reader error; WriteError
// (baton/core/output_files.h) when a write fails. REQUIRES: the caller has
// checked that the outputs overwrite no input (check_output_paths).
PrepareSummary prepare_dataset(DocumentReader& documents, const Tokenizer& tokenizer,
                               const std::string& output_prefix,
                               const ProgressCallback& progress = nullptr);

}  // namespace baton::data
