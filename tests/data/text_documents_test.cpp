// The documents of prepare's inputs: .jsonl lines' "text", whole files, or
// lines; empty documents skipped; bad lines and bad paths refused by name.
#include "baton/data/text_documents.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing::HasSubstr;
using namespace testing_files;

std::vector<std::string> all(DocumentReader& reader) {
  std::vector<std::string> documents;
  std::string_view text;
  while (reader.next(&text)) documents.emplace_back(text);
  return documents;
}

TEST(DocumentReader, JsonLinesGiveTheirTextAndOtherFilesAreOneDocumentEach) {
  TemporaryFolder folder;
  write_file(folder / "a.jsonl",
             "{\"text\": \"first\\nline\", \"id\": 1}\n\n{\"text\": \"\"}\r\n{\"text\": \"x\"}");
  write_file(folder / "b.txt", "one\ntwo\n");
  DocumentReader reader({folder / "a.jsonl", folder / "b.txt"}, /*per_line=*/false);
  EXPECT_EQ(all(reader), (std::vector<std::string>{"first\nline", "x", "one\ntwo\n"}));
  EXPECT_EQ(reader.documents(), 3);
  EXPECT_EQ(reader.empty_documents(), 1);
  EXPECT_EQ(reader.bytes_read(), reader.total_bytes());
  reader.rewind();
  EXPECT_EQ(all(reader).size(), 3u);
}

TEST(DocumentReader, DocPerLineSplitsOtherFilesAtNewlinesAndSkipsEmptyLines) {
  TemporaryFolder folder;
  write_file(folder / "b.txt", "one\r\n\ntwo\nthree");
  DocumentReader reader({folder / "b.txt"}, /*per_line=*/true);
  EXPECT_EQ(all(reader), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(reader.empty_documents(), 1);
}

TEST(DocumentReader, AJsonLineThatIsNotJsonOrHasNoTextIsRefusedByFileAndLine) {
  TemporaryFolder folder;
  write_file(folder / "bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3\n");
  DocumentReader reader({folder / "bad.jsonl"}, false);
  EXPECT_THAT(error_of([&] { all(reader); }),
              HasSubstr("[data.prepare] " + folder / "bad.jsonl" + " line 2 is not JSON: "));
  write_file(folder / "other.jsonl", "{\"body\": \"ok\"}\n");
  DocumentReader other({folder / "other.jsonl"}, false);
  EXPECT_EQ(error_of([&] { all(other); }),
            "[data.prepare] " + folder / "other.jsonl" +
                " line 1 has no string field \"text\"; a .jsonl input holds one JSON object a "
                "line, its document in \"text\"");
}

TEST(DocumentReader, AMissingInputOrAFolderIsRefusedBeforeAnythingIsRead) {
  TemporaryFolder folder;
  EXPECT_EQ(error_of([&] { DocumentReader({folder / "none.txt"}, false); }),
            "[data.prepare] --input " + folder / "none.txt" + " does not exist");
  EXPECT_EQ(error_of([&] { DocumentReader({folder.path()}, false); }),
            "[data.prepare] --input " + folder.path() + " is a folder; name a file");
}

}  // namespace
}  // namespace baton::data
