#include "baton/core/crc32.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace baton {
namespace {

uint32_t of(const std::string& s) {
  return crc32(s.data(), s.size());
}

// The bit-at-a-time definition, independent of the table-driven code.
uint32_t bitwise(const std::vector<unsigned char>& bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
  }
  return ~c;
}

TEST(Crc32Test, MatchesTheCatalogueCheckValueAndZlib) {
  // The "check" value of CRC-32/ISO-HDLC in the CRC catalogue, and what
  // Python's zlib.crc32 gives for the other two.
  EXPECT_EQ(of("123456789"), 0xCBF43926u);
  EXPECT_EQ(of("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  EXPECT_EQ(of(""), 0u);
}

TEST(Crc32Test, EqualsTheBitwiseDefinitionAtEveryLengthAndAlignment) {
  std::vector<unsigned char> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  for (size_t start = 0; start < 4; ++start) {
    for (size_t n = 0; n + start <= bytes.size(); n += 7) {
      std::vector<unsigned char> part(bytes.begin() + start, bytes.begin() + start + n);
      ASSERT_EQ(crc32(bytes.data() + start, n), bitwise(part))
          << "start " << start << " length " << n;
    }
  }
}

TEST(Crc32Test, ContinuesAcrossPieces) {
  const std::string whole = "pipeline stages hand activations on";
  for (size_t cut = 0; cut <= whole.size(); ++cut) {
    EXPECT_EQ(crc32(whole.data() + cut, whole.size() - cut, crc32(whole.data(), cut)), of(whole));
  }
}

TEST(Crc32Test, ChangesWhenOneBitFlips) {
  std::string s(64, 'x');
  const uint32_t clean = of(s);
  for (size_t i = 0; i < s.size(); ++i) {
    std::string t = s;
    t[i] = static_cast<char>(t[i] ^ 0x10);
    EXPECT_NE(of(t), clean) << "byte " << i;
  }
}

}  // namespace
}  // namespace baton
