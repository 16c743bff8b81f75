#include "baton/schedule/runnable_file.h"

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule load_runnable_schedule(const std::string& path) {
  Schedule s = load_schedule_file(path);
  try {
    if (!s.has_communication()) return lower(s);
    validate(s);
  } catch (const Error& e) {
    throw Error(detail::concat(printable(path, 256), ": ", e.what()));
  }
  return s;
}

}  // namespace baton::schedule
