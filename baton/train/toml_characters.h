// A guard in front of toml++. The toml++ 3.3.0 that Debian 12 ships reaches
// __builtin_unreachable() (undefined behaviour) when it tests some non-ASCII
// characters for whitespace (marzer/tomlplusplus#190 and #295, found again by
// fuzz/config_toml_fuzz.cpp): a character such as U+00E9 where a key, a value
// or a separator may start, or right after a backslash in a multi-line basic
// string. Valid TOML has no non-ASCII character outside strings and comments,
// so refusing those first turns the undefined behaviour into a clear error.
#pragma once

#include <string>
#include <string_view>

namespace baton::train {

// Throws baton::Error "[train.config] <name>:<line>:<column>: ..." at the first
// non-ASCII character outside a string or comment, or after a backslash (and
// the whitespace a line-ending backslash trims) in a """multi-line""" string,
// where it asks for a \uXXXX escape instead. A leading UTF-8 byte order mark
// is allowed.
void check_toml_characters(std::string_view text, const std::string& name);

}  // namespace baton::train
