// core/choices.h's parsers, the one place each choice is read from text,
// against every spelling the options table accepts (train/options.cpp), and
// core/executable.h's path against the kernel's view of this process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>
#include <string>
#include <string_view>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/core/executable.h"

namespace baton {
namespace {

using testing::HasSubstr;

TEST(Choices, EveryPrecisionReadsBackAsItsOwnName) {
  for (const char* name : {"fp32", "bf16", "fp16"}) {
    EXPECT_EQ(to_string(parse_precision(name)), name);
    ASSERT_TRUE(choice_named<Precision>(name).has_value()) << name;
    EXPECT_EQ(*choice_named<Precision>(name), parse_precision(name));
  }
  EXPECT_EQ(parse_precision("bf16"), Precision::Bf16);
  for (const char* bad : {"", "FP32", "float32", "fp8", "bf16 "}) {
    EXPECT_FALSE(choice_named<Precision>(bad).has_value()) << bad;
    try {
      parse_precision(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("expected fp32, bf16 or fp16")) << bad;
    }
  }
}

TEST(Choices, EveryRecomputeModeReadsBackAndExceptLastTakesBothSpellings) {
  for (const char* name : {"never", "except_last", "always", "selective"})
    EXPECT_EQ(to_string(parse_recompute(name)), name);
  EXPECT_EQ(parse_recompute("except-last"), Recompute::ExceptLast);
  EXPECT_EQ(parse_recompute("always"), Recompute::Always);
  try {
    parse_recompute("full");
    ADD_FAILURE() << "full was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown recompute mode \"full\""));
  }
}

TEST(Choices, TheOptimizerTheScheduleAndTheDeviceReadBackAndRefuseTheRest) {
  for (const char* name : {"sgd", "adam", "adamw"})
    EXPECT_EQ(to_string(parse_optimizer(name)), name);
  for (const char* name : {"constant", "cosine"})
    EXPECT_EQ(to_string(parse_lr_schedule(name)), name);
  for (const char* name : {"cpu", "cuda"}) EXPECT_EQ(to_string(parse_device(name)), name);
  EXPECT_EQ(parse_optimizer("adamw"), Optimizer::AdamW);
  EXPECT_EQ(parse_lr_schedule("cosine"), LrSchedule::Cosine);
  EXPECT_EQ(parse_device("cuda"), DeviceKind::Cuda);
  try {
    parse_optimizer("lamb");
    ADD_FAILURE() << "lamb was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown optimizer \"lamb\" (expected sgd, adam or adamw)"));
  }
  EXPECT_THROW(parse_lr_schedule("linear"), Error);
  for (const char* name : {"cuda:0", "cuda:7", "cuda:1234"})
    EXPECT_EQ(parse_device(name), DeviceKind::Cuda) << name;
  for (const char* name : {"cuda:", "cuda:-1", "cuda:x", "cuda:12345", "cuda0", "gpu", "CPU"})
    EXPECT_THROW(parse_device(name), Error) << name;
  try {
    parse_device("gpu");
    ADD_FAILURE() << "gpu was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown device \"gpu\" (expected cpu, cuda, or cuda:N"));
  }
}

TEST(Choices, EveryTransportReadsBackAndOthersAreRefusedByName) {
  for (const char* name : {"auto", "shm", "gloo"})
    EXPECT_EQ(to_string(parse_transport(name)), name);
  EXPECT_EQ(parse_transport("shm"), TransportKind::kShm);
  try {
    parse_transport("tcp");
    FAIL() << "tcp was read";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[comm] unknown transport \"tcp\" (expected auto, shm or gloo)");
  }
}

// Each list the parsers and the options table read: every value once, read
// back from its own name by both, and nothing else read.
template <typename E>
void expect_listed_values_read_back(size_t count) {
  std::set<std::string_view> names;
  for (const E value : ChoiceValues<E>::kAll) {
    const std::string_view name = to_string(value);
    EXPECT_TRUE(names.insert(name).second) << name << " is listed twice";
    ASSERT_TRUE(choice_named<E>(name).has_value()) << name;
    EXPECT_EQ(*choice_named<E>(name), value) << name;
  }
  EXPECT_EQ(names.size(), count);
  EXPECT_FALSE(choice_named<E>("").has_value());
  EXPECT_FALSE(choice_named<E>("none of these").has_value());
}

TEST(Choices, EachListedValueIsReadBackByItsOneName) {
  expect_listed_values_read_back<Precision>(3);
  expect_listed_values_read_back<Recompute>(4);
  expect_listed_values_read_back<Optimizer>(3);
  expect_listed_values_read_back<LrSchedule>(2);
  expect_listed_values_read_back<TransportKind>(3);
  // The one alias, which is not listed: recompute's older spelling.
  EXPECT_EQ(choice_named<Recompute>("except-last"), Recompute::ExceptLast);
  EXPECT_FALSE(choice_named<Precision>("except-last").has_value());
}

TEST(Executable, IsTheFileThisProcessRuns) {
  const std::string path = this_executable("[test]");
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), '/');
  struct stat mine {
  }, named{};
  ASSERT_EQ(::stat("/proc/self/exe", &mine), 0);
  ASSERT_EQ(::stat(path.c_str(), &named), 0);
  EXPECT_EQ(mine.st_ino, named.st_ino);
  EXPECT_EQ(mine.st_dev, named.st_dev);
}

}  // namespace
}  // namespace baton
