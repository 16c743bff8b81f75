#include "baton/train/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"

namespace baton::train {
namespace {

using testing::HasSubstr;

// The message of the baton::Error that loading `text` throws ("" if none).
std::string load_error(const std::string& text) {
  TrainConfig config;
  try {
    load_toml_text(text, "t.toml", config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, TomlTextSetsOnlyTheKeysItHas) {
  TrainConfig config;
  load_toml_text("model = \"gpt\"\npp = 4\nlr = 0.5\nstep_barrier = true\n", "t.toml", config);
  EXPECT_EQ(config.model, "gpt");
  EXPECT_EQ(config.pp, 4);
  EXPECT_EQ(config.lr, 0.5);
  EXPECT_TRUE(config.step_barrier);
  EXPECT_EQ(config.microbatches, TrainConfig{}.microbatches);
}

// Like --text (issue 16.6): --config /dev/zero was read until memory ran out.
TEST(ConfigTest, AConfigThatIsADeviceIsRefusedUnread) {
  TrainConfig config;
  try {
    load_toml("/dev/zero", config);
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[train.config] --config /dev/zero is a character device, not a "
                 "regular file; name a TOML file");
  }
}

TEST(ConfigTest, MalformedTomlTextNamesItsLineAndColumn) {
  EXPECT_THAT(load_error("model = \"mlp\"\npp = [1, 2\n"), HasSubstr("[train.config] t.toml:"));
  EXPECT_THAT(load_error("modle = \"mlp\"\n"), HasSubstr("unknown key \"modle\""));
}

// Found by fuzz/config_toml_fuzz.cpp: toml++ 3.3.0 reached __builtin_unreachable()
// (undefined behaviour) on a character such as U+00E9 where whitespace may be.
TEST(ConfigTest, NonAsciiCharacterThatTomlPlusPlusMisreadsIsRefusedWithItsPlace) {
  EXPECT_EQ(load_error("pp = 2\nlr = 0.1 \xc3\xa9\n"),
            "[train.config] t.toml:2:10: non-ASCII character outside a string or comment (TOML "
            "keys and values are ASCII)");
  EXPECT_THAT(load_error("\xcc\xaa"), HasSubstr("t.toml:1:1: non-ASCII character outside"));
  EXPECT_THAT(load_error("text = \"\"\"\\\n\xc2\xa7\"\"\"\n"),
              HasSubstr("t.toml:2:1: non-ASCII character after a line-ending backslash"));
  EXPECT_THAT(load_error("text = \"\"\"\\\xc3\xa9\"\"\"\n"),
              HasSubstr("non-ASCII character after a backslash in a multi-line string"));
  EXPECT_THAT(load_error("text = \"\"\"a\"\"\"\" \xc3\xa9\n"), HasSubstr("outside a string"));
  // Quotes and brackets inside a bare value start no string for toml++.
  EXPECT_THAT(load_error("pp = 999'''9\xc7\xbc\n"), HasSubstr("t.toml:1:13: non-ASCII"));
  EXPECT_THAT(load_error("pp= 2[\"\"\"a\xc7\xaf\"\n"), HasSubstr("t.toml:1:11: non-ASCII"));
}

// Found by fuzz/config_toml_fuzz.cpp: toml++ cast 99e93 to an int64
// (undefined behaviour) when an integer key was read as one.
TEST(ConfigTest, AFloatTooLargeForAnIntegerKeyIsRefusedAsNotAnInteger) {
  EXPECT_EQ(load_error("pp = 99e93\n"), "[train.config] t.toml: key \"pp\" must be an integer");
  EXPECT_EQ(load_error("seed = 1.5\n"), "[train.config] t.toml: key \"seed\" must be an integer");
}

TEST(ConfigTest, NonAsciiTextInStringsAndCommentsIsKept) {
  TrainConfig config;
  load_toml_text(
      "\xef\xbb\xbf# caf\xc3\xa9\ntext = \"/data/caf\xc3\xa9.txt\" # \xc3\xa9\n"
      "metrics = '\xc3\xa9'\nsvg = \"\"\"\xc3\xa9\\n\xc3\xa9\"\"\"\n"
      "trace = '''\n\xc3\xa9'''\n",
      "t.toml", config);
  EXPECT_EQ(config.text, "/data/caf\xc3\xa9.txt");
  EXPECT_EQ(config.metrics, "\xc3\xa9");
  EXPECT_EQ(config.svg, "\xc3\xa9\n\xc3\xa9");
  EXPECT_EQ(config.trace, "\xc3\xa9");
  // A quoted table name is read (and refused as a key, escaped).
  EXPECT_THAT(load_error("[\"caf\xc3\xa9\"]\n"), HasSubstr("unknown key \"caf\\xc3\\xa9\""));
}

}  // namespace
}  // namespace baton::train
