#include "baton/data/prepare.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/core/printable.h"
#include "baton/data/indexed_dataset_builder.h"

namespace baton::data {
namespace {

// Removes the temporary files unless released: an error leaves nothing behind.
class TemporaryFiles {
 public:
  explicit TemporaryFiles(std::vector<std::string> paths) : paths_(std::move(paths)) {}
  ~TemporaryFiles() {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  void release() { paths_.clear(); }

 private:
  std::vector<std::string> paths_;
};

void rename_into_place(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw WriteError(detail::concat("[data.prepare] cannot write ", printable(to, 256), ": ",
                                    std::strerror(errno)));
  }
}

}  // namespace

PrepareSummary prepare_dataset(DocumentReader& documents, const Tokenizer& tokenizer,
                               const std::string& output_prefix, const ProgressCallback& progress) {
  using Clock = std::chrono::steady_clock;
  PrepareSummary summary;
  summary.bin_path = output_prefix + ".bin";
  summary.idx_path = output_prefix + ".idx";
  summary.vocab_size = tokenizer.vocab_size();
  summary.end_of_document_id = tokenizer.end_of_document_id();
  summary.type = token_type_for_vocab(summary.vocab_size);
  BATON_ASSERT(summary.end_of_document_id >= 0 && summary.end_of_document_id < summary.vocab_size,
               "end of document ", summary.end_of_document_id, " vocab ", summary.vocab_size);
  // The process id keeps two runs writing the same prefix from taking each other's files.
  const std::string suffix = ".tmp" + std::to_string(::getpid());
  const std::string bin_temporary = summary.bin_path + suffix;
  const std::string idx_temporary = summary.idx_path + suffix;
  TemporaryFiles temporaries({bin_temporary, idx_temporary});
  IndexedDatasetBuilder builder(bin_temporary, summary.type);

  documents.rewind();
  const auto start = Clock::now();
  auto next_report = start + std::chrono::seconds(1);
  PrepareProgress& totals = summary.totals;
  totals.total_bytes = documents.total_bytes();
  std::vector<int32_t> ids;
  std::string_view text;
  while (documents.next(&text)) {
    ids.clear();
    tokenizer.encode(text, &ids);
    ids.push_back(summary.end_of_document_id);
    builder.add_document(ids.data(), ids.size());
    totals.tokens += static_cast<int64_t>(ids.size());
    if (progress && Clock::now() >= next_report) {
      totals.bytes_read = documents.bytes_read();
      totals.documents = documents.documents();
      totals.seconds = std::chrono::duration<double>(Clock::now() - start).count();
      progress(totals);
      next_report = Clock::now() + std::chrono::seconds(1);
    }
  }
  totals.bytes_read = documents.bytes_read();
  totals.documents = documents.documents();
  summary.empty_documents = documents.empty_documents();
  BATON_CHECK(totals.documents > 0, "[data.prepare] empty input: the ", totals.total_bytes,
              " bytes of the inputs hold no document",
              summary.empty_documents > 0
                  ? detail::concat(" (", summary.empty_documents, " empty ones skipped)")
                  : std::string());
  builder.finalize(idx_temporary);
  rename_into_place(bin_temporary, summary.bin_path);
  rename_into_place(idx_temporary, summary.idx_path);
  temporaries.release();
  totals.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summary;
}

}  // namespace baton::data
