#include "baton/data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unordered_map>

#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/printable.h"

namespace baton::data {
namespace {

// A .model is a protobuf of the pieces and their scores: Llama's is 500 KB.
constexpr uint64_t kMaxModelBytes = uint64_t{1} << 30;

// SentencePiece's messages may span lines and end in a space: one line, trimmed.
std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  return printable(text, 512);
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& model_bytes, const std::string& name) : name_(name) {
    const auto status = processor_.LoadFromSerializedProto(model_bytes);
    BATON_CHECK(status.ok(), "[data.sentencepiece] ", printable(name, 256),
                " does not load as a SentencePiece model: ", one_line(status.ToString()));
    BATON_CHECK(processor_.eos_id() >= 0, "[data.sentencepiece] ", printable(name, 256),
                " has no end-of-sentence piece (eos_id -1), which baton appends to each "
                "document; train it with --eos_id");
  }
  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  int32_t end_of_document_id() const override { return processor_.eos_id(); }
  void encode(std::string_view text, std::vector<int32_t>* ids) const override {
    const auto status = processor_.Encode(text, &scratch());
    BATON_CHECK(status.ok(), "[data.sentencepiece] ", printable(name_, 256),
                " cannot encode a document: ", one_line(status.ToString()));
    ids->insert(ids->end(), scratch().begin(), scratch().end());
  }
  std::string description() const override { return "SentencePiece " + name_; }

 private:
  // Encode() fills a vector of int; one per thread keeps encode() const and thread-safe.
  static std::vector<int>& scratch() {
    thread_local std::vector<int> ids;
    return ids;
  }

  std::string name_;
  sentencepiece::SentencePieceProcessor processor_;
};

class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::function<bool(std::string*)>& next) : next_(next) { Next(); }
  bool done() const override { return done_; }
  void Next() override { done_ = !next_(&line_); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::function<bool(std::string*)>& next_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

bool sentencepiece_available() {
  return true;
}

std::unique_ptr<Tokenizer> load_sentencepiece_model(const std::string& model_bytes,
                                                    const std::string& name) {
  return std::make_unique<SentencePieceTokenizer>(model_bytes, name);
}

std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path) {
  const std::string bytes = read_input_file("[data.sentencepiece] the model", path, kMaxModelBytes,
                                            "; name a SentencePiece .model file");
  return load_sentencepiece_model(bytes, path);
}

std::string train_sentencepiece(const std::function<bool(std::string*)>& next_line,
                                const SentencePieceTraining& options) {
  const std::unordered_map<std::string, std::string> arguments = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9995"},
      {"input_sentence_size", std::to_string(options.max_sentences)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(options.threads)},
      {"minloglevel", "2"},
  };
  sentencepiece::SetRandomGeneratorSeed(options.seed);
  LineIterator lines(next_line);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(arguments, &lines, &model);
  BATON_CHECK(status.ok(), "[data.sentencepiece] cannot train a vocabulary of ", options.vocab_size,
              " on the input: ", one_line(status.ToString()));
  return model;
}

}  // namespace baton::data
