// What the fuzz targets whose errors are one line hold every message to:
// at most kMaxMessageBytes, with no control byte (so no NUL and no second
// line). A breach aborts with the target's name, which libFuzzer reports as
// a crash and keeps the input.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace baton::fuzz {

constexpr size_t kMaxMessageBytes = 4096;

[[noreturn]] inline void bug(const char* target, const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n%s\n", target, what, detail.c_str());
  std::abort();
}

inline void check_one_line_message(const char* target, const std::string& text) {
  if (text.size() > kMaxMessageBytes) bug(target, "message too long", text.substr(0, 200));
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      bug(target, "control byte (or a second line) in the message", text);
    }
  }
}

}  // namespace baton::fuzz
