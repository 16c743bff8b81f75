// Text from files and command lines, quoted in error messages. Bytes outside
// printable ASCII are escaped (a NUL as \x00, a newline as \x0a), so a message
// stays one line and is not cut short at a NUL; long text is shortened, so a
// message stays short however large the input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace baton {

// `text` with bytes outside 0x20..0x7e and '\\' escaped as \xNN; when it has
// more than `max_bytes` bytes, the first `max_bytes` followed by
// "... (N bytes)".
std::string printable(std::string_view text, size_t max_bytes = 64);

}  // namespace baton
