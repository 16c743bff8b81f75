// Megatron-LM's indexed dataset: the builder writes megatron-core's byte
// layout (spelled out here from its _IndexWriter, independently of the
// builder), the reader reads it back token for token, and every way a .idx
// or .bin can be wrong is refused in one line naming the file.
#include "baton/data/indexed_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "baton/data/indexed_dataset_builder.h"
#include "baton/data/token_dataset.h"
#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing::HasSubstr;
using namespace testing_files;

const std::vector<std::vector<int32_t>> kDocuments = {{5, 6, 7}, {1}, {100, 0, 2, 3}};

std::string build(const TemporaryFolder& folder, TokenType type) {
  const std::string prefix = folder / "corpus";
  IndexedDatasetBuilder builder(prefix + ".bin", type);
  for (const auto& document : kDocuments) builder.add_document(document.data(), document.size());
  builder.finalize(prefix + ".idx");
  return prefix;
}

TEST(IndexedDataset, TheBuilderWritesMegatronCoresBytes) {
  TemporaryFolder folder;
  const std::string prefix = build(folder, TokenType::kUint16);
  EXPECT_EQ(read_file(prefix + ".idx"), megatron_index({3, 1, 4}, 8, 2));
  const std::vector<uint16_t> ids = {5, 6, 7, 1, 100, 0, 2, 3};
  EXPECT_EQ(read_file(prefix + ".bin"),
            std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 2));
}

class IndexedDatasetTypes : public testing::TestWithParam<TokenType> {};

TEST_P(IndexedDatasetTypes, ReadsBackWhatTheBuilderWroteTokenForToken) {
  TemporaryFolder folder;
  const TokenDataset dataset = TokenDataset::open_megatron(build(folder, GetParam()));
  EXPECT_EQ(dataset.type(), GetParam());
  EXPECT_EQ(dataset.token_count(), 8);
  ASSERT_EQ(dataset.document_count(), 3);
  for (int64_t d = 0; d < 3; ++d) {
    const TokenSpan span = dataset.document(d);
    std::vector<int64_t> ids(span.size());
    span.copy_to(ids.data());
    EXPECT_EQ(ids, std::vector<int64_t>(kDocuments[d].begin(), kDocuments[d].end()));
  }
  EXPECT_EQ(dataset.document_start(2), 4);
  EXPECT_EQ(dataset.tokens(2, 3)[2], 100);
  // A view into the mapped .bin, not a copy.
  EXPECT_EQ(dataset.tokens(0, 8).data(), dataset.document(0).data());
}

INSTANTIATE_TEST_SUITE_P(Types, IndexedDatasetTypes,
                         testing::Values(TokenType::kUint8, TokenType::kInt8, TokenType::kInt16,
                                         TokenType::kUint16, TokenType::kInt32, TokenType::kInt64));

TEST(IndexedDataset, DocumentsOfSeveralSequencesAndEmptyDocumentsKeepTheirBounds) {
  TemporaryFolder folder;
  const std::string prefix = folder / "multi";
  IndexedDatasetBuilder builder(prefix + ".bin", TokenType::kInt32);
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  builder.add_sequence(ids.data(), 2);
  builder.add_sequence(ids.data() + 2, 3);
  builder.end_document();
  builder.end_document();  // a document of no sequence
  builder.add_document(ids.data(), 1);
  builder.finalize(prefix + ".idx");
  const TokenDataset dataset = TokenDataset::open_megatron(prefix);
  ASSERT_EQ(dataset.document_count(), 3);
  EXPECT_EQ(dataset.document(0).size(), 5);
  EXPECT_EQ(dataset.document(1).size(), 0);
  EXPECT_EQ(dataset.document(2)[0], 1);
}

TEST(IndexedDataset, AnIdThatDoesNotFitTheTypeIsRefusedByTheBuilder) {
  TemporaryFolder folder;
  IndexedDatasetBuilder builder(folder / "x.bin", TokenType::kUint16);
  const std::vector<int32_t> ids = {1, 70000};
  EXPECT_THAT(error_of([&] { builder.add_document(ids.data(), ids.size()); }),
              HasSubstr("token id 70000 (token 1) does not fit the dataset's 16-bit elements"));
}

TEST(IndexedDataset, TheIdentityIsTheIndexCrcAndTheSizes) {
  TemporaryFolder folder;
  const std::string prefix = build(folder, TokenType::kUint16);
  const DatasetIdentity first = TokenDataset::open_megatron(prefix).identity();
  EXPECT_EQ(first.index_bytes, read_file(prefix + ".idx").size());
  EXPECT_EQ(first.data_bytes, 16u);
  EXPECT_EQ(first.token_count, 8);
  EXPECT_EQ(first, TokenDataset::open_megatron(prefix).identity());
  // The same sizes, one length moved from a document to another: another dataset.
  IndexedDatasetBuilder builder(prefix + ".bin", TokenType::kUint16);
  const std::vector<int32_t> ids = {5, 6, 7, 1, 100, 0, 2, 3};
  builder.add_document(ids.data(), 4);
  builder.add_document(ids.data() + 4, 1);
  builder.add_document(ids.data() + 5, 3);
  builder.finalize(prefix + ".idx");
  const DatasetIdentity second = TokenDataset::open_megatron(prefix).identity();
  EXPECT_EQ(second.index_bytes, first.index_bytes);
  EXPECT_NE(second, first);
}

}  // namespace
}  // namespace baton::data
