#include "baton/data/indexed_dataset_builder.h"

#include <cerrno>
#include <cstring>
#include <limits>

#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/core/printable.h"
#include "baton/data/indexed_dataset.h"

namespace baton::data {
namespace {

template <typename T>
void append_as(std::vector<unsigned char>& out, const int32_t* ids, size_t count,
               const std::string& path, int64_t first_token) {
  out.resize(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) {
    const int32_t id = ids[i];
    BATON_CHECK(id >= 0 && int64_t{id} <= int64_t{std::numeric_limits<T>::max()}, "[data.indexed] ",
                printable(path, 256), ": token id ", id, " (token ", first_token + int64_t(i),
                ") does not fit the dataset's ", sizeof(T) * 8, "-bit elements");
    const T value = static_cast<T>(id);
    std::memcpy(out.data() + i * sizeof(T), &value, sizeof(T));
  }
}

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

IndexedDatasetBuilder::IndexedDatasetBuilder(const std::string& bin_path, TokenType type)
    : bin_path_(bin_path), type_(type) {
  BATON_ASSERT(type != TokenType::kUint32, "uint32 has no Megatron dtype code");
  bin_ = std::fopen(bin_path.c_str(), "wb");
  BATON_CHECK(bin_ != nullptr, "[data.indexed] ", printable(bin_path, 256),
              " cannot be created: ", std::strerror(errno));
  std::setvbuf(bin_, nullptr, _IOFBF, 1 << 20);
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (bin_ != nullptr) std::fclose(bin_);
}

void IndexedDatasetBuilder::add_sequence(const int32_t* ids, size_t count) {
  BATON_ASSERT(bin_ != nullptr, "add_sequence after finalize");
  BATON_CHECK(count <= size_t{std::numeric_limits<int32_t>::max()}, "[data.indexed] ",
              printable(bin_path_, 256), ": a sequence of ", count,
              " tokens is longer than the .idx's int32 lengths hold");
  switch (type_) {
    case TokenType::kUint8:
      append_as<uint8_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kInt8:
      append_as<int8_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kInt16:
      append_as<int16_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kUint16:
      append_as<uint16_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kInt32:
      append_as<int32_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kInt64:
      append_as<int64_t>(buffer_, ids, count, bin_path_, token_count_);
      break;
    case TokenType::kUint32:
      BATON_ASSERT(false, "uint32");
  }
  write_bin(buffer_.data(), buffer_.size());
  sequence_lengths_.push_back(static_cast<int32_t>(count));
  token_count_ += static_cast<int64_t>(count);
}

void IndexedDatasetBuilder::end_document() {
  document_indices_.push_back(static_cast<int64_t>(sequence_lengths_.size()));
}

void IndexedDatasetBuilder::add_document(const int32_t* ids, size_t count) {
  add_sequence(ids, count);
  end_document();
}

void IndexedDatasetBuilder::write_bin(const void* bytes, size_t size) {
  if (size == 0) return;
  if (std::fwrite(bytes, 1, size, bin_) != size) {
    throw WriteError(detail::concat("[data.indexed] cannot write ", printable(bin_path_, 256), ": ",
                                    std::strerror(errno)));
  }
}

void IndexedDatasetBuilder::finalize(const std::string& idx_path) {
  BATON_ASSERT(bin_ != nullptr, "finalize twice");
  const int closed = std::fclose(bin_);
  const int close_error = errno;
  bin_ = nullptr;
  if (closed != 0) {
    throw WriteError(detail::concat("[data.indexed] cannot write ", printable(bin_path_, 256), ": ",
                                    std::strerror(close_error)));
  }
  const auto sequences = static_cast<uint64_t>(sequence_lengths_.size());
  std::string index;
  index.reserve(kIndexedHeaderBytes + 12 * sequences + 8 * document_indices_.size());
  index.append(kIndexedMagic);
  put<uint64_t>(index, kIndexedVersion);
  put<uint8_t>(index, static_cast<uint8_t>(type_));
  put<uint64_t>(index, sequences);
  put<uint64_t>(index, document_indices_.size());
  for (int32_t length : sequence_lengths_) put<int32_t>(index, length);
  const auto item = static_cast<int64_t>(token_bytes(type_));
  int64_t pointer = 0;
  for (int32_t length : sequence_lengths_) {
    put<int64_t>(index, pointer);
    pointer += length * item;
  }
  for (int64_t entry : document_indices_) put<int64_t>(index, entry);
  std::FILE* out = std::fopen(idx_path.c_str(), "wb");
  const bool written =
      out != nullptr && std::fwrite(index.data(), 1, index.size(), out) == index.size();
  const int write_error = errno;
  const bool done = out != nullptr && std::fclose(out) == 0 && written;
  if (!done) {
    throw WriteError(detail::concat("[data.indexed] cannot write ", printable(idx_path, 256), ": ",
                                    std::strerror(out == nullptr ? errno : write_error)));
  }
}

}  // namespace baton::data
