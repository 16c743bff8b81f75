#include "baton/train/data_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>

#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/printable.h"
#include "baton/data/augment.h"
#include "baton/data/batches.h"
#include "baton/data/fashion_mnist.h"
#include "baton/data/samples.h"
#include "baton/data/synthetic.h"
#include "baton/data/text.h"
#include "baton/data/token_dataset.h"

namespace baton::train {
namespace {

// Offsets augmentation's generator seeds from the synthetic and text sources'.
constexpr uint64_t kAugmentStream = uint64_t{1} << 40;

// The pieces of a SentencePiece .model: the count of ModelProto's field 1
// (repeated SentencePiece pieces), read off the protobuf wire format. Read
// here, not by SentencePiece, which cannot share a process with LibTorch
// (tools/torch/data_forward.cpp). -1 when the bytes do not parse.
int64_t model_pieces(const std::string& bytes) {
  size_t at = 0;
  auto varint = [&](uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(bytes[at++]);
      *value |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80u) == 0) return true;
    }
    return false;
  };
  int64_t pieces = 0;
  while (at < bytes.size()) {
    uint64_t key = 0, length = 0;
    if (!varint(&key)) return -1;
    switch (key & 7) {
      case 0:
        if (!varint(&length)) return -1;
        break;
      case 1:
        at += 8;
        break;
      case 2:
        if (!varint(&length) || length > bytes.size() - at) return -1;
        at += length;
        if ((key >> 3) == 1) ++pieces;
        break;
      case 5:
        at += 4;
        break;
      default:
        return -1;
    }
    if (at > bytes.size()) return -1;
  }
  return pieces;
}

data::DataFormat data_format(const TrainConfig& c) {
  return data::parse_data_format(c.data_format, "--data-format");
}

// --data's token count from the files' sizes alone, without mapping them: the
// .bin's bytes over its id's bytes (the .idx's dtype code, at byte 17).
int64_t tokens_on_disk(const TrainConfig& c) {
  std::error_code error;
  const data::DataFormat format = data_format(c);
  if (format != data::DataFormat::kMegatron) {
    const auto bytes = static_cast<int64_t>(std::filesystem::file_size(c.data, error));
    return error ? 0 : bytes / (format == data::DataFormat::kFlatUint16 ? 2 : 4);
  }
  std::ifstream index(c.data + ".idx", std::ios::binary);
  char header[18] = {};
  index.read(header, sizeof header);
  data::TokenType type = data::TokenType::kUint16;
  if (!index || !data::token_type_from_megatron_code(static_cast<uint8_t>(header[17]), &type))
    return 0;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(c.data + ".bin", error));
  return error ? 0 : bytes / static_cast<int64_t>(data::token_bytes(type));
}

