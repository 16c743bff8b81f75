// read_input_file(): an input named on the command line is read only when it
// is a regular file of bounded size; anything else is refused by what it is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "baton/core/error.h"
#include "baton/core/input_file.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

class InputFile : public testing::Test {
 protected:
  void SetUp() override {
    std::random_device random;
    dir_ = fs::temp_directory_path() / ("baton-input-file-test-" + std::to_string(random()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  static std::string message(const std::string& path, uint64_t max_bytes = 1 << 20) {
    try {
      read_input_file("[test] --in", path, max_bytes, "; name a file");
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  fs::path dir_;
};

TEST_F(InputFile, ReadsARegularFileWhole) {
  const std::string text("a\0b\nc", 5);
  EXPECT_EQ(read_input_file("[test] --in", write("a.txt", text), 5), text);
  EXPECT_EQ(file_kind(write("b.txt", "")), "");
}

TEST_F(InputFile, AFolderIsCalledAFolder) {
  EXPECT_EQ(message(dir_.string()), "[test] --in " + dir_.string() + " is a folder; name a file");
}

// Issue 16.9: /dev/zero was called missing, and read without end.
TEST_F(InputFile, DevZeroIsCalledACharacterDeviceAndNotRead) {
  EXPECT_EQ(message("/dev/zero"),
            "[test] --in /dev/zero is a character device, not a regular file; name a file");
}

TEST_F(InputFile, AFifoIsCalledAFifoAndNotOpened) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(file_kind(fifo), "a FIFO");
  EXPECT_THAT(message(fifo), testing::HasSubstr(fifo + " is a FIFO, not a regular file"));
}

TEST_F(InputFile, AMissingFileIsSaidNotToExist) {
  const std::string none = (dir_ / "none").string();
  EXPECT_EQ(message(none), "[test] --in " + none + " does not exist; name a file");
  EXPECT_EQ(message(none + "/below"), "[test] --in " + none + "/below does not exist; name a file");
}

TEST_F(InputFile, AFileOverTheLimitIsRefusedNamingTheLimit) {
  const std::string path = write("big.txt", std::string(2048, 'x'));
  EXPECT_EQ(read_input_file("[test] --in", path, 2048).size(), 2048u);
  EXPECT_EQ(message(path, 1024),
            "[test] --in " + path + " holds 2048 bytes, more than the limit of 1024 bytes");
}

TEST_F(InputFile, LimitsAreWrittenInTheLargestWholeUnit) {
  EXPECT_EQ(format_byte_limit(uint64_t{1} << 30), "1 GiB");
  EXPECT_EQ(format_byte_limit(uint64_t{64} << 20), "64 MiB");
  EXPECT_EQ(format_byte_limit((uint64_t{1} << 20) + 1), "1048577 bytes");
}

}  // namespace
}  // namespace baton
