#include "baton/data/text.h"

#include "baton/core/error.h"
#include "baton/core/input_file.h"

namespace baton::data {

TextCorpus::TextCorpus(const std::string& path) : path_(path) {
  std::string bytes = read_input_file("[data.text] the text corpus", path, kMaxTextBytes,
                                      "; name a text file with --text");
  BATON_CHECK(bytes.size() >= 2, "[data.text] the text corpus ", path, " holds ", bytes.size(),
              " bytes; it needs at least 2");
  // The bytes themselves (one per token), widened to int64 per batch: a
  // corpus takes its file's size in memory, not eight times it.
  tokens_ =
      torch::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, torch::kUInt8).clone();
}

Examples TextCorpus::sample_batch(int64_t batch, int64_t context, at::Generator& generator) const {
  BATON_CHECK(batch > 0, "[data.text] batch must be positive: got ", batch);
  BATON_CHECK(context > 0 && context < size(), "[data.text] context must be in [1, ", size() - 1,
              "] for the ", size(), "-byte corpus ", path_, ": got ", context);
  // A window and its target need context + 1 bytes: starts lie in [0, size - context).
  const auto starts = torch::randint(0, size() - context, {batch, 1}, generator, torch::kLong);
  const auto positions = starts + torch::arange(context, torch::kLong);
  return Examples{tokens_.take(positions).to(torch::kLong),
                  tokens_.take(positions + 1).to(torch::kLong)};
}

}  // namespace baton::data
