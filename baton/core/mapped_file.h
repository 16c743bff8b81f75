// A regular file mapped read-only into memory (mmap(2)): its pages are the
// kernel's to load and drop, so a file larger than memory can be read with
// flat memory use. Torch-free; the token datasets of baton/data read by it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace baton {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps the whole regular file at `path`; `what` starts every message, e.g.
  // "[data.indexed] the index". Throws baton::Error (one line, the path made
  // printable) when the path is missing, not a regular file, or cannot be
  // opened or mapped. An empty file maps to an empty view.
  MappedFile(const std::string& what, const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size_bytes() const { return size_bytes_; }
  // The file's bytes, valid while this object lives. Page-aligned. A file
  // truncated by another process after mapping raises SIGBUS when the lost
  // pages are read: baton checks sizes when it maps, not on every read.
  std::string_view bytes() const {
    return {static_cast<const char*>(data_), static_cast<size_t>(size_bytes_)};
  }
  const unsigned char* data() const { return static_cast<const unsigned char*>(data_); }

  // Tells the kernel that the bytes will be read in order (MADV_SEQUENTIAL),
  // so it reads ahead and drops pages behind; a hint, never an error.
  void advise_sequential() const;

 private:
  void release();

  std::string path_;
  void* data_ = nullptr;
  uint64_t size_bytes_ = 0;
};

}  // namespace baton
