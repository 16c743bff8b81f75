#include "baton/data/samples.h"

#include "baton/core/error.h"
#include "baton/core/hash.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

constexpr int kFeistelRounds = 6;

// One Feistel pass over 2 * half_bits bits, keyed by (seed, epoch): a bijection.
uint64_t feistel(uint64_t value, int half_bits, uint64_t seed, uint64_t epoch) {
  const uint64_t mask = (uint64_t{1} << half_bits) - 1;
  uint64_t left = value >> half_bits, right = value & mask;
  const uint64_t key = splitmix64(seed ^ splitmix64(epoch));
  for (int round = 0; round < kFeistelRounds; ++round) {
    const uint64_t mixed = splitmix64(right ^ splitmix64(key + static_cast<uint64_t>(round)));
    const uint64_t next = left ^ (mixed & mask);
    left = right;
    right = next;
  }
  return (left << half_bits) | right;
}

}  // namespace

SampleOrder::SampleOrder(int64_t token_count, int64_t context, uint64_t seed,
                         const std::string& name, bool shuffle)
    : context_(context), seed_(seed), shuffle_(shuffle) {
  BATON_ASSERT(token_count >= 0 && context >= 1, "token_count ", token_count, " context ", context);
  BATON_CHECK(token_count > context, "[data.samples] ", printable(name, 256), " holds ",
              token_count, " tokens, fewer than one sample of context + 1 = ", context + 1,
              " tokens");
  samples_per_epoch_ = (token_count - 1) / context;
  BATON_ASSERT(samples_per_epoch_ <= (int64_t{1} << 62), "samples_per_epoch ", samples_per_epoch_);
  int bits = 2;
  while (bits < 62 && (uint64_t{1} << bits) < static_cast<uint64_t>(samples_per_epoch_)) bits += 2;
  half_bits_ = bits / 2;
}

int64_t SampleOrder::window_of(int64_t sample) const {
  BATON_ASSERT(sample >= 0, "sample ", sample);
  const int64_t position = sample % samples_per_epoch_;
  if (!shuffle_) return position;
  const auto epoch = static_cast<uint64_t>(sample / samples_per_epoch_);
  // Cycle walking: the domain is under 4 times the range, so under 4 passes
  // are expected; a cycle through `position` meets the range again.
  auto value = static_cast<uint64_t>(position);
  do {
    value = feistel(value, half_bits_, seed_, epoch);
  } while (value >= static_cast<uint64_t>(samples_per_epoch_));
  return static_cast<int64_t>(value);
}

SampleRange batch_samples(int64_t step, int64_t batch) {
  BATON_ASSERT(step >= 0 && batch >= 1, "step ", step, " batch ", batch);
  return {step * batch, (step + 1) * batch};
}

SampleRange dp_share(int64_t step, int64_t batch, int dp, int replica) {
  BATON_ASSERT(dp >= 1 && replica >= 0 && replica < dp, "replica ", replica, " of dp ", dp);
  BATON_CHECK(batch % dp == 0, "[data.samples] the batch of ", batch,
              " samples does not split into dp=", dp, " equal shares; use a multiple of ", dp);
  const SampleRange whole = batch_samples(step, batch);
  const int64_t share = batch / dp;
  return {whole.begin + replica * share, whole.begin + (replica + 1) * share};
}

}  // namespace baton::data
