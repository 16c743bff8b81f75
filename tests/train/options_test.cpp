// The options table (baton/train/options.h) against its readers, writer and
// docs/cli.md: each derived surface agrees with the one table.
#include "baton/train/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/train/optimizer.h"

namespace baton::train {
namespace {

using testing::HasSubstr;

// A valid value other than the default for every option, set in `config`.
void set_other_value(const Option& option, TrainConfig& config) {
  std::visit(
      [&](auto member) {
        using T = std::decay_t<decltype(config.*member)>;
        T& value = config.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          const std::vector<std::string> choices = choices_of(option);
          value = choices.empty() ? "a \"quoted\" \\ value" : choices.back();
          if (value == TrainConfig{}.*member) value = choices.front();
        } else if constexpr (kIsChoice<T>) {
          const std::vector<std::string> names = choices_of(option);
          parse_choice(option, names.back(), config);
          if (value == TrainConfig{}.*member) parse_choice(option, names.front(), config);
        } else if constexpr (std::is_same_v<T, bool>) {
          value = !value;
        } else if constexpr (std::is_floating_point_v<T>) {
          value = option.check == Check::kUnitInterval ? 0.125 : 12.5;
        } else {
          value = static_cast<T>(option.check == Check::kRange ? option.high : value + 3);
        }
      },
      option.member);
}

TEST(OptionsTest, EveryKeyIsOnceInTheTableAndEveryFlagIsItsKeyDashed) {
  std::set<std::string> keys, flags;
  for (const Option& option : options()) {
    EXPECT_TRUE(keys.emplace(option.key).second) << option.key;
    EXPECT_TRUE(flags.emplace(option.flag).second) << option.flag;
    std::string dashed = "--" + std::string(option.key);
    for (char& ch : dashed) ch = ch == '_' ? '-' : ch;
    EXPECT_EQ(option.flag, dashed);
    EXPECT_FALSE(option.help.empty()) << option.flag;
  }
  // Defaults often stand for "not given" (0 steps) and pass as such.
  EXPECT_NO_THROW(check_config(TrainConfig{}));
}

// The --emit-config writer and the TOML reader agree on every key and type.
TEST(OptionsTest, EveryOptionWrittenToTomlReadsBackEqual) {
  TrainConfig written;
  std::vector<std::string> keys;
  for (const Option& option : options()) {
    set_other_value(option, written);
    keys.emplace_back(option.key);
  }
  const std::string text = config_toml(written, keys, "a header\nof two lines");
  EXPECT_EQ(text.rfind("# a header\n# of two lines\n", 0), 0u);
  TrainConfig read;
  load_toml_text(text, "written.toml", read);
  for (const Option& option : options()) {
    std::visit([&](auto member) { EXPECT_EQ(read.*member, written.*member) << option.key; },
               option.member);
  }
}

// Each check refuses a value just outside it, by key in TOML, by flag in check_config.
TEST(OptionsTest, EveryCheckRefusesTheValueBeyondItInTomlAndInTheConfig) {
  int checked = 0;
  for (const Option& option : options()) {
    std::string bad;
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(TrainConfig{}.*member)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            if (option.check == Check::kCount || option.check == Check::kRange) {
              bad = std::to_string(option.low - 1);
            }
          } else if constexpr (std::is_floating_point_v<T>) {
            if (option.check == Check::kFiniteAboveZero) bad = "0.0";
            if (option.check == Check::kFiniteAtLeastZero) bad = "-0.5";
            if (option.check == Check::kUnitInterval) bad = "1.0";
          }
        },
        option.member);
    if (bad.empty()) continue;
    ++checked;
    TrainConfig config;
    try {
      load_toml_text(std::string(option.key) + " = " + bad + "\n", "t.toml", config);
      ADD_FAILURE() << option.key << " = " << bad << " was read";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("key \"" + std::string(option.key) + "\"")) << e.what();
    }
  }
  EXPECT_GE(checked, 15);  // the counts, ranges and real numbers of options.cpp
}

