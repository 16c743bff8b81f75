#include "baton/core/input_file.h"

#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton {

std::string file_kind(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) return errno == ENOENT || errno == ENOTDIR ? "missing" : "";
  if (S_ISREG(info.st_mode)) return "";
  if (S_ISDIR(info.st_mode)) return "a folder";
  if (S_ISCHR(info.st_mode)) return "a character device";
  if (S_ISBLK(info.st_mode)) return "a block device";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISSOCK(info.st_mode)) return "a socket";
  return "not a regular file";
}

std::string format_byte_limit(uint64_t bytes) {
  constexpr uint64_t kGiB = uint64_t{1} << 30, kMiB = uint64_t{1} << 20;
  if (bytes >= kGiB && bytes % kGiB == 0) return std::to_string(bytes / kGiB) + " GiB";
  if (bytes >= kMiB && bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::string read_input_file(const std::string& what, const std::string& path, uint64_t max_bytes,
                            const std::string& hint) {
  const std::string name = printable(path, 256);
  const std::string kind = file_kind(path);
  BATON_CHECK(kind != "missing", what, " ", name, " does not exist", hint);
  BATON_CHECK(kind.empty(), what, " ", name, " is ", kind,
              (kind == "a folder" ? "" : ", not a regular file"), hint);
  std::error_code error;
  const uintmax_t size_bytes = std::filesystem::file_size(path, error);
  BATON_CHECK(error || size_bytes <= max_bytes, what, " ", name, " holds ", size_bytes,
              " bytes, more than the limit of ", format_byte_limit(max_bytes));
  std::ifstream in(path, std::ios::binary);
  BATON_CHECK(in.is_open(), what, " ", name, " cannot be read: ", std::strerror(errno));
  // Bounded even though the file was regular when checked: it may grow or be replaced.
  std::string text;
  std::string chunk(1 << 20, '\0');
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
    BATON_CHECK(text.size() <= max_bytes, what, " ", name, " grew past the limit of ",
                format_byte_limit(max_bytes), " while it was read");
  }
  BATON_CHECK(in.eof(), what, " ", name, " cannot be read: ", std::strerror(errno));
  return text;
}

}  // namespace baton