// Windows of a tokenized corpus (data/samples.h): the batch of step s is
// global samples [first + (s - step) * batch, ...) of the seeded order; each
// window's first context tokens are inputs, its last targets. Only this
// replica's share of the rows is read.
class TokenSource : public DataSource {
 public:
  TokenSource(const TrainConfig& c, const std::string& path, DataRoles roles, int replica,
              bool shuffle)
      : c_(c), roles_(roles), replica_(replica) {
    // A middle rank maps nothing; the others the files alone (never read whole).
    if (!roles.inputs && !roles.targets) return;
    dataset_.emplace(data::TokenDataset::open(path, data_format(c)));
    order_.emplace(dataset_->token_count(), c.context, c.seed, path, shuffle);
    if (c.in_rank && !c.launcher_checked) dataset_->check_vocab(vocabulary(c));  // torchrun
  }
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    if (!dataset_) return {};
    const data::SampleRange share = data::dp_share(step, c_.batch, c_.dp, replica_);
    return rows(sample_of_step(step), share.begin - step * c_.batch, share.size(), c_.batch);
  }
  // The same on every rank, a middle one too: from the files' sizes.
  int64_t steps_per_epoch() const override {
    return (tokens_on_disk(c_) - 1) / c_.context / c_.batch;
  }
  torch::Tensor zero_inputs(int64_t rows) const override {
    return torch::zeros({rows, c_.context}, torch::kLong);
  }
  void resume_at(int64_t step, int64_t next_sample) override {
    first_step_ = step;
    first_sample_ = next_sample;
  }
  int64_t sample_of_step(int64_t step) const override {
    return first_sample_ + (step - first_step_) * c_.batch;
  }
  // The held-out use: samples [begin, begin + count) in order, whole on every replica.
  std::pair<torch::Tensor, torch::Tensor> read(int64_t begin, int64_t count) {
    if (!dataset_) return {};
    return rows(begin, 0, count, count);
  }

 private:
  // `count` windows from global sample `first + skip` into rows [skip,
  // skip + count) of `total` rows; the rest stay 0.
  std::pair<torch::Tensor, torch::Tensor> rows(int64_t first, int64_t skip, int64_t count,
                                               int64_t total) {
    torch::Tensor inputs = torch::zeros({total, c_.context}, torch::kLong);
    torch::Tensor targets = torch::zeros({total, c_.context}, torch::kLong);
    std::vector<int64_t> window(c_.context + 1);
    for (int64_t r = skip; r < skip + count; ++r) {
      const int64_t offset = order_->token_offset(first + r);
      dataset_->tokens(offset, c_.context + 1).copy_to(window.data());
      std::copy(window.begin(), window.end() - 1, inputs[r].data_ptr<int64_t>());
      std::copy(window.begin() + 1, window.end(), targets[r].data_ptr<int64_t>());
    }
    return {roles_.inputs ? inputs : torch::Tensor(), roles_.targets ? targets : torch::Tensor()};
  }

  TrainConfig c_;
  DataRoles roles_;
  int replica_;
  std::optional<data::TokenDataset> dataset_;
  std::optional<data::SampleOrder> order_;
  int64_t first_step_ = 0;
  int64_t first_sample_ = 0;
};

// --valid: the first eval_batches batches of the held-out corpus, in order.
class ValidSource : public DataSource {
 public:
  ValidSource(const TrainConfig& c, DataRoles roles)
      : tokens_(c, c.valid, roles, /*replica=*/0, /*shuffle=*/false),
        count_(int64_t{c.eval_batches} * c.batch) {}  // check_data: the set holds as many
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t) override { return {}; }
  int64_t steps_per_epoch() const override { return 0; }
  torch::Tensor zero_inputs(int64_t rows) const override { return tokens_.zero_inputs(rows); }
  int64_t test_size() const override { return count_; }
  std::pair<torch::Tensor, torch::Tensor> test_rows(int64_t begin, int64_t rows) override {
    return tokens_.read(begin, rows);
  }

 private:
  TokenSource tokens_;
  int64_t count_;
};

data::FashionMnistOptions fashion_mnist_options(const TrainConfig& c) {
  data::FashionMnistOptions options;
  if (!c.data_dir.empty()) options.source_dir(c.data_dir);
  if (!c.cache_dir.empty()) options.cache_dir(c.cache_dir);
  return options;
}

// Shuffled batches over Fashion-MNIST, epoch after epoch: the images held as
// their bytes and normalized per batch (bitwise the rows of the whole split
// normalized), only the parts the roles read.
class ImageSource : public DataSource {
 public:
  ImageSource(const TrainConfig& c, DataRoles roles)
      : batches_(load(c, roles, data::Split::kTrain),
                 data::BatchesOptions(c.batch).seed(c.seed).drop_last(true)),
        test_(load(c, roles, data::Split::kTest)),
        roles_(roles),
        augment_(c.augment),
        shift_(c.augment_shift),
        seed_(c.seed) {
    BATON_CHECK(batches_.size() > 0, "[train.data] batch ", c.batch,
                " is larger than the training set");
  }
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    const int64_t epoch = step / batches_.size();
    if (epoch != batches_.epoch()) batches_.set_epoch(epoch);
    data::Examples b = batches_[step % batches_.size()];
    if (b.inputs.defined()) b.inputs = data::normalize_fashion_mnist(b.inputs);
    if (augment_ && b.inputs.defined()) {
      // A function of (seed, step), as the batch itself: a resume sees the same images.
      at::Generator gen = data::make_generator(seed_ * 1000003 + kAugmentStream + step);
      data::AugmentOptions options;
      options.shift = shift_;
      options.fill = -data::kFashionMnistMean / data::kFashionMnistStd;  // black, normalised
      b.inputs = data::augment_images(b.inputs, options, gen);
    }
    return {b.inputs, roles_.targets ? b.targets : torch::Tensor()};
  }
  int64_t steps_per_epoch() const override { return batches_.size(); }
  torch::Tensor zero_inputs(int64_t rows) const override {
    return torch::zeros({rows, 1, 28, 28}, torch::kFloat32);
  }
  int64_t test_size() const override { return test_.size(); }
  std::pair<torch::Tensor, torch::Tensor> test_rows(int64_t begin, int64_t rows) override {
    auto part = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, begin, rows) : t; };
    const torch::Tensor images = part(test_.inputs);
    return {images.defined() ? data::normalize_fashion_mnist(images) : images,
            roles_.targets ? part(test_.targets) : torch::Tensor()};
  }

 private:
  // A middle rank reads neither part: it holds the labels alone, 60000 and
  // 10000 int64s, for the batch order and the test set's size.
  static data::Examples load(const TrainConfig& c, DataRoles roles, data::Split split) {
    return data::load_fashion_mnist_bytes(
        split, fashion_mnist_options(c),
        data::FashionMnistParts{roles.inputs, roles.targets || !roles.inputs});
  }

  data::Batches batches_;
  data::Examples test_;
  DataRoles roles_;
  bool augment_;
  int shift_;
  uint64_t seed_;
};

