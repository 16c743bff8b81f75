// libFuzzer target for the IDX files of Fashion-MNIST (torch-free): any input
// either parses into dims whose product is the number of values after the
// header, with every check on it answering, or throws baton::Error with a
// one-line message, bounded, with no NUL or control byte. Anything else (a
// crash, another exception, a sanitizer report) is a bug. Built with
// -DBATON_FUZZ=ON; run by FUZZ_TARGET=idx scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "baton/core/error.h"
#include "baton/data/idx.h"
#include "fuzz/one_line_message.h"

namespace {

[[noreturn]] void bug(const char* what, const std::string& detail) {
  baton::fuzz::bug("idx_fuzz", what, detail);
}

void check_message(const std::string& text) {
  baton::fuzz::check_one_line_message("idx_fuzz", text);
}

void run(std::string_view bytes) {
  using namespace baton::data;
  const IdxArray array = parse_idx(bytes, "fuzz.idx");
  uint64_t count = 1;
  for (int64_t d : array.dims) {
    if (d < 0 || d > 0xffffffffLL) {
      bug("a dimension outside 0..2^32-1", format_idx_dims(array.dims));
    }
    count *= static_cast<uint64_t>(d);  // wraps only where a zero makes it 0 anyway
  }
  const size_t header_bytes = 4 + 4 * array.dims.size();
  if (count != array.values.size() || header_bytes + array.values.size() != bytes.size() ||
      array.values.data() != bytes.data() + header_bytes) {
    bug("values do not follow the header", format_idx_dims(array.dims));
  }
  check_idx_dims(array, array.dims, "fuzz.idx", "the input");
  // Fashion-MNIST's checks, which the fuzzer also reaches with a valid header.
  try {
    check_idx_dims(array, {static_cast<int64_t>(array.values.size())}, "fuzz.idx", "labels");
    check_idx_labels(array, 10, "fuzz.idx");
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
