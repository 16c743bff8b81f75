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
#include "fuzz/one_line_message.h"

namespace {

void check_message(const std::string& text) {
  baton::fuzz::check_one_line_message("config_toml_fuzz", text);
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
