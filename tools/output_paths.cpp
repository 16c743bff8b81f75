#include "tools/output_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include "baton/core/printable.h"
#include "baton/trace/writers.h"

namespace baton::cli {

void write_output(const std::string& where, const NamedPath& output, const std::string& text) {
  struct stat st {};
  const bool existed = stat(output.path.c_str(), &st) == 0;
  try {
    trace::write_file(output.path, text);
  } catch (const Error& e) {
    // A partial regular file is worse than none; devices and pipes stay.
    if (!existed || S_ISREG(st.st_mode)) unlink(output.path.c_str());
    throw WriteError(detail::concat(where, " ", output.flag, " \"", printable(output.path, 256),
                                    "\" was not written: ", e.what()));
  }
}

}  // namespace baton::cli
