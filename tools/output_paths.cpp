#include "tools/output_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>

#include "baton/core/printable.h"
#include "baton/trace/writers.h"

namespace baton::cli {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& path) { return "\"" + printable(path, 256) + "\""; }

// The path with ".", ".." and symbolic links resolved, as far as it exists.
// A link to a file not made yet resolves to that file.
std::string resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  // weakly_canonical() leaves a dangling link at the end unresolved.
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) break;
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  const fs::path canonical = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal().string() : canonical.string();
}

void check_writable(const NamedPath& out) {
  const std::string where = "[simulate] " + out.flag + " " + quoted(out.path);
  BATON_CHECK(!out.path.empty(), "[simulate] ", out.flag, " needs a file name");
  struct stat st {};
  if (stat(out.path.c_str(), &st) == 0) {
    BATON_CHECK(!S_ISDIR(st.st_mode), where, " is a folder; give a file name");
    // Non-blocking, so that a FIFO without a reader fails instead of hanging.
    const int fd = open(out.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    BATON_CHECK(fd >= 0, where, " cannot be written: ", std::strerror(errno));
    close(fd);
    return;
  }
  // Probe where the file would be made (through a link to a missing file).
  const std::string target = resolved(out.path);
  const fs::path parent = fs::path(target).parent_path();
  std::error_code ec;
  BATON_CHECK(fs::is_directory(parent, ec), where, ": folder ", quoted(parent.string()),
              " does not exist");
  const int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  BATON_CHECK(fd >= 0, where, " cannot be created: ", std::strerror(errno));
  close(fd);
  unlink(target.c_str());
}

}  // namespace

void check_output_paths(const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs) {
  std::map<std::string, const NamedPath*> seen;
  for (const NamedPath& in : inputs)
    if (!in.path.empty()) seen.emplace(resolved(in.path), &in);
  for (const NamedPath& out : outputs) {
    check_writable(out);
    const auto [it, fresh] = seen.emplace(resolved(out.path), &out);
    BATON_CHECK(fresh, "[simulate] ", it->second->flag, " and ", out.flag, " name the same file ",
                quoted(out.path), "; give each its own");
  }
}

void write_output(const NamedPath& output, const std::string& text) {
  struct stat st {};
  const bool existed = stat(output.path.c_str(), &st) == 0;
  try {
    trace::write_file(output.path, text);
  } catch (const Error& e) {
    // A partial regular file is worse than none; devices and pipes stay.
    if (!existed || S_ISREG(st.st_mode)) unlink(output.path.c_str());
    throw WriteError(detail::concat("[simulate] ", output.flag, " ", quoted(output.path),
                                    " was not written: ", e.what()));
  }
}

void flush_stdout() {
  errno = 0;
  std::cout.flush();
  if (std::cout.good()) return;
  const int error = errno;
  throw WriteError(detail::concat("[simulate] cannot write to standard output",
                                  error ? ": " : "", error ? std::strerror(error) : ""));
}

void check_stdout_open() {
  if (fcntl(STDOUT_FILENO, F_GETFD) >= 0) return;
  throw WriteError("[simulate] standard output is closed; redirect it to a file or /dev/null");
}

}  // namespace baton::cli
