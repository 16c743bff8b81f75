// baton data prepare: tokenize text into Megatron-LM's indexed dataset
// (PREFIX.bin, PREFIX.idx) with SentencePiece or baton's byte tokenizer.
// baton data inspect: open a dataset as training will (every check), say
// what it holds, and print its token ids. Torch-free; baton/data does the work.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/core/printable.h"
#include "baton/data/prepare.h"
#include "baton/data/sentencepiece.h"
#include "baton/data/text_documents.h"
#include "baton/data/token_dataset.h"
#include "baton/data/tokenizer.h"
#include "tools/cli.h"
#include "tools/output_paths.h"

namespace baton::cli {
namespace {

constexpr uint64_t kLongInputBytes = 1 << 20;

struct PrepareFlags {
  std::vector<std::string> inputs;
  std::string output;
  int64_t vocab = 0;
  std::string tokenizer;
  bool byte_level = false;
  bool doc_per_line = false;
  uint32_t seed = 0;
};

std::string megabytes(uint64_t bytes) {
  char text[32];
  if (bytes < 100000) {
    std::snprintf(text, sizeof text, "%.1f kB", bytes / 1e3);
  } else {
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  }
  return text;
}

std::string rate(double count, double seconds, const char* unit) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f %s/s", seconds > 0 ? count / seconds / 1e6 : 0.0, unit);
  return text;
}

std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", value);
  return text;
}

void print_progress(const data::PrepareProgress& p) {
  const std::string line = detail::concat(
      "baton: data prepare: ", megabytes(p.bytes_read), " of ", megabytes(p.total_bytes), ", ",
      p.documents, " documents, ", p.tokens, " tokens; ", rate(p.bytes_read, p.seconds, "MB"), ", ",
      rate(p.tokens, p.seconds, "M tokens"), "\n");
  std::cerr << line << std::flush;
}

// The lines of every document, for training: each without its newline.
std::function<bool(std::string*)> training_lines(data::DocumentReader& documents) {
  auto rest = std::make_shared<std::string_view>();
  documents.rewind();
  return [&documents, rest](std::string* line) {
    while (true) {
      if (rest->empty() && !documents.next(rest.get())) return false;
      const size_t end = rest->find('\n');
      *line = std::string(rest->substr(0, end));
      *rest = end == std::string_view::npos ? std::string_view() : rest->substr(end + 1);
      if (!line->empty() && line->back() == '\r') line->pop_back();
      if (!line->empty()) return true;
    }
  };
}

int run_prepare(const CLI::App& cmd, const PrepareFlags& f) {
  for (const CLI::Option* option : cmd.get_options()) {
    BATON_CHECK(
        option->get_name() == "--input" || option->get_expected_max() == 0 || option->count() <= 1,
        "[data.prepare] ", option->get_name(), " given more than once");
  }
  const bool train = cmd.count("--vocab") > 0;
  const int choices = int{train} + int{!f.tokenizer.empty()} + int{f.byte_level};
  BATON_CHECK(choices == 1, "[data.prepare] give one of --vocab N (train a SentencePiece model), ",
              "--tokenizer MODEL or --byte-level", choices > 1 ? ", not several" : "");
  BATON_CHECK(!train || f.vocab >= 1, "[data.prepare] --vocab ", f.vocab,
              ": a vocabulary needs at least one id (a SentencePiece model a few hundred)");
  std::vector<NamedPath> inputs;
  for (const std::string& input : f.inputs) inputs.push_back({"--input", input});
  inputs.push_back({"--tokenizer", f.tokenizer});
  std::vector<NamedPath> outputs = {{"--output", f.output + ".bin"},
                                    {"--output", f.output + ".idx"}};
  if (train) outputs.push_back({"--output", f.output + ".model"});
  check_output_paths("[data.prepare]", outputs, inputs);
  data::DocumentReader documents(f.inputs, f.doc_per_line);
  BATON_CHECK(documents.total_bytes() > 0, "[data.prepare] empty input: the ",
              f.inputs.size() == 1 ? "--input file is" : "--input files are", " empty");

  std::unique_ptr<data::Tokenizer> tokenizer;
  if (f.byte_level) {
    tokenizer = data::make_byte_tokenizer();
  } else if (!f.tokenizer.empty()) {
    tokenizer = data::load_sentencepiece(f.tokenizer);
  } else {
    data::SentencePieceTraining training;
    training.vocab_size = f.vocab;
    training.seed = f.seed;
    training.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    // Long inputs only, as the progress lines: a short one trains in a moment.
    if (documents.total_bytes() >= kLongInputBytes) {
      std::cerr << "baton: data prepare: training a SentencePiece unigram vocabulary of " << f.vocab
                << " on " << megabytes(documents.total_bytes()) << " (at most "
                << training.max_sentences << " lines)\n"
                << std::flush;
    }
    const std::string model = data::train_sentencepiece(training_lines(documents), training);
    write_output("[data.prepare]", outputs.back(), model);
    tokenizer = data::load_sentencepiece_model(model, outputs.back().path);
  }
  const data::PrepareSummary s =
      data::prepare_dataset(documents, *tokenizer, f.output, print_progress);
  const data::PrepareProgress& t = s.totals;
  std::cout << "wrote " << s.bin_path << " and " << s.idx_path << ": " << t.documents
            << " documents, " << t.tokens << " tokens (" << data::token_type_name(s.type)
            << ", vocabulary " << s.vocab_size << ", end of document " << s.end_of_document_id
            << ", " << tokenizer->description() << ") from " << megabytes(t.bytes_read) << " in "
            << seconds(t.seconds) << ": " << rate(t.bytes_read, t.seconds, "MB") << ", "
            << rate(t.tokens, t.seconds, "M tokens");
  if (s.empty_documents > 0) std::cout << "; " << s.empty_documents << " empty documents skipped";
  std::cout << "\n";
  flush_stdout("[data.prepare]");
  return 0;
}

