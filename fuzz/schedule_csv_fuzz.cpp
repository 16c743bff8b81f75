// libFuzzer target for PyTorch's schedule CSV (torch-free): any input either
// reads as a valid lowered schedule that writes and reads back the same in both
// formats and simulates, or throws baton::Error with a one-line message,
// bounded, with no NUL or control byte. Anything else (a crash, another exception, a sanitizer
// report) is a bug. Built with -DBATON_FUZZ=ON; run by scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "baton/core/error.h"
#include "baton/schedule/csv_format.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"

namespace {

constexpr size_t kMaxFirstLineBytes = 4096;
constexpr size_t kMaxMessageBytes = 64 * 1024;

[[noreturn]] void bug(const char* what, const std::string& detail) {
  std::fprintf(stderr, "schedule_csv_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

void check_message(const char* message) {
  const std::string text = message;
  if (text.find('\n') != std::string::npos) bug("more than one line", text.substr(0, 200));
  const std::string first_line = text;
  if (first_line.size() > kMaxFirstLineBytes) bug("first line too long", first_line.substr(0, 200));
  if (text.size() > kMaxMessageBytes) bug("message too long", text.substr(0, 200));
  for (char c : first_line) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) bug("control byte in the first line", first_line);
  }
}

void run(std::string_view text) {
  using namespace baton;
  const schedule::Schedule s = schedule::parse_csv_schedule(text);
  for (auto format : {schedule::CsvFormat::ComputeOnly, schedule::CsvFormat::ComputeComms}) {
    const schedule::Schedule again = schedule::parse_csv_schedule(schedule::format_csv(s, format));
    if (again.actions != s.actions || again.stages != s.stages || again.map != s.map ||
        again.microbatches != s.microbatches)
      bug("format_csv does not read back to the same schedule", schedule::format_csv(s, format));
  }
  const sim::Result result = sim::simulate(s, sim::uniform_cost_model(s, 1, 2, 1, 0.5));
  if (!(result.stats.steady_step >= 0 && result.stats.steady_step <= result.stats.makespan + 1e-9))
    bug("steady step outside [0, makespan]", schedule::format_schedule(s));
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
