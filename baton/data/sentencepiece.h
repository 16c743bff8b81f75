// SentencePiece (Kudo and Richardson 2018), the tokenizer of Llama 1 and 2,
// through its C++ library (Debian's libsentencepiece-dev). CMake builds
// sentencepiece.cpp where pkg-config finds the library and the stub
// sentencepiece_none.cpp otherwise, whose functions throw "built without
// SentencePiece"; only what tokenizes links it (library baton_sentencepiece).
//
// Decisions for the models baton trains:
// - Unigram, SentencePiece's default: its encoder in Debian's library ran
//   over twice as fast as BPE's on one core (bench/RESULTS.md), which
//   prepare's throughput needs. Llama used BPE; --tokenizer loads either.
// - The text as it is: identity normalization, runs of spaces kept, no
//   dummy "▁" prefix, so that decoding gives back the document byte for byte.
//   No pieces of spaces alone (Llama allowed them, for indentation): a run of
//   spaces then has one segmentation. Where pieces tie ("w" "ww" against
//   "ww" "w" in "www"), sentencepiece 0.2.2 and later choose unlike the
//   library Debian ships (0.1.97) and the Python package up to 0.2.1, which
//   agree id for id (tests/interop); runs of spaces are the common case.
// - Byte fallback: a byte no piece covers becomes one of 256 <0xNN> pieces,
//   never the unknown id. Training reads lines without their newline, so a
//   newline is the piece <0x0A>: no piece spans two lines.
// - SentencePiece's default ids: unk 0, bos 1, eos 2 (the end of each
//   document, see tokenizer.h), no pad.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "baton/data/tokenizer.h"

namespace baton::data {

// False in a build without the library.
bool sentencepiece_available();

// The model in the .model file at `path`. Throws baton::Error naming it when
// it is missing, not a regular file, does not load, or has no end-of-sentence
// piece (its eos id ends each document); in a build without the library,
// "built without SentencePiece".
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

// The same from the bytes of a .model, as train_sentencepiece returns them;
// `name` starts messages.
std::unique_ptr<Tokenizer> load_sentencepiece_model(const std::string& model_bytes,
                                                    const std::string& name);

struct SentencePieceTraining {
  int64_t vocab_size = 8000;
  // Seeds SentencePiece's sampling of the training lines.
  uint32_t seed = 0;
  // Lines sampled for training (SentencePiece's input_sentence_size): a
  // larger corpus is sampled, not read whole into the trainer's memory.
  int64_t max_sentences = 2000000;
  int threads = 1;
};

// Trains a model on the lines `next_line` gives (each without its newline;
// it returns false after the last) and returns the bytes of its .model.
// Throws baton::Error with SentencePiece's reason, e.g. a vocabulary larger
// than the text can fill.
std::string train_sentencepiece(const std::function<bool(std::string* line)>& next_line,
                                const SentencePieceTraining& options);

}  // namespace baton::data
