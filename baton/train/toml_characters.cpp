#include "baton/train/toml_characters.h"

#include <vector>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::train {
namespace {

enum class Lexeme { kOutside, kBare, kComment, kBasic, kLiteral, kMultiBasic, kMultiLiteral };

bool is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool is_ascii(char c) {
  return static_cast<unsigned char>(c) < 0x80;
}

// What ends a bare value (a number, date or boolean) for toml++: anything
// else, quotes and brackets included, is read as part of it.
bool ends_bare_value(unsigned char c) {
  return is_space(c) || c == ']' || c == '}' || c == ',' || c == '#';
}

}  // namespace

void check_toml_characters(std::string_view text, const std::string& name) {
  Lexeme lexeme = Lexeme::kOutside;
  // kOutside: whether a key or value may start here (where toml++ reads a
  // quote as a string), and whether it is a value; the open arrays ('['),
  // inline tables ('{') and table headers ('h').
  bool start = true, value = false;
  std::vector<char> open;
  bool escaped = false;   // kMultiBasic: the previous character was a backslash
  bool trimming = false;  // kMultiBasic: skipping what a line-ending backslash trims
  size_t line = 1, column = 1;
  auto refuse = [&](const char* where) {
    throw Error(detail::concat("[train.config] ", printable(name, 256), ":", line, ":", column,
                               ": non-ASCII character ", where));
  };
  auto starts = [&](size_t i, std::string_view token) {
    return text.substr(i, token.size()) == token;
  };
  // The bytes after the first of a closing triple quote at i: the other two,
  // and up to two more quotes, which belong to the string.
  auto closing = [&](size_t i, char quote) {
    size_t n = 2;
    while (n < 4 && i + n + 1 < text.size() && text[i + n + 1] == quote) ++n;
    return n;
  };
  auto outside = [&](size_t i, unsigned char c) -> size_t {  // returns the bytes to skip
    if (!is_ascii(c)) refuse("outside a string or comment (TOML keys and values are ASCII)");
    const char top = open.empty() ? ' ' : open.back();
    size_t skip = 0;
    if (c == ' ' || c == '\t' || c == '\r') return 0;
    const bool was_start = start;
    start = false;  // unless c opens the way for a key or value below
    if (c == '\n') {
      if (top != '{') start = true, value = top == '[';
    } else if (c == '#') {
      lexeme = Lexeme::kComment;
    } else if (c == '"' || c == '\'') {
      if (!was_start) return 0;  // a quote inside a bare token: not a string
      const bool triple = starts(i, c == '"' ? R"(""")" : "'''");
      lexeme = c == '"' ? (triple ? Lexeme::kMultiBasic : Lexeme::kBasic)
                        : (triple ? Lexeme::kMultiLiteral : Lexeme::kLiteral);
      skip = triple ? 2 : 0;
    } else if (c == '=') {
      start = true, value = true;
    } else if (c == '.') {
      start = !value, value = false;
    } else if (c == '[') {
      const bool header = !value && (open.empty() || (top == 'h' && i > 0 && text[i - 1] == '['));
      if (was_start && (value || header)) {
        open.push_back(value ? '[' : 'h');
        start = true;
      }
    } else if (c == '{') {
      if (was_start && value) {
        open.push_back('{');
        start = true, value = false;
      }
    } else if (c == ',') {
      if (top == '[' || top == '{') start = true, value = top == '[';
    } else if (c == ']' || c == '}') {
      if (!open.empty()) open.pop_back();
    } else if (was_start && value) {
      lexeme = Lexeme::kBare;
    }
    return skip;
  };
  for (size_t i = starts(0, "\xEF\xBB\xBF") ? 3 : 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t skip = 0;  // ASCII bytes after c that belong to the same token
    switch (lexeme) {
      case Lexeme::kOutside:
        skip = outside(i, c);
        break;
      case Lexeme::kBare:
        if (!is_ascii(c)) refuse("outside a string or comment (TOML keys and values are ASCII)");
        if (ends_bare_value(c)) {
          lexeme = Lexeme::kOutside;
          skip = outside(i, c);
        }
        break;
      case Lexeme::kComment:
        if (c == '\n') {
          lexeme = Lexeme::kOutside;
          skip = outside(i, c);
        }
        break;
      case Lexeme::kBasic:
        if (c == '\\' && i + 1 < text.size() && text[i + 1] != '\n' && is_ascii(text[i + 1])) {
          skip = 1;  // an escape: \" does not end the string
        } else if (c == '"' || c == '\n') {
          lexeme = Lexeme::kOutside;
          if (c == '\n') skip = outside(i, c);
        }
        break;
      case Lexeme::kLiteral:
        if (c == '\'' || c == '\n') {
          lexeme = Lexeme::kOutside;
          if (c == '\n') skip = outside(i, c);
        }
        break;
      case Lexeme::kMultiLiteral:
        if (starts(i, "'''")) {
          lexeme = Lexeme::kOutside;
          skip = closing(i, '\'');
        }
        break;
      case Lexeme::kMultiBasic:
        if (trimming && !is_space(c)) {
          if (!is_ascii(c)) {
            refuse("after a line-ending backslash in a multi-line string; write it as \\uXXXX");
          }
          trimming = false;
        }
        if (trimming) break;
        if (escaped) {
          if (!is_ascii(c)) refuse("after a backslash in a multi-line string; write it as \\uXXXX");
          escaped = false;
          trimming = is_space(c);
        } else if (c == '\\') {
          escaped = true;
        } else if (starts(i, R"(""")")) {
          lexeme = Lexeme::kOutside;
          skip = closing(i, '"');
        }
        break;
    }
    for (size_t k = 0; k <= skip; ++k) {
      const auto byte = static_cast<unsigned char>(text[i + k]);
      if (byte == '\n') {
        ++line;
        column = 1;
      } else if ((byte & 0xC0) != 0x80) {
        ++column;  // not a UTF-8 continuation byte: a new character
      }
    }
    i += skip;
  }
}

}  // namespace baton::train
