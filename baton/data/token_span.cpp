#include "baton/data/token_span.h"

#include <algorithm>

#include "baton/core/error.h"

namespace baton::data {
namespace {

// Calls `visit(const T* elements)` with the span's elements as their C++ type.
template <typename Visit>
auto visit_elements(const TokenSpan& span, Visit&& visit) {
  switch (span.type()) {
    case TokenType::kUint8:
      return visit(span.as<uint8_t>());
    case TokenType::kInt8:
      return visit(span.as<int8_t>());
    case TokenType::kInt16:
      return visit(span.as<int16_t>());
    case TokenType::kUint16:
      return visit(span.as<uint16_t>());
    case TokenType::kInt32:
      return visit(span.as<int32_t>());
    case TokenType::kUint32:
      return visit(span.as<uint32_t>());
    case TokenType::kInt64:
      return visit(span.as<int64_t>());
  }
  BATON_ASSERT(false, "token type ", static_cast<int>(span.type()));
}

}  // namespace

size_t token_bytes(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
    case TokenType::kInt8:
      return 1;
    case TokenType::kInt16:
    case TokenType::kUint16:
      return 2;
    case TokenType::kInt32:
    case TokenType::kUint32:
      return 4;
    case TokenType::kInt64:
      return 8;
  }
  BATON_ASSERT(false, "token type ", static_cast<int>(type));
}

const char* token_type_name(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
      return "uint8";
    case TokenType::kInt8:
      return "int8";
    case TokenType::kInt16:
      return "int16";
    case TokenType::kUint16:
      return "uint16";
    case TokenType::kInt32:
      return "int32";
    case TokenType::kUint32:
      return "uint32";
    case TokenType::kInt64:
      return "int64";
  }
  BATON_ASSERT(false, "token type ", static_cast<int>(type));
}

bool token_type_from_megatron_code(uint8_t code, TokenType* type) {
  if (code < 1 || code > 8 || code == 6 || code == 7) return false;
  *type = static_cast<TokenType>(code);
  return true;
}

TokenType token_type_for_vocab(int64_t vocab_size) {
  return vocab_size < 65500 ? TokenType::kUint16 : TokenType::kInt32;
}

int64_t TokenSpan::operator[](int64_t index) const {
  return visit_elements(*this, [&](const auto* elements) { return int64_t(elements[index]); });
}

TokenSpan TokenSpan::subspan(int64_t offset, int64_t count) const {
  BATON_ASSERT(offset >= 0 && count >= 0 && offset <= size_ && count <= size_ - offset, "offset ",
               offset, " count ", count, " of ", size_, " tokens");
  const auto* bytes = static_cast<const unsigned char*>(data_);
  return {bytes + static_cast<size_t>(offset) * token_bytes(type_), count, type_};
}

void TokenSpan::copy_to(int64_t* out) const {
  visit_elements(*this, [&](const auto* elements) { std::copy(elements, elements + size_, out); });
}

int64_t TokenSpan::first_outside_vocab(int64_t vocab_size) const {
  return visit_elements(*this, [&](const auto* elements) -> int64_t {
    // Blocks whose every element is in range are passed by a loop the
    // compiler vectorizes; only a block holding a bad id is searched.
    constexpr int64_t kBlock = 4096;
    for (int64_t start = 0; start < size_; start += kBlock) {
      const int64_t end = std::min(size_, start + kBlock);
      bool bad = false;
      for (int64_t i = start; i < end; ++i) {
        const int64_t id = elements[i];
        bad |= id < 0 || id >= vocab_size;
      }
      if (!bad) continue;
      for (int64_t i = start; i < end; ++i) {
        const int64_t id = elements[i];
        if (id < 0 || id >= vocab_size) return i;
      }
    }
    return -1;
  });
}

}  // namespace baton::data