// Synthetic classification: a fresh batch per step, drawn from (seed, step);
// a middle rank draws nothing.
class SyntheticSource : public DataSource {
 public:
  SyntheticSource(const TrainConfig& c, DataRoles roles) : c_(c), roles_(roles) {}
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    if (!roles_.inputs && !roles_.targets) return {};
    data::Examples b = data::synthetic_classification(data::SyntheticOptions()
                                                          .samples(c_.batch)
                                                          .features(c_.in_features)
                                                          .classes(c_.classes)
                                                          .seed(c_.seed * 1000003 + step));
    return held(b);
  }
  int64_t steps_per_epoch() const override { return 0; }
  torch::Tensor zero_inputs(int64_t rows) const override {
    return torch::zeros({rows, c_.in_features}, torch::kFloat32);
  }
  int64_t test_size() const override { return kTestRows; }
  std::pair<torch::Tensor, torch::Tensor> test_rows(int64_t begin, int64_t rows) override {
    if (!roles_.inputs && !roles_.targets) return {};
    data::Examples t = data::synthetic_classification(data::SyntheticOptions()
                                                          .samples(kTestRows)
                                                          .features(c_.in_features)
                                                          .classes(c_.classes)
                                                          .seed(c_.seed + 0x5eed));
    auto [inputs, targets] = held(t);
    auto part = [&](const torch::Tensor& x) { return x.defined() ? x.narrow(0, begin, rows) : x; };
    return {part(inputs), part(targets)};
  }

 private:
  static constexpr int64_t kTestRows = 1024;
  std::pair<torch::Tensor, torch::Tensor> held(const data::Examples& b) const {
    return {roles_.inputs ? b.inputs : torch::Tensor(),
            roles_.targets ? b.targets : torch::Tensor()};
  }

  TrainConfig c_;
  DataRoles roles_;
};

// Random windows of a text file, drawn from (seed, step); a middle rank
// reads no file.
class TextSource : public DataSource {
 public:
  TextSource(const TrainConfig& c, DataRoles roles) : c_(c), roles_(roles) {
    if (!roles.inputs && !roles.targets) return;
    corpus_.emplace(c.text.empty() ? data::kDefaultTextPath : c.text);
    BATON_CHECK(corpus_->size() > c.context + 1, "[train.data] ", corpus_->path(), " holds ",
                corpus_->size(), " bytes, too few for a context of ", c.context);
  }
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    if (!corpus_) return {};
    at::Generator gen = data::make_generator(c_.seed * 1000003 + step);
    data::Examples b = corpus_->sample_batch(c_.batch, c_.context, gen);
    return {roles_.inputs ? b.inputs : torch::Tensor(),
            roles_.targets ? b.targets : torch::Tensor()};
  }
  int64_t steps_per_epoch() const override { return 0; }
  torch::Tensor zero_inputs(int64_t rows) const override {
    return torch::zeros({rows, c_.context}, torch::kLong);
  }

 private:
  TrainConfig c_;
  DataRoles roles_;
  std::optional<data::TextCorpus> corpus_;
};

}  // namespace

