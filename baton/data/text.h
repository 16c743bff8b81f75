// A byte-level text corpus: every byte of a file is a token (vocab 256), so
// any UTF-8 file serves without a tokenizer.
#pragma once

#include "baton/data/batches.h"

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>
#include <string>

namespace baton::data {

inline constexpr const char* kDefaultTextPath = "/usr/share/common-licenses/GPL-3";
// The largest corpus read (held as its bytes, one per token).
inline constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

class TextCorpus {
 public:
  static constexpr int64_t kVocabSize = 256;

  // Reads the whole file. A missing or unreadable file, a folder or another
  // file that is not regular (/dev/zero), or a file of more than kMaxTextBytes
  // throws baton::Error naming the path.
  explicit TextCorpus(const std::string& path = kDefaultTextPath);

  const std::string& path() const { return path_; }
  // Tokens uint8 [size()]: the file's bytes, each a token id in [0, 256).
  const torch::Tensor& tokens() const { return tokens_; }
  int64_t size() const { return tokens_.size(0); }

  // `batch` windows at random offsets drawn from `generator`: inputs int64 (widened per batch)
  // [batch, context] and targets = the same windows shifted one byte ahead.
  // REQUIRES: batch > 0, 0 < context < size().
  Examples sample_batch(int64_t batch, int64_t context, at::Generator& generator) const;

 private:
  std::string path_;
  torch::Tensor tokens_;
};

}  // namespace baton::data
