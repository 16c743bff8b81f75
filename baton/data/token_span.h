// Token ids as a corpus stores them: an element type (Megatron's dtype codes)
// and a view of the stored elements, read in place without a copy. Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace baton::data {

// Megatron-LM's DType codes (megatron/core/datasets/indexed_dataset.py) for the
// integer types. Its codes 6 (float64) and 7 (float32) hold no token ids.
enum class TokenType : uint8_t {
  kUint8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kUint16 = 8,
  kUint32 = 9,  // not a Megatron code: nanoGPT's flat uint32 files only
};

// Bytes per element: 1, 2, 4 or 8.
size_t token_bytes(TokenType type);
// "uint16", "int32", ...
const char* token_type_name(TokenType type);
// True and sets `type` when `code` is one of Megatron's integer codes (1-5, 8).
bool token_type_from_megatron_code(uint8_t code, TokenType* type);
// The type megatron-core's preprocessing stores ids of a vocabulary in
// (DType.optimal_dtype): uint16 below 65500 ids, else int32.
TokenType token_type_for_vocab(int64_t vocab_size);

// `size` elements of `type` at `data`, which outlive the view and are aligned
// to their size (a mapped file's page-aligned bytes at a multiple of it).
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(const void* data, int64_t size, TokenType type)
      : data_(data), size_(size), type_(type) {}

  const void* data() const { return data_; }
  int64_t size() const { return size_; }
  TokenType type() const { return type_; }
  // The stored elements as T. REQUIRES: sizeof(T) == token_bytes(type()).
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }

  // Element `index` widened to int64. REQUIRES: 0 <= index < size().
  int64_t operator[](int64_t index) const;
  // The elements [offset, offset + count), still in place.
  // REQUIRES: 0 <= offset, 0 <= count, offset + count <= size().
  TokenSpan subspan(int64_t offset, int64_t count) const;
  // Writes size() elements widened to int64 at `out`.
  void copy_to(int64_t* out) const;
  // The index of the first element outside [0, vocab_size), or -1 if none.
  int64_t first_outside_vocab(int64_t vocab_size) const;

 private:
  const void* data_ = nullptr;
  int64_t size_ = 0;
  TokenType type_ = TokenType::kUint16;
};

}  // namespace baton::data
