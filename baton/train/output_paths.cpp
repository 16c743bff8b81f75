#include "baton/train/output_paths.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "baton/core/error.h"

namespace baton::train {
namespace {

namespace fs = std::filesystem;

void check_writable(const char* flag, const std::string& path) {
  std::error_code error;
  BATON_CHECK(!fs::is_directory(path, error), "[train] ", flag, " ", path,
              " is a folder; name a file to write");
  if (fs::exists(path, error)) {
    BATON_CHECK(access(path.c_str(), W_OK) == 0, "[train] ", flag, " ", path,
                " cannot be written: ", std::strerror(errno));
    return;
  }
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".")
                                                               : fs::path(path).parent_path();
  BATON_CHECK(fs::is_directory(parent, error), "[train] ", flag, " ", path, ": folder ",
              parent.string(), " does not exist");
  BATON_CHECK(access(parent.c_str(), W_OK) == 0, "[train] ", flag, " ", path, ": folder ",
              parent.string(), " is not writable: ", std::strerror(errno));
}

}  // namespace

void check_output_paths(const TrainConfig& c) {
  const std::vector<std::pair<const char*, std::string>> outputs = {
      {"--metrics", c.metrics}, {"--trace", c.trace}, {"--svg", c.svg}, {"--profile-out", c.profile_out}};
  std::vector<std::pair<const char*, fs::path>> seen;
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    check_writable(flag, path);
    std::error_code error;
    fs::path canonical = fs::weakly_canonical(fs::absolute(path), error);
    if (error) canonical = fs::absolute(path).lexically_normal();
    for (const auto& [other_flag, other] : seen) {
      BATON_CHECK(canonical != other, "[train] ", other_flag, " and ", flag,
                  " name the same file ", path, "; give each output its own file");
    }
    seen.emplace_back(flag, canonical);
  }
}

}  // namespace baton::train