TEST(OptionsTest, NamesOutsideTheChoicesAreRefusedListingThem) {
  // A closed choice is refused where it is read, naming the file and key.
  TrainConfig config;
  try {
    load_toml_text("lr_schedule = \"linear\"\n", "t.toml", config);
    FAIL() << "an unknown lr schedule was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[train.config] t.toml: key \"lr_schedule\": unknown lr schedule \"linear\" "
                 "(expected constant or cosine)");
  }
  EXPECT_THROW(parse_choice(*option_by_key("recompute"), "sometimes", config), Error);
  // A registry name is refused by check_config.
  config = TrainConfig{};
  config.schedule = "fancy";
  EXPECT_THROW(check_config(config), Error);
}

// The closed choices are enums in TrainConfig, set by name where a flag or
// key is read: every name of the table sets the value its parser reads.
TEST(OptionsTest, AChoiceReadByNameIsTheEnumItsParserGives) {
  TrainConfig c;
  load_toml_text(
      "precision = \"bf16\"\nrecompute = \"except-last\"\noptimizer = \"sgd\"\n"
      "lr_schedule = \"cosine\"\ntransport = \"gloo\"\n",
      "t.toml", c);
  EXPECT_EQ(c.precision, Precision::Bf16);
  EXPECT_EQ(c.recompute, Recompute::ExceptLast);  // the older spelling, as parse_recompute's
  EXPECT_EQ(c.optimizer, Optimizer::Sgd);
  EXPECT_EQ(c.lr_schedule, LrSchedule::Cosine);
  EXPECT_EQ(c.transport, TransportKind::kGloo);
  // Written back by its one name.
  EXPECT_EQ(config_toml(c, {"recompute", "transport"}),
            "recompute = \"except_last\"\ntransport = \"gloo\"\n");
}

// core/choices.h's parsers read the table's names: each accepts the
// table's choices and refuses others. (--device has no choices in the
// table: check_config refuses it with parse_device's own message; its
// "cuda:N" takes any N.)
TEST(OptionsTest, EveryChoiceTheTableAcceptsIsWhatItsParserReads) {
  const std::map<std::string, std::function<void(std::string_view)>> parsers = {
      {"precision", [](std::string_view t) { parse_precision(t); }},
      {"recompute", [](std::string_view t) { parse_recompute(t); }},
      {"optimizer", [](std::string_view t) { parse_optimizer(t); }},
      {"lr_schedule", [](std::string_view t) { parse_lr_schedule(t); }},
      {"transport", [](std::string_view t) { parse_transport(t); }},
  };
  for (const auto& [key, parse] : parsers) {
    const Option* option = option_by_key(key);
    ASSERT_NE(option, nullptr) << key;
    const std::vector<std::string> choices = choices_of(*option);
    ASSERT_FALSE(choices.empty()) << key;
    for (const std::string& choice : choices)
      EXPECT_NO_THROW(parse(choice)) << key << " " << choice;
    EXPECT_THROW(parse("none-of-" + key), Error) << key;
  }
}

TEST(OptionsTest, TheResumeChangesAreTheAllowedOptionsAndTheData) {
  std::vector<std::string> expected;
  for (const Option& option : options()) {
    if (option.resume == Resume::kAllowed) expected.emplace_back(option.flag.substr(2));
  }
  expected.emplace_back("data");
  EXPECT_EQ(resume_change_names(), expected);
  EXPECT_GE(expected.size(), 6u);
}

