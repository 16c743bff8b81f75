// Errors: BATON_CHECK for user and configuration mistakes, BATON_ASSERT for
// invariants whose failure is a bug in baton. Both throw baton::Error, whose
// message is one line "[where] rule: values" unless a caller appends detail
// (such as a schedule grid) on the following lines.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace baton {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {

inline void append(std::ostringstream&) {}

template <typename T, typename... Rest>
void append(std::ostringstream& out, const T& value, const Rest&... rest) {
  out << value;
  append(out, rest...);
}

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  append(out, args...);
  return out.str();
}

[[noreturn]] void throw_assert(const char* condition, const char* file, int line,
                               const std::string& message);

}  // namespace detail
}  // namespace baton

// BATON_CHECK(cond, "[module.op] rule: value ", x) throws baton::Error with the
// streamed message when cond is false.
#define BATON_CHECK(cond, ...)                                    \
  do {                                                            \
    if (!(cond)) {                                                \
      throw ::baton::Error(::baton::detail::concat(__VA_ARGS__)); \
    }                                                             \
  } while (false)

// BATON_ASSERT(cond, ...) marks an internal invariant; the message says it is
// a bug in baton and where it fired.
#define BATON_ASSERT(cond, ...)                                            \
  do {                                                                     \
    if (!(cond)) {                                                         \
      ::baton::detail::throw_assert(#cond, __FILE__, __LINE__,             \
                                    ::baton::detail::concat(__VA_ARGS__)); \
    }                                                                      \
  } while (false)