struct InspectFlags {
  std::string data;
  std::string format = "megatron";
  int64_t vocab = 0;
  bool print_tokens = false;
};

// Each document's ids on a line, separated by spaces.
void print_documents(const data::TokenDataset& dataset) {
  std::string line;
  std::vector<int64_t> ids;
  char number[24];
  for (int64_t d = 0; d < dataset.document_count(); ++d) {
    const data::TokenSpan span = dataset.document(d);
    ids.resize(static_cast<size_t>(span.size()));
    span.copy_to(ids.data());
    line.clear();
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) line += ' ';
      line.append(number, std::to_chars(number, number + sizeof number, ids[i]).ptr);
    }
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
}

int run_inspect(const CLI::App& cmd, const InspectFlags& f) {
  check_given_once(cmd);
  const data::DataFormat format = data::parse_data_format(f.format, "--data-format");
  BATON_CHECK(cmd.count("--vocab") == 0 || f.vocab >= 1, "[data.inspect] --vocab ", f.vocab,
              ": a vocabulary needs at least one id");
  const data::TokenDataset dataset = data::TokenDataset::open(f.data, format);
  if (f.vocab > 0) dataset.check_vocab(f.vocab);
  const data::DatasetIdentity& id = dataset.identity();
  char crc[16];
  std::snprintf(crc, sizeof crc, "0x%08x", id.index_crc32);
  std::cout << printable(f.data, 256) << ": " << data::data_format_name(format) << ", "
            << data::token_type_name(dataset.type()) << ", " << dataset.document_count()
            << " documents, " << dataset.token_count() << " tokens; ";
  if (format == data::DataFormat::kMegatron) {
    std::cout << ".idx " << id.index_bytes << " bytes, CRC-32 " << crc << ", .bin ";
  } else {
    std::cout << "CRC-32 of the first and last MiB " << crc << ", ";
  }
  std::cout << id.data_bytes << " bytes";
  if (f.vocab > 0) std::cout << "; every id below " << f.vocab;
  std::cout << "\n" << std::flush;
  if (f.print_tokens) print_documents(dataset);
  flush_stdout("[data.inspect]");
  return 0;
}

}  // namespace

Action add_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "Prepare datasets of token ids for training");
  data->require_subcommand(1);
  auto f = std::make_shared<PrepareFlags>();
  CLI::App* cmd = data->add_subcommand(
      "prepare",
      "Tokenize text into Megatron-LM's indexed dataset PREFIX.bin and PREFIX.idx, an "
      "end-of-document id after each document");
  take_repeated_options(cmd);
  cmd->add_option("--input", f->inputs,
                  "A text file: .jsonl holds a document a line in \"text\"; any other file is one "
                  "document (or one a line with --doc-per-line). Repeat for more files")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--output", f->output, "The prefix of the dataset's files")->required();
  cmd->add_option("--vocab", f->vocab,
                  "Train a SentencePiece unigram model of this many ids on the input, written to "
                  "PREFIX.model");
  cmd->add_option("--tokenizer", f->tokenizer, "Tokenize with this SentencePiece .model");
  cmd->add_flag("--byte-level", f->byte_level,
                "Each byte is its id (0-255), the end of a document 256: no model, vocabulary 257");
  cmd->add_flag("--doc-per-line", f->doc_per_line,
                "Each line of a file that is not .jsonl is a document");
  cmd->add_option("--seed", f->seed, "Seeds the sampling of training lines with --vocab")
      ->capture_default_str();
  auto g = std::make_shared<InspectFlags>();
  CLI::App* inspect = data->add_subcommand(
      "inspect", "Open a dataset with every check training makes and say what it holds");
  take_repeated_options(inspect);
  inspect->add_option("--data", g->data, "The dataset: PREFIX of PREFIX.idx/.bin, or a flat file")
      ->required();
  inspect->add_option("--data-format", g->format, "megatron, flat-uint16 or flat-uint32")
      ->capture_default_str();
  inspect->add_option("--vocab", g->vocab, "Check that every token id is below it");
  inspect->add_flag("--print-tokens", g->print_tokens,
                    "Print each document's token ids, one document a line");
  return [f, cmd, g, inspect] {
    try {
      if (inspect->parsed()) return run_inspect(*inspect, *g);
      return run_prepare(*cmd, *f);
    } catch (const WriteError& e) {
      print_error(e.what());
      return 1;
    }
  };
}

}  // namespace baton::cli
