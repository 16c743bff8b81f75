#include "baton/train/data_source.h"

#include <algorithm>
#include <optional>

#include "baton/core/error.h"
#include "baton/data/augment.h"
#include "baton/data/batches.h"
#include "baton/data/fashion_mnist.h"
#include "baton/data/synthetic.h"
#include "baton/data/text.h"

namespace baton::train {
namespace {

// Offsets augmentation's generator seeds from the synthetic and text sources'.
constexpr uint64_t kAugmentStream = uint64_t{1} << 40;

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

void check_data(const TrainConfig& c) {
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

std::unique_ptr<DataSource> make_data_source(const TrainConfig& c, DataRoles roles) {
  if (c.model == "mlp") return std::make_unique<SyntheticSource>(c, roles);
  if (c.model == "gpt" || c.model == "llama") return std::make_unique<TextSource>(c, roles);
  return std::make_unique<ImageSource>(c, roles);
}

}  // namespace baton::train
