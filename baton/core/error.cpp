#include "baton/core/error.h"

namespace baton::detail {

void throw_assert(const char* condition, const char* file, int line, const std::string& message) {
  throw Error(concat("[baton internal] ", message, " (assertion ", condition, " failed at ", file,
                     ":", line, "; this is a bug in baton)"));
}

}  // namespace baton::detail