// docs/cli.md's train table: one row per option (or a row naming several),
// each row's TOML keys in the order of its flags, and no row for a flag the
// table lacks (besides --config and --nproc).
TEST(OptionsTest, DocsCliTableNamesEveryOptionWithItsKey) {
  std::ifstream in(BATON_DOCS_CLI);
  ASSERT_TRUE(in) << BATON_DOCS_CLI;
  std::string line;
  while (std::getline(in, line) && line != "### Train flags and TOML keys") {
  }
  ASSERT_TRUE(in) << "no \"### Train flags and TOML keys\" in docs/cli.md";
  std::map<std::string, std::string> key_of_flag;
  const std::regex flag_re("`(--[a-z0-9-]+)"), key_re("`([a-z_0-9]+)`");
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("| `--", 0) != 0) {
      if (table) break;
      continue;
    }
    table = true;
    // `on\|off` is one cell.
    for (size_t at = line.find("\\|"); at != std::string::npos; at = line.find("\\|", at))
      line.replace(at, 2, "/");
    std::vector<std::string> cells;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(cell);
    ASSERT_GE(cells.size(), 3u) << line;
    std::vector<std::string> row_flags, row_keys;
    for (std::sregex_iterator it(cells[0].begin(), cells[0].end(), flag_re), end; it != end; ++it)
      row_flags.push_back((*it)[1]);
    for (std::sregex_iterator it(cells[1].begin(), cells[1].end(), key_re), end; it != end; ++it)
      row_keys.push_back((*it)[1]);
    for (size_t i = 0; i < row_flags.size(); ++i) {
      key_of_flag[row_flags[i]] = i < row_keys.size() ? row_keys[i] : "";
    }
  }
  for (const Option& option : options()) {
    const auto it = key_of_flag.find(std::string(option.flag));
    if (it == key_of_flag.end()) {
      ADD_FAILURE() << "docs/cli.md's train table has no row for " << option.flag;
      continue;
    }
    EXPECT_EQ(it->second, option.key) << "docs/cli.md's row of " << option.flag;
    key_of_flag.erase(it);
  }
  key_of_flag.erase("--config");
  key_of_flag.erase("--nproc");
  for (const auto& [flag, key] : key_of_flag) {
    ADD_FAILURE() << "docs/cli.md's train table documents " << flag << ", which is no option";
  }
}

// Every value a choice accepts (the models, the registry's schedules, the
// precisions, recompute modes, optimizers, balances, ...) is named in
// docs/cli.md as `value`, so a choice added to the code without its docs
// fails here.
TEST(OptionsTest, DocsCliNamesEveryChoiceTheTableAccepts) {
  std::ifstream in(BATON_DOCS_CLI);
  ASSERT_TRUE(in) << BATON_DOCS_CLI;
  std::stringstream text;
  text << in.rdbuf();
  const std::string docs = text.str();
  // The option's own table row ("| `--precision fp32\|bf16\|fp16` | ..."), or "".
  auto row_of = [&](std::string_view flag) {
    const std::string start = "\n| `" + std::string(flag) + " ";
    const size_t at = docs.find(start);
    return at == std::string::npos ? std::string()
                                   : docs.substr(at + 1, docs.find('\n', at + 1) - at - 1);
  };
  int checked = 0;
  for (const Option& option : options()) {
    const std::string row = row_of(option.flag);
    for (const std::string& choice : choices_of(option)) {
      ++checked;
      const std::regex word("(^|[^a-z0-9_-])" + choice + "($|[^a-z0-9_-])");
      EXPECT_TRUE(docs.find("`" + choice + "`") != std::string::npos ||
                  std::regex_search(row, word))
          << "docs/cli.md never names " << option.flag << "'s value `" << choice << "`";
    }
  }
  EXPECT_GE(checked, 30);  // models, schedules and the rest: the test read them
}

// The warm-up against its formula, lr * (step + 1) / N, then cosine over the rest.
TEST(OptionsTest, WarmupStepsRaiseTheLearningRateLinearlyThenTheScheduleFollows) {
  TrainConfig c;
  c.lr = 0.1;
  c.warmup_steps = 4;
  for (int step = 0; step < 4; ++step) {
    EXPECT_DOUBLE_EQ(learning_rate(c, step, 12), 0.1 * (step + 1) / 4);
  }
  EXPECT_DOUBLE_EQ(learning_rate(c, 7, 12), 0.1);
  c.lr_schedule = LrSchedule::Cosine;
  EXPECT_DOUBLE_EQ(learning_rate(c, 4, 12), 0.1);     // cos(0)
  EXPECT_NEAR(learning_rate(c, 8, 12), 0.05, 1e-15);  // cos(pi / 2), halfway
  EXPECT_NEAR(learning_rate(c, 11, 12), 0.05 * (1 + std::cos(M_PI * 7 / 8)), 1e-15);
  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(learning_rate(c, 0, 12), 0.1);
}

}  // namespace
}  // namespace baton::train
