#include "baton/data/tokenizer.h"

namespace baton::data {
namespace {

class ByteTokenizer : public Tokenizer {
 public:
  int64_t vocab_size() const override { return kByteVocabSize; }
  int32_t end_of_document_id() const override { return kByteEndOfDocument; }
  void encode(std::string_view text, std::vector<int32_t>* ids) const override {
    const size_t start = ids->size();
    ids->resize(start + text.size());
    for (size_t i = 0; i < text.size(); ++i) {
      (*ids)[start + i] = static_cast<unsigned char>(text[i]);
    }
  }
  std::string description() const override { return "byte-level"; }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

}  // namespace baton::data
