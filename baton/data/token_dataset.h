// A tokenized corpus on disk, memory-mapped and never read into memory:
// Megatron-LM's indexed dataset (PREFIX.idx + PREFIX.bin, indexed_dataset.h)
// or nanoGPT's flat file of uint16 or uint32 ids with no index (one
// document). Either way the corpus is one stream of tokens, the documents in
// order, and every read is a view into the mapped .bin. Torch-free.
// Thread-safety: const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "baton/core/mapped_file.h"
#include "baton/data/indexed_dataset.h"
#include "baton/data/token_span.h"

namespace baton::data {

enum class DataFormat { kMegatron, kFlatUint16, kFlatUint32 };

// "megatron", "flat-uint16", "flat-uint32": the names the CLI parses.
const char* data_format_name(DataFormat format);
// Throws baton::Error naming `flag` and the text unless it is one of the names.
DataFormat parse_data_format(const std::string& text, const std::string& flag);

// What a checkpoint records to know the dataset again: the CRC-32 of the
// whole .idx and the sizes. A flat file has no index: its CRC-32 covers the
// first and last MiB of the data (a whole pass over a large file would take
// minutes), with its size.
struct DatasetIdentity {
  uint32_t index_crc32 = 0;
  uint64_t index_bytes = 0;
  uint64_t data_bytes = 0;
  int64_t token_count = 0;

  bool operator==(const DatasetIdentity& other) const;
  bool operator!=(const DatasetIdentity& other) const { return !(*this == other); }
};

class TokenDataset {
 public:
  // Maps PREFIX.idx and PREFIX.bin and validates them (parse_indexed_index,
  // check_indexed_data_size); errors are one line naming the file.
  static TokenDataset open_megatron(const std::string& prefix);
  // Maps a flat file of `type` elements (kUint16 or kUint32). Throws
  // baton::Error naming it when its size is not a whole number of elements.
  static TokenDataset open_flat(const std::string& path, TokenType type);
  // open_megatron(path) or open_flat(path, ...) by `format`.
  static TokenDataset open(const std::string& path, DataFormat format);

  DataFormat format() const { return format_; }
  TokenType type() const { return type_; }
  // PREFIX.bin or the flat file; the .idx ("" for a flat file).
  const std::string& data_path() const { return data_.path(); }
  const std::string& index_path() const { return index_.path(); }
  int64_t token_count() const { return token_count_; }
  int64_t document_count() const { return document_count_; }
  const DatasetIdentity& identity() const { return identity_; }

  // The token offset where document `document` starts; document_count()
  // gives token_count(). REQUIRES: 0 <= document <= document_count().
  int64_t document_start(int64_t document) const;
  // Document `document`'s tokens. REQUIRES: 0 <= document < document_count().
  TokenSpan document(int64_t document) const;
  // Tokens [offset, offset + count) of the stream, in place.
  // REQUIRES: 0 <= offset, 0 <= count, offset + count <= token_count().
  TokenSpan tokens(int64_t offset, int64_t count) const;

  // Throws baton::Error naming the data file, the byte offset of the first
  // token id outside [0, vocab_size) and the id. Reads every token: a pass
  // over the file at the speed of the disk.
  void check_vocab(int64_t vocab_size) const;

 private:
  TokenDataset() = default;

  DataFormat format_ = DataFormat::kMegatron;
  TokenType type_ = TokenType::kUint16;
  MappedFile data_;
  MappedFile index_;
  IndexedIndex parsed_;  // views into index_ (Megatron only)
  int64_t token_count_ = 0;
  int64_t document_count_ = 0;
  DatasetIdentity identity_;
};

}  // namespace baton::data
