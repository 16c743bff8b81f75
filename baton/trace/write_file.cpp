#include <cerrno>
#include <cstring>
#include <fstream>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/trace/writers.h"

namespace baton::trace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  BATON_CHECK(out.is_open(), "[trace.write_file] cannot open \"", printable(path, 256),
              "\" for writing: ", std::strerror(errno));
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  // A full disk shows only when the buffer is flushed, so check after close().
  BATON_CHECK(!out.fail(), "[trace.write_file] cannot write ", text.size(), " bytes to \"",
              printable(path, 256), "\": ", std::strerror(errno));
}

}  // namespace baton::trace
