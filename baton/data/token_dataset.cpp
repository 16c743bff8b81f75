#include "baton/data/token_dataset.h"

#include <algorithm>

#include "baton/core/crc32.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

constexpr uint64_t kFlatCrcBytes = uint64_t{1} << 20;

}  // namespace

const char* data_format_name(DataFormat format) {
  switch (format) {
    case DataFormat::kMegatron:
      return "megatron";
    case DataFormat::kFlatUint16:
      return "flat-uint16";
    case DataFormat::kFlatUint32:
      return "flat-uint32";
  }
  BATON_ASSERT(false, "data format ", static_cast<int>(format));
}

DataFormat parse_data_format(const std::string& text, const std::string& flag) {
  for (DataFormat format :
       {DataFormat::kMegatron, DataFormat::kFlatUint16, DataFormat::kFlatUint32}) {
    if (text == data_format_name(format)) return format;
  }
  BATON_CHECK(false, "[data] ", flag, " ", printable(text),
              " is not a data format; use megatron, flat-uint16 or flat-uint32");
}

bool DatasetIdentity::operator==(const DatasetIdentity& other) const {
  return index_crc32 == other.index_crc32 && index_bytes == other.index_bytes &&
         data_bytes == other.data_bytes && token_count == other.token_count;
}

TokenDataset TokenDataset::open_megatron(const std::string& prefix) {
  TokenDataset dataset;
  dataset.format_ = DataFormat::kMegatron;
  dataset.index_ = MappedFile("[data.indexed] the index", prefix + ".idx");
  dataset.parsed_ = parse_indexed_index(dataset.index_.bytes(), dataset.index_.path());
  dataset.data_ = MappedFile("[data.indexed] the data", prefix + ".bin");
  check_indexed_data_size(dataset.parsed_, dataset.data_.size_bytes(), dataset.index_.path(),
                          dataset.data_.path());
  dataset.type_ = dataset.parsed_.type;
  dataset.token_count_ = dataset.parsed_.token_count;
  dataset.document_count_ = dataset.parsed_.document_count;
  dataset.identity_.index_crc32 = crc32(dataset.index_.data(), dataset.index_.size_bytes());
  dataset.identity_.index_bytes = dataset.index_.size_bytes();
  dataset.identity_.data_bytes = dataset.data_.size_bytes();
  dataset.identity_.token_count = dataset.token_count_;
  return dataset;
}

TokenDataset TokenDataset::open_flat(const std::string& path, TokenType type) {
  BATON_ASSERT(type == TokenType::kUint16 || type == TokenType::kUint32, "flat type ",
               token_type_name(type));
  TokenDataset dataset;
  dataset.format_ = type == TokenType::kUint16 ? DataFormat::kFlatUint16 : DataFormat::kFlatUint32;
  dataset.type_ = type;
  dataset.data_ = MappedFile("[data.flat] the token file", path);
  const uint64_t size = dataset.data_.size_bytes();
  const size_t item = token_bytes(type);
  BATON_CHECK(size % item == 0, "[data.flat] ", printable(path, 256), " holds ", size,
              " bytes, not a whole number of ", token_type_name(type), " tokens (", item,
              " bytes each); is it another format?");
  dataset.token_count_ = static_cast<int64_t>(size / item);
  dataset.document_count_ = dataset.token_count_ > 0 ? 1 : 0;
  const uint64_t head = std::min(size, kFlatCrcBytes);
  const uint64_t tail = std::min(size - head, kFlatCrcBytes);
  uint32_t crc = crc32(dataset.data_.data(), head);
  dataset.identity_.index_crc32 = crc32(dataset.data_.data() + size - tail, tail, crc);
  dataset.identity_.data_bytes = size;
  dataset.identity_.token_count = dataset.token_count_;
  return dataset;
}

TokenDataset TokenDataset::open(const std::string& path, DataFormat format) {
  switch (format) {
    case DataFormat::kMegatron:
      return open_megatron(path);
    case DataFormat::kFlatUint16:
      return open_flat(path, TokenType::kUint16);
    case DataFormat::kFlatUint32:
      return open_flat(path, TokenType::kUint32);
  }
  BATON_ASSERT(false, "data format ", static_cast<int>(format));
}

int64_t TokenDataset::document_start(int64_t document) const {
  BATON_ASSERT(document >= 0 && document <= document_count_, "document ", document, " of ",
               document_count_);
  if (format_ != DataFormat::kMegatron) return document == 0 ? 0 : token_count_;
  const int64_t sequence = parsed_.document_index(document);
  if (sequence == parsed_.sequence_count) return token_count_;
  return parsed_.sequence_pointer(sequence) / static_cast<int64_t>(token_bytes(type_));
}

TokenSpan TokenDataset::document(int64_t document) const {
  BATON_ASSERT(document >= 0 && document < document_count_, "document ", document, " of ",
               document_count_);
  const int64_t start = document_start(document);
  return tokens(start, document_start(document + 1) - start);
}

TokenSpan TokenDataset::tokens(int64_t offset, int64_t count) const {
  return TokenSpan(data_.data(), token_count_, type_).subspan(offset, count);
}

void TokenDataset::check_vocab(int64_t vocab_size) const {
  BATON_ASSERT(vocab_size > 0, "vocab ", vocab_size);
  const auto item = static_cast<int64_t>(token_bytes(type_));
  // Whole 64 MiB pieces, so that the kernel can drop the pages read.
  const int64_t piece = (int64_t{64} << 20) / item;
  for (int64_t start = 0; start < token_count_; start += piece) {
    const TokenSpan span = tokens(start, std::min(piece, token_count_ - start));
    const int64_t bad = span.first_outside_vocab(vocab_size);
    BATON_CHECK(bad < 0, "[data] ", printable(data_path(), 256), ": token id ", span[bad],
                " at byte offset ", (start + bad) * item, " (token ", start + bad,
                ") is outside the vocabulary 0..", vocab_size - 1);
  }
}

}  // namespace baton::data
