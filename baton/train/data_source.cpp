#include "baton/train/data_source.h"

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

// Shuffled batches over a fixed example set, epoch after epoch.
class ExampleSource : public DataSource {
 public:
  ExampleSource(data::Examples train, data::Examples test, const TrainConfig& c)
      : batches_(std::move(train), data::BatchesOptions(c.batch).seed(c.seed).drop_last(true)),
        test_(std::move(test)),
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
    if (augment_) {
      // A function of (seed, step), as the batch itself: a resume sees the same images.
      at::Generator gen = data::make_generator(seed_ * 1000003 + kAugmentStream + step);
      data::AugmentOptions options;
      options.shift = shift_;
      options.fill = -data::kFashionMnistMean / data::kFashionMnistStd;  // black, normalised
      b.inputs = data::augment_images(b.inputs, options, gen);
    }
    return {b.inputs, b.targets};
  }
  int64_t steps_per_epoch() const override { return batches_.size(); }
  std::pair<torch::Tensor, torch::Tensor> test_set() override {
    return {test_.inputs, test_.targets};
  }

 private:
  data::Batches batches_;
  data::Examples test_;
  bool augment_;
  int shift_;
  uint64_t seed_;
};

// Synthetic classification: a fresh batch per step, drawn from (seed, step).
class SyntheticSource : public DataSource {
 public:
  explicit SyntheticSource(const TrainConfig& c) : c_(c) {}
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    data::Examples b = data::synthetic_classification(data::SyntheticOptions()
                                                          .samples(c_.batch)
                                                          .features(c_.in_features)
                                                          .classes(c_.classes)
                                                          .seed(c_.seed * 1000003 + step));
    return {b.inputs, b.targets};
  }
  int64_t steps_per_epoch() const override { return 0; }
  std::pair<torch::Tensor, torch::Tensor> test_set() override {
    data::Examples t = data::synthetic_classification(data::SyntheticOptions()
                                                          .samples(1024)
                                                          .features(c_.in_features)
                                                          .classes(c_.classes)
                                                          .seed(c_.seed + 0x5eed));
    return {t.inputs, t.targets};
  }

 private:
  TrainConfig c_;
};

// Random windows of a text file, drawn from (seed, step).
class TextSource : public DataSource {
 public:
  explicit TextSource(const TrainConfig& c)
      : corpus_(c.text.empty() ? data::kDefaultTextPath : c.text), c_(c) {
    BATON_CHECK(corpus_.size() > c.context + 1, "[train.data] ", corpus_.path(), " holds ",
                corpus_.size(), " bytes, too few for a context of ", c.context);
  }
  std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) override {
    at::Generator gen = data::make_generator(c_.seed * 1000003 + step);
    data::Examples b = corpus_.sample_batch(c_.batch, c_.context, gen);
    return {b.inputs, b.targets};
  }
  int64_t steps_per_epoch() const override { return 0; }

 private:
  data::TextCorpus corpus_;
  TrainConfig c_;
};

data::FashionMnistOptions fashion_mnist_options(const TrainConfig& c) {
  data::FashionMnistOptions options;
  if (!c.data_dir.empty()) options.source_dir(c.data_dir);
  if (!c.cache_dir.empty()) options.cache_dir(c.cache_dir);
  return options;
}

}  // namespace

void check_data(const TrainConfig& c) {
  if (c.model == "gpt" || c.model == "llama") TextSource{c};
  if (c.model == "cnn" || c.model == "resnet")
    data::prepare_fashion_mnist(fashion_mnist_options(c));
}

std::unique_ptr<DataSource> make_data_source(const TrainConfig& c) {
  if (c.model == "mlp") return std::make_unique<SyntheticSource>(c);
  if (c.model == "gpt" || c.model == "llama") return std::make_unique<TextSource>(c);
  const data::FashionMnistOptions options = fashion_mnist_options(c);
  return std::make_unique<ExampleSource>(data::load_fashion_mnist(data::Split::kTrain, options),
                                         data::load_fashion_mnist(data::Split::kTest, options), c);
}

}  // namespace baton::train
