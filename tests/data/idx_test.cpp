// parse_idx() and its checks: the header, the dimensions against the bytes
// that follow, and the labels; every refusal names the file.
#include "baton/data/idx.h"

#include "baton/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace baton::data {
namespace {

// An IDX file of unsigned bytes: magic 0x000008NN, the dims, then `values`.
std::string idx(const std::vector<uint32_t>& dims, const std::string& values) {
  std::string bytes{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
  }
  return bytes + values;
}

std::string parse_error(const std::string& bytes) {
  try {
    parse_idx(bytes, "/d/f.gz");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Idx, ParsesTheDimensionsAndViewsTheValues) {
  const std::string bytes = idx({2, 3}, "abcdef");
  const IdxArray array = parse_idx(bytes, "f");
  EXPECT_EQ(array.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array.values, "abcdef");
  EXPECT_EQ(array.values.data(), bytes.data() + 12);
}

TEST(Idx, AZeroDimensionMakesAnEmptyArray) {
  EXPECT_EQ(parse_idx(idx({0, 5}, ""), "f").values.size(), 0u);
  EXPECT_THAT(parse_error(idx({0, 5}, "x")),
              testing::HasSubstr("its 0 x 5 = 0 elements do not match the 1 bytes"));
}

// Regression (issue 30, item 12): a labels header on an images file's bytes
// was described by its element count; both magic numbers are named.
TEST(Idx, AnotherKindOfIdxFileNamesTheMagicFoundAndTheMagicExpected) {
  const std::string labels = idx({3}, std::string(3 * 2 * 2, 'x'));
  std::string what;
  try {
    parse_idx(labels, "/d/train-images-idx3-ubyte", 3);
  } catch (const Error& e) {
    what = e.what();
  }
  EXPECT_THAT(what, testing::HasSubstr("/d/train-images-idx3-ubyte has the magic number "
                                       "0x00000801 (2049: unsigned bytes in 1 dimension) where "
                                       "0x00000803 (2051: 3 dimensions) is expected"));
  // A file whose header fits its bytes parses; its shape is the caller's to check.
  EXPECT_EQ(parse_idx(idx({3}, "abc"), "f", 3).dims, (std::vector<int64_t>{3}));
}

// Issue 16.6: a wrong magic number was exit 3 with no file named.
TEST(Idx, AWrongMagicNumberNamesTheFileAndTheNumber) {
  std::string bytes = idx({1}, "a");
  bytes[0] = '\xde';
  EXPECT_EQ(parse_error(bytes),
            "[data.idx] /d/f.gz has the magic number 0xde000801; an IDX file of unsigned bytes "
            "starts 0x000008NN, NN the number of dimensions (at least 1)");
}

TEST(Idx, ATypeOtherThanUnsignedBytesIsAWrongMagicNumber) {
  std::string bytes = idx({1}, "abcd");
  bytes[2] = '\x0d';  // float
  EXPECT_THAT(parse_error(bytes), testing::HasSubstr("has the magic number 0x00000d01"));
}

TEST(Idx, NoDimensionsIsAWrongMagicNumber) {
  EXPECT_THAT(parse_error(idx({}, "a")), testing::HasSubstr("has the magic number 0x00000800"));
}

TEST(Idx, AFileShorterThanItsHeaderSaysHowShort) {
  EXPECT_EQ(parse_error(std::string("\0\0", 2)),
            "[data.idx] /d/f.gz holds 2 bytes, too few for the 4-byte magic number of an IDX "
            "file");
  EXPECT_EQ(parse_error(idx({60000, 28, 28}, "").substr(0, 10)),
            "[data.idx] /d/f.gz holds 10 bytes, too few for the header of 3 dimensions (16 "
            "bytes)");
}

TEST(Idx, ElementsThatDoNotMatchTheBytesAfterTheHeaderAreRefused) {
  EXPECT_EQ(parse_error(idx({2, 3}, "abcdefg")),
            "[data.idx] /d/f.gz: its 2 x 3 = 6 elements do not match the 7 bytes after its "
            "12-byte header");
  EXPECT_THAT(parse_error(idx({2, 3}, "abcde")),
              testing::HasSubstr("its 2 x 3 elements are more than the 5 bytes"));
  EXPECT_THAT(parse_error(idx({60000, 28, 28}, "abc")),
              testing::HasSubstr("its 60000 x 28 x 28 elements are more than the 3 bytes"));
}

TEST(Idx, DimensionsWhoseProductOverflowsAreRefusedNotWrapped) {
  // 2^32 * 2^32 wraps to 0 in 64 bits; 2^16 * 2^16 * 2^32 too.
  EXPECT_THAT(parse_error(idx({0xffffffff, 0xffffffff, 0xffffffff}, "")),
              testing::HasSubstr("are more than the 0 bytes"));
  EXPECT_THAT(parse_error(idx({65536, 65536, 65536, 65536}, "")),
              testing::HasSubstr("are more than the 0 bytes"));
}

TEST(Idx, DimensionsOtherThanExpectedNameTheFileAndBothShapes) {
  const std::string bytes = idx({2, 2}, "abcd");
  const IdxArray array = parse_idx(bytes, "f");
  EXPECT_NO_THROW(check_idx_dims(array, {2, 2}, "f", "the images"));
  try {
    check_idx_dims(array, {4}, "/d/f.gz", "the labels");
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[data.idx] /d/f.gz holds 2 x 2 elements; the labels are 4");
  }
}

// Issue 16.6: a label of 200 was exit 3, after training started.
TEST(Idx, TheFirstLabelOutsideTheClassesIsNamedByItsIndex) {
  const std::string bytes = idx({6}, std::string("\x00\x09\x05\xc8\x0a\x01", 6));
  const IdxArray labels = parse_idx(bytes, "f");
  EXPECT_NO_THROW(check_idx_labels(labels, 256, "f"));
  try {
    check_idx_labels(labels, 10, "/d/labels.gz");
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[data.idx] /d/labels.gz: label 200 at index 3 is outside 0..9");
  }
}

TEST(Idx, AControlByteInTheNameStaysOneLine) {
  try {
    parse_idx("", "a\nb");
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace baton::data
