#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "baton/core/error.h"
#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

using ::testing::HasSubstr;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/baton_write_file_test_" + name;
}

TEST(WriteFile, WritesTheTextByteForByte) {
  const std::string path = temp_path("bytes.txt");
  const std::string text = std::string("line one\r\nline two\n") + '\0' + "after a NUL";
  write_file(path, text);
  EXPECT_EQ(read(path), text);
  std::remove(path.c_str());
}

TEST(WriteFile, ReplacesWhatWasThere) {
  const std::string path = temp_path("replace.txt");
  write_file(path, "a much longer first version\n");
  write_file(path, "short\n");
  EXPECT_EQ(read(path), "short\n");
  std::remove(path.c_str());
}

TEST(WriteFile, NamesThePathItCannotWrite) {
  const std::string path = temp_path("no_such_dir/trace.svg");
  try {
    write_file(path, "<svg/>");
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[trace.write_file] cannot open \"" + path + "\""));
  }
}

}  // namespace
}  // namespace baton::trace
