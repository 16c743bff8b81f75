#include "baton/data/text.h"

#include "baton/core/error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

namespace baton::data {
namespace {

TEST(TextTest, ReadsEveryByteOfTheDefaultCorpus) {
  const TextCorpus corpus;
  EXPECT_EQ(corpus.size(), static_cast<int64_t>(std::filesystem::file_size(kDefaultTextPath)));
  EXPECT_EQ(corpus.tokens().scalar_type(), torch::kUInt8);  // a byte a token, not eight
  EXPECT_GE(corpus.tokens().min().item<int64_t>(), 0);
  EXPECT_LT(corpus.tokens().max().item<int64_t>(), TextCorpus::kVocabSize);
  EXPECT_EQ(corpus.tokens()[0].item<int64_t>(), static_cast<int64_t>(' '));  // GPL-3 opens indented
}

TEST(TextTest, TargetsAreTheInputsShiftedByOneByte) {
  const TextCorpus corpus;
  at::Generator generator = make_generator(1);
  const Examples batch = corpus.sample_batch(4, 16, generator);
  ASSERT_EQ(batch.inputs.sizes(), (std::vector<int64_t>{4, 16}));
  ASSERT_EQ(batch.targets.sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(batch.inputs.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(batch.inputs.slice(1, 1), batch.targets.slice(1, 0, 15)));
}

TEST(TextTest, WindowsComeFromTheFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "baton-text-test.txt").string();
  std::ofstream(path) << "abcdefgh";
  const TextCorpus corpus(path);
  at::Generator generator = make_generator(2);
  const Examples batch = corpus.sample_batch(8, 3, generator);
  for (int64_t row = 0; row < 8; ++row) {
    const int64_t start = batch.inputs[row][0].item<int64_t>() - 'a';
    EXPECT_TRUE(torch::equal(batch.inputs[row], torch::arange(start, start + 3) + 'a'));
    EXPECT_TRUE(torch::equal(batch.targets[row], torch::arange(start + 1, start + 4) + 'a'));
  }
  std::filesystem::remove(path);
}

TEST(TextTest, TheSameGeneratorSeedGivesTheSameBatch) {
  const TextCorpus corpus;
  at::Generator a = make_generator(9);
  at::Generator b = make_generator(9);
  EXPECT_TRUE(
      torch::equal(corpus.sample_batch(3, 8, a).inputs, corpus.sample_batch(3, 8, b).inputs));
  EXPECT_FALSE(
      torch::equal(corpus.sample_batch(3, 8, a).inputs, corpus.sample_batch(3, 8, a).inputs));
}

std::string corpus_error(const std::string& path) {
  try {
    TextCorpus corpus(path);
  } catch (const baton::Error& error) {
    return error.what();
  }
  return "no error";
}

TEST(TextTest, AMissingFileIsAClearError) {
  EXPECT_EQ(corpus_error("/nonexistent/corpus.txt"),
            "[data.text] the text corpus /nonexistent/corpus.txt does not exist; name a text "
            "file with --text");
}

// Issue 16.6: --text /dev/zero was read without end (std::bad_alloc).
TEST(TextTest, DevZeroIsRefusedAsACharacterDevice) {
  EXPECT_EQ(corpus_error("/dev/zero"),
            "[data.text] the text corpus /dev/zero is a character device, not a regular file; "
            "name a text file with --text");
}

TEST(TextTest, AFolderIsRefusedAsAFolder) {
  EXPECT_EQ(corpus_error("/tmp"),
            "[data.text] the text corpus /tmp is a folder; name a text file with --text");
}

TEST(TextTest, AFileOverTheLimitIsRefusedBeforeItIsRead) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / "baton-text-too-large.txt";
  std::ofstream(path).close();
  std::filesystem::resize_file(path, kMaxTextBytes + 1);  // sparse: no disk, no time
  EXPECT_EQ(corpus_error(path.string()), "[data.text] the text corpus " + path.string() +
                                             " holds 1073741825 bytes, more than the limit of "
                                             "1 GiB");
  std::filesystem::remove(path);
}

TEST(TextTest, RejectsAContextAsLongAsTheCorpus) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "baton-text-short.txt").string();
  std::ofstream(path) << "abcd";
  const TextCorpus corpus(path);
  at::Generator generator = make_generator(0);
  EXPECT_THROW(corpus.sample_batch(1, 4, generator), baton::Error);
  EXPECT_NO_THROW(corpus.sample_batch(1, 3, generator));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace baton::data
