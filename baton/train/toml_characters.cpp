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

// The scan of one file: where it is (the lexeme, the line and column of the
// character at hand) and, outside strings, what is open.
class Scanner {
 public:
  Scanner(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  void run() {
    for (size_t i = starts(0, "\xEF\xBB\xBF") ? 3 : 0; i < text_.size(); ++i) {
      // ASCII bytes after the character at i that belong to the same token.
      const size_t skip = step(i, static_cast<unsigned char>(text_[i]));
      count(i, skip);
      i += skip;
    }
  }

 private:
  [[noreturn]] void refuse(const char* where) const {
    throw Error(detail::concat("[train.config] ", printable(name_, 256), ":", line_, ":", column_,
                               ": non-ASCII character ", where));
  }

  bool starts(size_t i, std::string_view token) const {
    return text_.substr(i, token.size()) == token;
  }

  // The bytes after the first of a closing triple quote at i: the other two,
  // and up to two more quotes, which belong to the string.
  size_t closing(size_t i, char quote) const {
    size_t n = 2;
    while (n < 4 && i + n + 1 < text_.size() && text_[i + n + 1] == quote) ++n;
    return n;
  }

  // A character outside any token; the bytes to skip.
  size_t outside(size_t i, unsigned char c) {
    if (!is_ascii(c)) refuse("outside a string or comment (TOML keys and values are ASCII)");
    const char top = open_.empty() ? ' ' : open_.back();
    size_t skip = 0;
    if (c == ' ' || c == '\t' || c == '\r') return 0;
    const bool was_start = start_;
    start_ = false;  // unless c opens the way for a key or value below
    if (c == '\n') {
      if (top != '{') start_ = true, value_ = top == '[';
    } else if (c == '#') {
      lexeme_ = Lexeme::kComment;
    } else if (c == '"' || c == '\'') {
      if (!was_start) return 0;  // a quote inside a bare token: not a string
      const bool triple = starts(i, c == '"' ? R"(""")" : "'''");
      lexeme_ = c == '"' ? (triple ? Lexeme::kMultiBasic : Lexeme::kBasic)
                         : (triple ? Lexeme::kMultiLiteral : Lexeme::kLiteral);
      skip = triple ? 2 : 0;
    } else if (c == '=') {
      start_ = true, value_ = true;
    } else if (c == '.') {
      start_ = !value_, value_ = false;
    } else if (c == '[') {
      const bool header =
          !value_ && (open_.empty() || (top == 'h' && i > 0 && text_[i - 1] == '['));
      if (was_start && (value_ || header)) {
        open_.push_back(value_ ? '[' : 'h');
        start_ = true;
      }
    } else if (c == '{') {
      if (was_start && value_) {
        open_.push_back('{');
        start_ = true, value_ = false;
      }
    } else if (c == ',') {
      if (top == '[' || top == '{') start_ = true, value_ = top == '[';
    } else if (c == ']' || c == '}') {
      if (!open_.empty()) open_.pop_back();
    } else if (was_start && value_) {
      lexeme_ = Lexeme::kBare;
    }
    return skip;
  }

  // Ends the token at hand with c, and reads c outside it when it belongs there.
  size_t leave(size_t i, unsigned char c, bool c_is_outside) {
    lexeme_ = Lexeme::kOutside;
    return c_is_outside ? outside(i, c) : 0;
  }

  // A character inside a multi-line basic string.
  size_t multi_basic(size_t i, unsigned char c) {
    if (trimming_ && !is_space(c)) {
      if (!is_ascii(c)) {
        refuse("after a line-ending backslash in a multi-line string; write it as \\uXXXX");
      }
      trimming_ = false;
    }
    if (trimming_) return 0;
    if (escaped_) {
      if (!is_ascii(c)) refuse("after a backslash in a multi-line string; write it as \\uXXXX");
      escaped_ = false;
      trimming_ = is_space(c);
    } else if (c == '\\') {
      escaped_ = true;
    } else if (starts(i, R"(""")")) {
      lexeme_ = Lexeme::kOutside;
      return closing(i, '"');
    }
    return 0;
  }

  // The character at i in the lexeme at hand; the bytes to skip.
  size_t step(size_t i, unsigned char c) {
    switch (lexeme_) {
      case Lexeme::kOutside:
        return outside(i, c);
      case Lexeme::kBare:
        if (!is_ascii(c)) refuse("outside a string or comment (TOML keys and values are ASCII)");
        return ends_bare_value(c) ? leave(i, c, true) : 0;
      case Lexeme::kComment:
        return c == '\n' ? leave(i, c, true) : 0;
      case Lexeme::kBasic:
        if (c == '\\' && i + 1 < text_.size() && text_[i + 1] != '\n' && is_ascii(text_[i + 1]))
          return 1;  // an escape: \" does not end the string
        return c == '"' || c == '\n' ? leave(i, c, c == '\n') : 0;
      case Lexeme::kLiteral:
        return c == '\'' || c == '\n' ? leave(i, c, c == '\n') : 0;
      case Lexeme::kMultiLiteral:
        if (!starts(i, "'''")) return 0;
        lexeme_ = Lexeme::kOutside;
        return closing(i, '\'');
      case Lexeme::kMultiBasic:
        return multi_basic(i, c);
    }
    return 0;
  }

  // The line and column past the character at i and the `skip` bytes after it.
  void count(size_t i, size_t skip) {
    for (size_t k = 0; k <= skip; ++k) {
      const auto byte = static_cast<unsigned char>(text_[i + k]);
      if (byte == '\n') {
        ++line_;
        column_ = 1;
      } else if ((byte & 0xC0) != 0x80) {
        ++column_;  // not a UTF-8 continuation byte: a new character
      }
    }
  }

  std::string_view text_;
  const std::string& name_;
  Lexeme lexeme_ = Lexeme::kOutside;
  // kOutside: whether a key or value may start here (where toml++ reads a
  // quote as a string), and whether it is a value; the open arrays ('['),
  // inline tables ('{') and table headers ('h').
  bool start_ = true, value_ = false;
  std::vector<char> open_;
  bool escaped_ = false;   // kMultiBasic: the previous character was a backslash
  bool trimming_ = false;  // kMultiBasic: skipping what a line-ending backslash trims
  size_t line_ = 1, column_ = 1;
};

}  // namespace

void check_toml_characters(std::string_view text, const std::string& name) {
  Scanner(text, name).run();
}

}  // namespace baton::train