int64_t vocabulary(const TrainConfig& c) {
  if (c.data.empty()) return data::TextCorpus::kVocabSize;
  const std::string model = c.data + ".model";
  std::error_code error;
  if (std::filesystem::is_regular_file(model, error)) {
    const int64_t pieces =
        model_pieces(read_input_file("[train.data] --data's tokenizer", model, uint64_t{1} << 30,
                                     "; a SentencePiece .model from baton data prepare"));
    BATON_CHECK(pieces > 0, "[train.data] ", printable(model, 256),
                " is not a SentencePiece model (no pieces); prepare the data again");
    BATON_CHECK(c.vocab == 0 || c.vocab == pieces, "[train.data] --vocab ", c.vocab,
                " disagrees with ", printable(model, 256), ", a vocabulary of ", pieces,
                "; leave --vocab out");
    return pieces;
  }
  const std::string first_file =
      data_format(c) == data::DataFormat::kMegatron ? c.data + ".idx" : c.data;
  BATON_CHECK(c.vocab > 0 || std::filesystem::exists(first_file, error), "[train.data] --data ",
              printable(c.data, 256), ": ", printable(first_file, 256),
              " does not exist (write a dataset with baton data prepare --output PREFIX)");
  BATON_CHECK(c.vocab > 0, "[train.data] --data ", printable(c.data, 256), " has no ",
              printable(model, 256),
              " to give the vocabulary; pass --vocab N (257 for "
              "baton data prepare --byte-level)");
  return c.vocab;
}

nlohmann::json dataset_identity(const TrainConfig& c) {
  if (c.data.empty()) return nullptr;
  const data::TokenDataset dataset = data::TokenDataset::open(c.data, data_format(c));
  const data::DatasetIdentity& id = dataset.identity();
  return {{"path", c.data},
          {"index_crc32", id.index_crc32},
          {"index_bytes", id.index_bytes},
          {"data_bytes", id.data_bytes},
          {"tokens", id.token_count}};
}

std::unique_ptr<DataSource> make_valid_source(const TrainConfig& c, DataRoles roles) {
  if (c.valid.empty()) return nullptr;
  return std::make_unique<ValidSource>(c, roles);
}

void check_data(const TrainConfig& c) {
  if (!c.data.empty()) {
    // Once per job, before ranks start (a rank's reading stages check under
    // torchrun, TokenSource): the files, one sample at least, enough held-out
    // samples, every id below the vocabulary (a pass over the .bin).
    const int64_t vocab = vocabulary(c);
    if (c.in_rank) return;
    for (const std::string& path : {c.data, c.valid}) {
      if (path.empty()) continue;
      const data::TokenDataset dataset = data::TokenDataset::open(path, data_format(c));
      const data::SampleOrder order(dataset.token_count(), c.context, c.seed, path);
      const int64_t wanted = int64_t{c.eval_batches} * c.batch;
      BATON_CHECK(path != c.valid || order.samples_per_epoch() >= wanted, "[train.data] --valid ",
                  printable(path, 256), " holds ", order.samples_per_epoch(), " samples of ",
                  c.context + 1, " tokens, fewer than --eval-batches ", c.eval_batches,
                  " x --batch ", c.batch, " = ", wanted);
      dataset.check_vocab(vocab);
    }
    return;
  }
  if (c.model == "gpt" || c.model == "llama") TextSource(c, DataRoles{});
  if (c.model == "cnn" || c.model == "resnet")
    data::prepare_fashion_mnist(fashion_mnist_options(c));
}

DataRoles data_roles(const schedule::Schedule& lowered, int pp_rank) {
  const std::vector<int> stages = schedule::Placement(lowered).stages_of_rank(pp_rank);
  auto holds = [&](int stage) {
    return std::find(stages.begin(), stages.end(), stage) != stages.end();
  };
  return DataRoles{holds(0), holds(lowered.stages - 1)};
}

std::unique_ptr<DataSource> make_data_source(const TrainConfig& c, DataRoles roles, int replica) {
  if (!c.data.empty()) return std::make_unique<TokenSource>(c, c.data, roles, replica, true);
  if (c.model == "mlp") return std::make_unique<SyntheticSource>(c, roles);
  if (c.model == "gpt" || c.model == "llama") return std::make_unique<TextSource>(c, roles);
  return std::make_unique<ImageSource>(c, roles);
}

}  // namespace baton::train
