// libFuzzer target for Megatron-LM's .idx (baton/data/indexed_dataset.h;
// torch-free): any input either parses into an index whose counts, document
// index and back-to-back sequences agree with its size, with every check on
// it answering, or throws baton::Error with a one-line message, bounded, with
// no NUL or control byte. Anything else (a crash, another exception, a
// sanitizer report) is a bug. Built with -DBATON_FUZZ=ON; run by
// FUZZ_TARGET=indexed_dataset scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "baton/core/error.h"
#include "baton/data/indexed_dataset.h"
#include "baton/data/samples.h"
#include "fuzz/one_line_message.h"

namespace {

[[noreturn]] void bug(const char* what, const std::string& detail) {
  baton::fuzz::bug("indexed_dataset_fuzz", what, detail);
}

void check_message(const std::string& text) {
  baton::fuzz::check_one_line_message("indexed_dataset_fuzz", text);
}

void run(std::string_view bytes) {
  using namespace baton::data;
  const IndexedIndex index = parse_indexed_index(bytes, "fuzz.idx");
  const auto sequences = static_cast<uint64_t>(index.sequence_count);
  const auto entries = static_cast<uint64_t>(index.document_count) + 1;
  if (kIndexedHeaderBytes + 12 * sequences + 8 * entries != bytes.size()) {
    bug("the counts do not match the size", std::to_string(bytes.size()));
  }
  if (index.document_index(0) != 0 ||
      index.document_index(index.document_count) != index.sequence_count) {
    bug("the document index does not run from 0 to the sequence count", "");
  }
  int64_t tokens = 0;
  for (int64_t s = 0; s < index.sequence_count; ++s) {
    if (index.sequence_length(s) < 0 ||
        index.sequence_pointer(s) != tokens * static_cast<int64_t>(token_bytes(index.type))) {
      bug("a sequence out of place", std::to_string(s));
    }
    tokens += index.sequence_length(s);
  }
  if (tokens != index.token_count) bug("token_count is not the sum of the lengths", "");
  // The .bin checks, which a valid index reaches: the right size passes, others are refused.
  check_indexed_data_size(index, index.data_bytes(), "fuzz.idx", "fuzz.bin");
  for (uint64_t wrong : {index.data_bytes() + 1, index.data_bytes() / 2}) {
    if (wrong == index.data_bytes()) continue;
    try {
      check_indexed_data_size(index, wrong, "fuzz.idx", "fuzz.bin");
      bug("a .bin of the wrong size passed", std::to_string(wrong));
    } catch (const baton::Error& e) {
      check_message(e.what());
    }
  }
  // The samples over its tokens: every window inside the stream.
  try {
    const int64_t context = 1 + static_cast<int64_t>(bytes.size() % 7);
    const SampleOrder order(index.token_count, context, bytes.size(), "fuzz.bin");
    for (int64_t sample = 0; sample < 16; ++sample) {
      const int64_t offset = order.token_offset(sample);
      if (offset < 0 || offset + order.window_tokens() > index.token_count) {
        bug("a sample window outside the stream", std::to_string(sample));
      }
    }
  } catch (const baton::Error& e) {
    check_message(e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    run(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const baton::Error& e) {
    check_message(e.what());
  }
  return 0;
}
