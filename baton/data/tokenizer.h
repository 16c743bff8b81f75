// The tokenizers of `baton data prepare`: text in, token ids out, and an
// end-of-document id to append after each document. baton's byte tokenizer
// is here; SentencePiece's is in sentencepiece.h. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace baton::data {

// Thread-safety: encode() is const and may run on several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Every id encode() gives, and the end-of-document id, is below it.
  virtual int64_t vocab_size() const = 0;
  // The id appended after each document.
  virtual int32_t end_of_document_id() const = 0;
  // Appends the ids of `text` to `ids`.
  virtual void encode(std::string_view text, std::vector<int32_t>* ids) const = 0;
  // For messages and the summary: "byte-level", "SentencePiece unigram m.model".
  virtual std::string description() const = 0;
};

// Decision: the byte tokenizer's end of document is id 256, after the 256
// byte values, so no byte of any input (a NUL included) can be taken for it;
// its vocabulary is therefore 257 (train with --vocab 257).
inline constexpr int32_t kByteEndOfDocument = 256;
inline constexpr int64_t kByteVocabSize = 257;

// Each byte of the text is its id, 0..255, as baton's --text corpus reads it.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

}  // namespace baton::data
