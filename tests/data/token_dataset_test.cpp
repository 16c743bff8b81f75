// nanoGPT's flat token files, the data formats' names, and the TokenSpan
// view both formats read through.
#include "baton/data/token_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "baton/core/crc32.h"
#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing::HasSubstr;
using namespace testing_files;

template <typename T>
std::string bytes_of(const std::vector<T>& ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(T));
}

TEST(FlatTokens, AUint16FileIsOneDocumentReadInPlace) {
  TemporaryFolder folder;
  write_file(folder / "train.bin", bytes_of<uint16_t>({3, 65535, 0, 9}));
  const TokenDataset dataset = TokenDataset::open_flat(folder / "train.bin", TokenType::kUint16);
  EXPECT_EQ(dataset.format(), DataFormat::kFlatUint16);
  EXPECT_EQ(dataset.token_count(), 4);
  EXPECT_EQ(dataset.document_count(), 1);
  EXPECT_EQ(dataset.document(0).size(), 4);
  EXPECT_EQ(dataset.tokens(1, 1)[0], 65535);
  EXPECT_EQ(dataset.index_path(), "");
}

TEST(FlatTokens, AUint32FileReadsIdsAbove65535) {
  TemporaryFolder folder;
  write_file(folder / "t.bin", bytes_of<uint32_t>({100000, 1}));
  const TokenDataset dataset = TokenDataset::open(folder / "t.bin", DataFormat::kFlatUint32);
  std::vector<int64_t> ids(2);
  dataset.tokens(0, 2).copy_to(ids.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{100000, 1}));
  EXPECT_THAT(error_of([&] { dataset.check_vocab(50257); }),
              HasSubstr("t.bin: token id 100000 at byte offset 0 (token 0) is outside the "
                        "vocabulary 0..50256"));
}

TEST(FlatTokens, ASizeThatIsNotWholeTokensIsRefused) {
  TemporaryFolder folder;
  write_file(folder / "odd.bin", "abc");
  EXPECT_EQ(error_of([&] { TokenDataset::open_flat(folder / "odd.bin", TokenType::kUint16); }),
            "[data.flat] " + folder / "odd.bin" +
                " holds 3 bytes, not a whole number of uint16 tokens (2 bytes each); is it "
                "another format?");
  EXPECT_THAT(error_of([&] { TokenDataset::open_flat(folder.path(), TokenType::kUint16); }),
              HasSubstr("the token file " + folder.path() + " is a folder"));
}

TEST(FlatTokens, TheIdentityCoversTheFirstAndLastMebibyteAndTheSize) {
  TemporaryFolder folder;
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  write_file(folder / "big.bin", bytes);
  const DatasetIdentity identity =
      TokenDataset::open_flat(folder / "big.bin", TokenType::kUint16).identity();
  const uint32_t head = crc32(bytes.data(), 1 << 20);
  EXPECT_EQ(identity.index_crc32, crc32(bytes.data() + (2 << 20), 1 << 20, head));
  EXPECT_EQ(identity.data_bytes, bytes.size());
  EXPECT_EQ(identity.token_count, int64_t{3} << 19);
  // A byte in the middle is not covered; one at the end is.
  bytes.back() ^= 1;
  write_file(folder / "big.bin", bytes);
  EXPECT_NE(TokenDataset::open_flat(folder / "big.bin", TokenType::kUint16).identity(), identity);
}

TEST(DataFormats, NamesParseBackAndOthersAreRefused) {
  for (DataFormat format :
       {DataFormat::kMegatron, DataFormat::kFlatUint16, DataFormat::kFlatUint32}) {
    EXPECT_EQ(parse_data_format(data_format_name(format), "--data-format"), format);
  }
  EXPECT_EQ(error_of([] { parse_data_format("flat-int8", "--data-format"); }),
            "[data] --data-format flat-int8 is not a data format; use megatron, flat-uint16 or "
            "flat-uint32");
}

TEST(TokenSpans, SubspansStayInPlaceAndFindTheFirstIdOutsideTheVocabulary) {
  std::vector<int16_t> ids(10000, 5);
  ids[9000] = -1;
  ids[9500] = 300;
  const TokenSpan span(ids.data(), static_cast<int64_t>(ids.size()), TokenType::kInt16);
  EXPECT_EQ(span.first_outside_vocab(301), 9000);  // negative
  EXPECT_EQ(span.subspan(9001, 999).first_outside_vocab(300), 499);
  EXPECT_EQ(span.subspan(0, 9000).first_outside_vocab(6), -1);
  EXPECT_EQ(span.subspan(9500, 1).data(), &ids[9500]);
}

TEST(TokenTypes, MegatronCodesAndThePreprocessingRule) {
  TokenType type;
  EXPECT_TRUE(token_type_from_megatron_code(8, &type));
  EXPECT_EQ(type, TokenType::kUint16);
  EXPECT_FALSE(token_type_from_megatron_code(6, &type));
  EXPECT_FALSE(token_type_from_megatron_code(9, &type));  // baton's uint32 has no Megatron code
  EXPECT_FALSE(token_type_from_megatron_code(0, &type));
  EXPECT_EQ(token_type_for_vocab(65499), TokenType::kUint16);
  EXPECT_EQ(token_type_for_vocab(65500), TokenType::kInt32);
}

}  // namespace
}  // namespace baton::data
