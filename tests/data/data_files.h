// Helpers of the torch-free data tests: a temporary folder removed at the
// end, whole files written and read, and the message of an expected error.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::data::testing_files {

class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "baton-data-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TemporaryFolder() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// The message of the baton::Error that `run` throws, or "no error".
inline std::string error_of(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

template <typename T>
inline void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// megatron-core's .idx for `lengths` (one sequence a document) of `code`
// elements of `item` bytes, field by field.
inline std::string megatron_index(const std::vector<int32_t>& lengths, uint8_t code, int64_t item) {
  std::string bytes("MMIDIDX\0\0", 9);
  put<uint64_t>(bytes, 1);
  put<uint8_t>(bytes, code);
  put<uint64_t>(bytes, lengths.size());
  put<uint64_t>(bytes, lengths.size() + 1);
  for (int32_t length : lengths) put<int32_t>(bytes, length);
  int64_t pointer = 0;
  for (int32_t length : lengths) {
    put<int64_t>(bytes, pointer);
    pointer += length * item;
  }
  for (size_t i = 0; i <= lengths.size(); ++i) put<int64_t>(bytes, static_cast<int64_t>(i));
  return bytes;
}

}  // namespace baton::data::testing_files
