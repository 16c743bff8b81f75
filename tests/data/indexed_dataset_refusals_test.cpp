// Every way a Megatron .idx/.bin pair can be wrong is refused by
// TokenDataset::open_megatron in one line that names the file and the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "baton/data/indexed_dataset.h"
#include "baton/data/token_dataset.h"
#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing::HasSubstr;
using namespace testing_files;

// Three documents of 3, 1 and 4 uint16 tokens.
const std::vector<int32_t> kLengths = {3, 1, 4};
constexpr size_t kPointersAt = 34 + 4 * 3;
constexpr size_t kDocumentsAt = kPointersAt + 8 * 3;

template <typename T>
void poke(std::string& bytes, size_t at, T value) {
  std::memcpy(&bytes[at], &value, sizeof value);
}

class IndexedDatasetRefusals : public testing::Test {
 protected:
  // Writes `index` and a .bin of `bin_bytes` bytes; the message of opening them.
  std::string open_error(const std::string& index, size_t bin_bytes = 16) {
    write_file(prefix_ + ".idx", index);
    write_file(prefix_ + ".bin", std::string(bin_bytes, '\0'));
    const std::string message = error_of([&] { TokenDataset::open_megatron(prefix_); });
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  std::string good() const { return megatron_index(kLengths, 8, 2); }

  TemporaryFolder folder_;
  const std::string prefix_ = folder_ / "c";
};

TEST_F(IndexedDatasetRefusals, AGoodPairOpens) {
  EXPECT_EQ(open_error(good()), "no error");
}

TEST_F(IndexedDatasetRefusals, AnIndexShorterThanTheHeader) {
  EXPECT_THAT(open_error("MMIDIDX"),
              HasSubstr(prefix_ + ".idx holds 7 bytes, fewer than the 34-byte header"));
}

TEST_F(IndexedDatasetRefusals, AWrongMagic) {
  std::string index = good();
  index[0] = 'X';
  EXPECT_THAT(open_error(index), HasSubstr(prefix_ + ".idx starts with \"XMIDIDX\\x00\\x00\", "
                                                     "not the magic \"MMIDIDX\\x00\\x00\""));
}

TEST_F(IndexedDatasetRefusals, AnotherVersion) {
  std::string index = good();
  poke<uint64_t>(index, 9, 2);
  EXPECT_THAT(open_error(index), HasSubstr(".idx has version 2; baton reads version 1"));
}

TEST_F(IndexedDatasetRefusals, AFloatOrUnknownDtypeCode) {
  std::string index = good();
  index[17] = 7;
  EXPECT_THAT(open_error(index), HasSubstr(".idx has dtype code 7 (float32); token ids"));
  index[17] = 42;
  EXPECT_THAT(open_error(index), HasSubstr(".idx has dtype code 42; token ids are stored in one "
                                           "of Megatron's integer codes"));
}

TEST_F(IndexedDatasetRefusals, CountsThatDoNotFitTheFile) {
  std::string index = good();
  poke<uint64_t>(index, 18, 4);
  EXPECT_THAT(open_error(index),
              HasSubstr(".idx holds 102 bytes, but its header's 4 sequences and 4 document-index "
                        "entries need 114"));
  poke<uint64_t>(index, 18, uint64_t{1} << 62);
  EXPECT_THAT(open_error(index), HasSubstr("need more than 2^64"));
  EXPECT_THAT(open_error(good().substr(0, 101)), HasSubstr("holds 101 bytes"));
}

TEST_F(IndexedDatasetRefusals, AMultimodalIndex) {
  EXPECT_THAT(open_error(good() + std::string(3, '\0')),
              HasSubstr("leave one byte per sequence, the modes of a multimodal dataset"));
}

TEST_F(IndexedDatasetRefusals, ADocumentIndexThatDoesNotRunFromZeroToTheSequenceCount) {
  std::string index = good();
  poke<int64_t>(index, kDocumentsAt, 1);
  EXPECT_THAT(open_error(index), HasSubstr("document index entry 0 is 1; megatron-core's"));
  index = good();
  poke<int64_t>(index, kDocumentsAt + 16, 0);
  EXPECT_THAT(open_error(index), HasSubstr("document index entry 2 is 0, outside 1..3"));
  index = good();
  poke<int64_t>(index, kDocumentsAt + 24, 2);
  EXPECT_THAT(open_error(index), HasSubstr("the last document index entry is 2, not the "
                                           "sequence count 3"));
  index = good();
  poke<int64_t>(index, kDocumentsAt + 24, -5);
  EXPECT_THAT(open_error(index), HasSubstr("document index entry 3 is -5, outside 2..3"));
}

TEST_F(IndexedDatasetRefusals, NegativeLengthsAndPointersOutOfPlace) {
  std::string index = good();
  poke<int32_t>(index, 34 + 4, -1);
  EXPECT_THAT(open_error(index), HasSubstr("sequence 1 has length -1"));
  index = good();
  poke<int64_t>(index, kPointersAt + 8, 1000);
  EXPECT_THAT(open_error(index), HasSubstr("sequence 1 starts at byte 1000, not at byte 6"));
  index = good();
  poke<int32_t>(index, 34, 0x7fffffff);
  poke<int64_t>(index, kPointersAt + 8, int64_t{0x7fffffff} * 2);
  poke<int64_t>(index, kPointersAt + 16, int64_t{0x7fffffff} * 2 + 2);
  EXPECT_THAT(open_error(index), HasSubstr("holds 16 bytes, fewer than the 4294967304"));
}

TEST_F(IndexedDatasetRefusals, ABinShorterThanTheIndexSays) {
  EXPECT_THAT(open_error(good(), 15),
              HasSubstr(prefix_ + ".bin holds 15 bytes, fewer than the 16 (8 uint16 tokens) that " +
                        prefix_ + ".idx says"));
}

TEST_F(IndexedDatasetRefusals, AnIndexAndABinOfDifferentDatasets) {
  EXPECT_THAT(open_error(good(), 18),
              HasSubstr(".bin holds 18 bytes, but " + prefix_ +
                        ".idx describes 16 (8 uint16 tokens): the .idx and the .bin are of "
                        "different datasets"));
}

TEST_F(IndexedDatasetRefusals, AMissingFileOrAFolder) {
  EXPECT_THAT(error_of([&] { TokenDataset::open_megatron(folder_ / "none"); }),
              HasSubstr("[data.indexed] the index " + folder_ / "none.idx" + " does not exist"));
  write_file(prefix_ + ".idx", good());
  EXPECT_THAT(error_of([&] { TokenDataset::open_megatron(prefix_); }),
              HasSubstr("[data.indexed] the data " + prefix_ + ".bin does not exist"));
  EXPECT_THAT(error_of([&] { TokenDataset::open_megatron(folder_.path() + "/"); }),
              HasSubstr(".idx does not exist"));
}

TEST_F(IndexedDatasetRefusals, ATokenIdOutsideTheVocabularyNamesTheFileAndByteOffset) {
  write_file(prefix_ + ".idx", good());
  std::vector<uint16_t> ids = {1, 2, 3, 4, 5, 900, 7, 1000};
  write_file(prefix_ + ".bin", std::string(reinterpret_cast<const char*>(ids.data()), 16));
  const TokenDataset dataset = TokenDataset::open_megatron(prefix_);
  EXPECT_EQ(error_of([&] { dataset.check_vocab(1001); }), "no error");
  EXPECT_EQ(error_of([&] { dataset.check_vocab(900); }),
            "[data] " + prefix_ +
                ".bin: token id 900 at byte offset 10 (token 5) is outside the "
                "vocabulary 0..899");
}

}  // namespace
}  // namespace baton::data
