#include "baton/core/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>

#include "baton/core/printable.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& path) {
  return "\"" + printable(path, 256) + "\"";
}

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

// Where a path is: its resolved name, and its device and inode if it exists.
struct Identity {
  std::string resolved;
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

Identity identity_of(const std::string& path) {
  Identity id{resolved(path)};
  struct stat st {};
  if (stat(id.resolved.c_str(), &st) == 0) {
    id.exists = true;
    id.device = st.st_dev;
    id.inode = st.st_ino;
  }
  return id;
}

bool same(const Identity& a, const Identity& b) {
  if (a.exists && b.exists) return a.device == b.device && a.inode == b.inode;
  return a.resolved == b.resolved;
}

// `inner` is strictly inside the folder `outer`: one of inner's parents is outer.
bool lies_inside(const Identity& inner, const Identity& outer) {
  for (fs::path p = fs::path(inner.resolved).parent_path(); !p.empty(); p = p.parent_path()) {
    if (same(identity_of(p.string()), outer)) return true;
    if (p == p.parent_path()) break;
  }
  return false;
}

std::string other_role(const NamedPath& other, const std::vector<NamedPath>& inputs) {
  for (const NamedPath& in : inputs)
    if (&in == &other) return "reads";
  return "writes";
}

void check_writable(const std::string& where, const NamedPath& out) {
  BATON_CHECK(!out.path.empty(), where, " ", out.flag, " needs a file name");
  const std::string what = where + " " + out.flag + " " + quoted(out.path);
  struct stat st {};
  if (stat(out.path.c_str(), &st) == 0) {
    BATON_CHECK(!S_ISDIR(st.st_mode), what, " is a folder; give a file name");
    // Non-blocking, so that a FIFO without a reader fails instead of hanging.
    const int fd = open(out.path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    BATON_CHECK(fd >= 0, what, " cannot be written: ", std::strerror(errno));
    close(fd);
    return;
  }
  // Probe where the file would be made (through a link to a missing file).
  const std::string target = resolved(out.path);
  const fs::path parent = fs::path(target).parent_path();
  std::error_code ec;
  BATON_CHECK(fs::is_directory(parent, ec), what, ": folder ", quoted(parent.string()),
              " does not exist");
  const int fd = open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  BATON_CHECK(fd >= 0, what, " cannot be created: ", std::strerror(errno));
  close(fd);
  unlink(target.c_str());
}

}  // namespace

void check_output_paths(const std::string& where, const std::vector<NamedPath>& outputs,
                        const std::vector<NamedPath>& inputs) {
  std::vector<std::pair<const NamedPath*, Identity>> seen;
  for (const NamedPath& in : inputs)
    if (!in.path.empty()) seen.emplace_back(&in, identity_of(in.path));
  for (const NamedPath& out : outputs) {
    BATON_CHECK(!out.path.empty(), where, " ", out.flag, " needs a ",
                out.folder ? "folder" : "file", " name");
    if (!out.folder) check_writable(where, out);
    const Identity mine = identity_of(out.path);
    for (const auto& [other, theirs] : seen) {
      const std::string pair = detail::concat(where, " ", other->flag, " and ", out.flag);
      BATON_CHECK(!same(mine, theirs), pair, " name the same ", out.folder ? "folder " : "file ",
                  quoted(out.path), "; give each its own");
      BATON_CHECK(!(other->folder && lies_inside(mine, theirs)), where, " ", out.flag, " ",
                  quoted(out.path), " lies inside the ", other->flag, " folder ",
                  quoted(other->path), ", which baton ", other_role(*other, inputs),
                  "; write it elsewhere");
      BATON_CHECK(!(out.folder && lies_inside(theirs, mine)), where, " ", other->flag, " ",
                  quoted(other->path), " lies inside the ", out.flag, " folder ", quoted(out.path),
                  ", which baton writes; keep them apart");
    }
    seen.emplace_back(&out, mine);
  }
}

bool path_within(const std::string& path, const std::string& folder) {
  const Identity inner = identity_of(path), outer = identity_of(folder);
  return same(inner, outer) || lies_inside(inner, outer);
}

void flush_stdout(const std::string& where) {
  errno = 0;
  std::cout.flush();
  int error = std::cout.good() ? 0 : errno;
  if (std::fflush(stdout) != 0 && error == 0) error = errno;
  if (std::cout.good() && !std::ferror(stdout)) return;
  throw WriteError(detail::concat(where, " cannot write to standard output", error ? ": " : "",
                                  error ? std::strerror(error) : ""));
}

void check_stdout_open(const std::string& where) {
  if (fcntl(STDOUT_FILENO, F_GETFD) >= 0) return;
  throw WriteError(where + " standard output is closed; redirect it to a file or /dev/null");
}

}  // namespace baton
