// libFuzzer target for the training config's TOML (torch-free: toml++ and the
// schedule names): any input either loads and passes check_config, or throws
// baton::Error with a one-line message, bounded, with no NUL or control byte.
// Anything else (a crash, another exception such as toml++'s own, a sanitizer
// report) is a bug. Built with -DBATON_FUZZ=ON; run by
// FUZZ_TARGET=config_toml scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "baton/core/error.h"
#include "baton/train/config.h"

namespace {

constexpr size_t kMaxMessageBytes = 4096;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "config_toml_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void check_message(const std::string& text) {
  if (text.size() > kMaxMessageBytes) bug("message too long", text.substr(0, 200));
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) bug("control byte (or a second line) in the message", text);
  }
}

void run(std::string_view text) {
  baton::train::TrainConfig config;
  std::vector<std::string> deprecations;
  baton::train::load_toml_text(text, "fuzz.toml", config, &deprecations);
  for (const std::string& line : deprecations) check_message(line);
  baton::train::check_config(config);
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
