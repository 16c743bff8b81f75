// printable(): text quoted in messages stays one line, whole and short.
#include <gtest/gtest.h>

#include <string>

#include "baton/core/printable.h"

namespace baton {
namespace {

TEST(Printable, KeepsPrintableAsciiAsItIs) {
  EXPECT_EQ(printable("0F0 my-schedule_2.txt"), "0F0 my-schedule_2.txt");
}

TEST(Printable, EscapesANulANewlineAndBytesAboveAscii) {
  EXPECT_EQ(printable(std::string("a\0b\nc\xff", 6)), "a\\x00b\\x0ac\\xff");
}

TEST(Printable, EscapesTheBackslashSoEscapesAreUnambiguous) {
  EXPECT_EQ(printable("a\\x00"), "a\\x5cx00");
}

TEST(Printable, ShortensLongTextAndSaysHowLongItWas) {
  EXPECT_EQ(printable(std::string(1000, 'x'), 4), "xxxx... (1000 bytes)");
}

}  // namespace
}  // namespace baton
