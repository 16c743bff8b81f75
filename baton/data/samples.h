// Training samples over a token stream (token_dataset.h), and each data-parallel
// replica's share of a batch. Torch-free; pure functions of their arguments,
// so every rank computes the same samples without talking to the others.
//
// Decision, the sample rule (a documented simpler rule than Megatron-LM's):
// - The documents are concatenated in order, end-of-document ids included (the
//   .bin as it is), and cut into samples_per_epoch = (tokens - 1) / context
//   windows of context + 1 tokens; window w is tokens [w c, w c + c + 1):
//   inputs its first c tokens, targets its last c. Neighbouring windows share
//   one token, so each token after the first is a target once an epoch, as
//   in Megatron's GPTDataset; samples cross document boundaries as there.
// - Epoch e visits the windows in its own order, a pseudo-random permutation
//   of 0..samples_per_epoch-1 keyed by (seed, e): a Feistel network on the
//   smallest even power of two at or above samples_per_epoch, cycle-walked
//   into range. Each position is computed alone in O(1) time and memory, so
//   the order costs nothing for a corpus of any size. Megatron instead
//   shuffles documents and then samples with NumPy's generator, in index
//   arrays of about 12 bytes per sample held in memory; a C++ rewrite could
//   not reproduce NumPy's draws anyway.
// - Epochs are counted in samples: global sample g is position g mod
//   samples_per_epoch of epoch g / samples_per_epoch, so a run resumes at any
//   sample from (seed, g) alone.
#pragma once

#include <cstdint>
#include <string>

namespace baton::data {

class SampleOrder {
 public:
  // `name` (the dataset's path) starts the message when `token_count` is
  // less than one sample, context + 1 tokens: a baton::Error. `shuffle` off
  // visits the windows in order every epoch (a fixed evaluation set).
  // REQUIRES: token_count >= 0, context >= 1.
  SampleOrder(int64_t token_count, int64_t context, uint64_t seed, const std::string& name,
              bool shuffle = true);

  int64_t context() const { return context_; }
  // Tokens of a sample: context() + 1.
  int64_t window_tokens() const { return context_ + 1; }
  int64_t samples_per_epoch() const { return samples_per_epoch_; }
  int64_t epoch_of(int64_t sample) const { return sample / samples_per_epoch_; }

  // The window that global sample `sample` reads. REQUIRES: sample >= 0.
  int64_t window_of(int64_t sample) const;
  // The first token of that window: window_of(sample) * context(), so the
  // window [offset, offset + context() + 1) lies inside the stream.
  int64_t token_offset(int64_t sample) const { return window_of(sample) * context_; }

 private:
  int64_t context_;
  int64_t samples_per_epoch_;
  uint64_t seed_;
  bool shuffle_;
  int half_bits_;  // the Feistel network permutes 2 * half_bits_ bits
};

// A half-open range of global sample indices.
struct SampleRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The global samples of step `step` (from 0) with `batch` samples a step:
// [step * batch, (step + 1) * batch). REQUIRES: step >= 0, batch >= 1.
SampleRange batch_samples(int64_t step, int64_t batch);

// The share replica `replica` of `dp` reads of that batch: the contiguous
// slice [replica * batch / dp, (replica + 1) * batch / dp) of it, the rows the
// Pipeline hands that replica of one process's batch (baton/pipeline), so the
// replicas read disjoint shares whose union is that batch. Throws
// baton::Error when `dp` does not divide `batch`.
// REQUIRES: step >= 0, batch >= 1, 0 <= replica < dp.
SampleRange dp_share(int64_t step, int64_t batch, int dp, int replica);

}  // namespace baton::data
