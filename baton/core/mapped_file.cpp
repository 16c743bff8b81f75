#include "baton/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/printable.h"

namespace baton {

MappedFile::MappedFile(const std::string& what, const std::string& path) : path_(path) {
  const std::string name = printable(path, 256);
  const std::string kind = file_kind(path);
  BATON_CHECK(kind != "missing", what, " ", name, " does not exist");
  BATON_CHECK(kind.empty(), what, " ", name, " is ", kind,
              kind == "a folder" ? "; name a file" : ", not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BATON_CHECK(fd >= 0, what, " ", name, " cannot be opened: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int error = errno;
    ::close(fd);
    BATON_CHECK(false, what, " ", name, " cannot be read: ", std::strerror(error));
  }
  size_bytes_ = static_cast<uint64_t>(info.st_size);
  if (size_bytes_ > 0) {
    void* mapped = ::mmap(nullptr, size_bytes_, PROT_READ, MAP_SHARED, fd, 0);
    const int error = errno;
    ::close(fd);
    BATON_CHECK(mapped != MAP_FAILED, what, " ", name, " (", size_bytes_,
                " bytes) cannot be mapped: ", std::strerror(error));
    data_ = mapped;
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_bytes_(std::exchange(other.size_bytes_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_bytes_ = std::exchange(other.size_bytes_, 0);
  }
  return *this;
}

void MappedFile::advise_sequential() const {
  if (data_ != nullptr) ::madvise(data_, size_bytes_, MADV_SEQUENTIAL);
}

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(data_, size_bytes_);
  data_ = nullptr;
  size_bytes_ = 0;
}

}  // namespace baton
