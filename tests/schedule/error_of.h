// What the schedule tests share to read a refusal.
#pragma once

#include <functional>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule::test {

// The message of the baton::Error `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// validate()'s message for the schedule `text` in baton's text format; "" when valid.
inline std::string validate_error(const std::string& text) {
  return error_of([&] { validate(parse_schedule(text)); });
}

}  // namespace baton::schedule::test
