// The stand-in for sentencepiece.cpp in a build without libsentencepiece-dev.
#include "baton/core/error.h"
#include "baton/data/sentencepiece.h"

namespace baton::data {
namespace {

[[noreturn]] void refuse() {
  throw Error(
      "[data.sentencepiece] this baton was built without SentencePiece (install "
      "libsentencepiece-dev and rebuild); --byte-level needs no model");
}

}  // namespace

bool sentencepiece_available() {
  return false;
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string&) {
  refuse();
}

std::unique_ptr<Tokenizer> load_sentencepiece_model(const std::string&, const std::string&) {
  refuse();
}

std::string train_sentencepiece(const std::function<bool(std::string*)>&,
                                const SentencePieceTraining&) {
  refuse();
}

}  // namespace baton::data
