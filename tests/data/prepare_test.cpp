// prepare_dataset(): text to a Megatron dataset that reads back as the
// tokenizer's ids with the end-of-document id after each document; and
// SentencePiece trained, saved and loaded (skipped in a build without it).
#include "baton/data/prepare.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "baton/data/sentencepiece.h"
#include "baton/data/token_dataset.h"
#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing::HasSubstr;
using namespace testing_files;

std::vector<int64_t> ids_of(const TokenSpan& span) {
  std::vector<int64_t> ids(span.size());
  span.copy_to(ids.data());
  return ids;
}

TEST(Prepare, ByteLevelDocumentsReadBackAsTheirBytesAndTheEndOfDocumentId) {
  TemporaryFolder folder;
  write_file(folder / "in.txt", std::string("ab\n\n\xff\x00z", 7));
  DocumentReader documents({folder / "in.txt"}, /*per_line=*/true);
  const PrepareSummary summary = prepare_dataset(documents, *make_byte_tokenizer(), folder / "out");
  EXPECT_EQ(summary.totals.documents, 2);
  EXPECT_EQ(summary.totals.tokens, 7);
  EXPECT_EQ(summary.empty_documents, 1);
  EXPECT_EQ(summary.type, TokenType::kUint16);
  const TokenDataset dataset = TokenDataset::open_megatron(folder / "out");
  ASSERT_EQ(dataset.document_count(), 2);
  EXPECT_EQ(ids_of(dataset.document(0)), (std::vector<int64_t>{'a', 'b', 256}));
  EXPECT_EQ(ids_of(dataset.document(1)), (std::vector<int64_t>{255, 0, 'z', 256}));
  EXPECT_EQ(error_of([&] { dataset.check_vocab(kByteVocabSize); }), "no error");
}

TEST(Prepare, AnInputWithNoDocumentIsRefusedAndLeavesNoFile) {
  TemporaryFolder folder;
  write_file(folder / "blank.txt", "\n\n");
  DocumentReader documents({folder / "blank.txt"}, /*per_line=*/true);
  EXPECT_EQ(error_of([&] { prepare_dataset(documents, *make_byte_tokenizer(), folder / "out"); }),
            "[data.prepare] empty input: the 2 bytes of the inputs hold no document (2 empty "
            "ones skipped)");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(folder.path()), {}), 1);
}

// Lines of words drawn from a few, so that a small vocabulary learns them whole.
std::string sample_text() {
  const char* words[] = {"pipeline", "stage",    "micro-batch", "bubble", "rank", "schedule",
                         "forward",  "backward", "gradient",    "tensor", "the",  "of"};
  std::string text;
  uint64_t state = 1;
  for (int line = 0; line < 2000; ++line) {
    for (int word = 0; word < 8; ++word) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      text += std::string(word ? " " : "") + words[(state >> 33) % 12];
    }
    text += "\n";
  }
  return text;
}

TEST(SentencePiece, ATrainedModelLoadsAndEncodesDocumentsWithItsEosAfterEach) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  TemporaryFolder folder;
  write_file(folder / "text.txt", sample_text());
  DocumentReader documents({folder / "text.txt"}, /*per_line=*/true);
  std::string_view rest;
  documents.rewind();
  const std::string model = train_sentencepiece(
      [&](std::string* line) {
        if (!documents.next(&rest)) return false;
        *line = std::string(rest);
        return true;
      },
      SentencePieceTraining{300, 1, 10000, 1});
  const auto tokenizer = load_sentencepiece_model(model, "m.model");
  EXPECT_EQ(tokenizer->vocab_size(), 300);
  EXPECT_EQ(tokenizer->end_of_document_id(), 2);
  std::vector<int32_t> ids;
  tokenizer->encode("pipeline stage\n", &ids);
  EXPECT_LT(ids.size(), 8u);        // whole words, not letters
  EXPECT_EQ(ids.back(), 3 + '\n');  // byte fallback: <0x0A> follows unk, bos, eos
  const PrepareSummary summary = prepare_dataset(documents, *tokenizer, folder / "out");
  EXPECT_EQ(summary.totals.documents, 2000);
  const TokenDataset dataset = TokenDataset::open_megatron(folder / "out");
  for (int64_t d : {0, 1999}) EXPECT_EQ(ids_of(dataset.document(d)).back(), 2);
}

TEST(SentencePiece, AModelThatDoesNotLoadIsRefusedNamingIt) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  TemporaryFolder folder;
  write_file(folder / "bad.model", "not a model");
  EXPECT_THAT(error_of([&] { load_sentencepiece(folder / "bad.model"); }),
              HasSubstr("[data.sentencepiece] " + folder / "bad.model" +
                        " does not load as a SentencePiece model"));
  EXPECT_EQ(error_of([&] { load_sentencepiece(folder / "none.model"); }),
            "[data.sentencepiece] the model " + folder / "none.model" +
                " does not exist; name a SentencePiece .model file");
}

TEST(SentencePiece, AVocabularyTheTextCannotFillIsRefusedWithSentencePiecesReason) {
  if (!sentencepiece_available()) GTEST_SKIP() << "built without SentencePiece";
  std::vector<std::string> lines = {"a b c", "a b"};
  size_t next = 0;
  const std::string message = error_of([&] {
    train_sentencepiece(
        [&](std::string* line) {
          if (next == lines.size()) return false;
          *line = lines[next++];
          return true;
        },
        SentencePieceTraining{100000, 0, 1000, 1});
  });
  EXPECT_THAT(message, HasSubstr("[data.sentencepiece] cannot train a vocabulary of 100000 on "
                                 "the input: "));
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace baton::data
