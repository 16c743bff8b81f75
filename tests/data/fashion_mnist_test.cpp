#include "baton/data/fashion_mnist.h"

#include "baton/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <random>

namespace baton::data {
namespace {

namespace fs = std::filesystem;

// A fresh folder removed at the end of the test.
class TemporaryDir {
 public:
  TemporaryDir() {
    std::random_device random;
    path_ = fs::temp_directory_path() / ("baton-data-test-" + std::to_string(random()));
    fs::create_directories(path_);
  }
  ~TemporaryDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

bool dataset_installed() {
  return fs::exists(fs::path(kFashionMnistSourceDir) / "train-images-idx3-ubyte.gz");
}

TEST(FashionMnistTest, LoadsSixtyThousandTrainAndTenThousandTestExamples) {
  if (!dataset_installed()) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  TemporaryDir cache;
  const auto options = FashionMnistOptions().cache_dir(cache.path().string());
  const Examples train = load_fashion_mnist(Split::kTrain, options);
  const Examples test = load_fashion_mnist(Split::kTest, options);

  EXPECT_EQ(train.inputs.sizes(), (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(test.inputs.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(train.inputs.scalar_type(), torch::kFloat);
  EXPECT_EQ(train.targets.sizes(), (std::vector<int64_t>{60000}));
  EXPECT_EQ(test.targets.sizes(), (std::vector<int64_t>{10000}));
  EXPECT_EQ(train.targets.scalar_type(), torch::kLong);
  EXPECT_EQ(train.targets.min().item<int64_t>(), 0);
  EXPECT_EQ(train.targets.max().item<int64_t>(), 9);
  EXPECT_EQ(test.targets.min().item<int64_t>(), 0);
  EXPECT_EQ(test.targets.max().item<int64_t>(), 9);
  // Fashion-MNIST is balanced: 6000 training images per class.
  EXPECT_TRUE(torch::equal(train.targets.bincount(), torch::full({10}, 6000, torch::kLong)));
  // Normalized with the training set's own mean and std.
  EXPECT_NEAR(train.inputs.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(train.inputs.std().item<double>(), 1.0, 0.01);
}

TEST(FashionMnistTest, DecompressesOnceAndReusesTheCache) {
  if (!dataset_installed()) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  TemporaryDir cache;
  const auto options = FashionMnistOptions().cache_dir(cache.path().string());
  EXPECT_EQ(prepare_fashion_mnist(options), 4);
  const fs::path folder = fashion_mnist_cache_dir(options);
  EXPECT_EQ(folder, cache.path() / "fashion-mnist");
  const fs::path images = folder / "train-images-idx3-ubyte";
  ASSERT_TRUE(fs::exists(images));
  const auto written = fs::last_write_time(images);

  EXPECT_EQ(prepare_fashion_mnist(options), 0);
  load_fashion_mnist(Split::kTest, options);
  EXPECT_EQ(fs::last_write_time(images), written);

  // A truncated cache file is replaced, the others are kept.
  fs::resize_file(folder / "t10k-labels-idx1-ubyte", 100);
  EXPECT_EQ(prepare_fashion_mnist(options), 1);
  EXPECT_EQ(fs::file_size(folder / "t10k-labels-idx1-ubyte"), 10008u);
}

TEST(FashionMnistTest, AMissingDatasetSaysHowToInstallIt) {
  TemporaryDir source, cache;
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  try {
    load_fashion_mnist(Split::kTrain, options);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "[data.fashion_mnist] " + (source.path() / "train-images-idx3-ubyte.gz").string() +
                  " not found; install it with: apt-get install dataset-fashion-mnist");
  }
}

// Issue 7.11: a --data-dir that does not exist trained on whatever was cached.
TEST(FashionMnistTest, ADataFolderThatDoesNotExistIsRejectedEvenWhenItsCacheIsFull) {
  if (!dataset_installed()) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  TemporaryDir cache;
  ASSERT_EQ(prepare_fashion_mnist(FashionMnistOptions().cache_dir(cache.path().string())), 4);
  const auto options =
      FashionMnistOptions().source_dir("/nonexistent/fashion-mnist").cache_dir(cache.path().string());
  try {
    prepare_fashion_mnist(options);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_THAT(error.what(), testing::HasSubstr("data folder /nonexistent/fashion-mnist does not "
                                                 "exist or is not a folder"));
  }
}

// Issue 7.11: a --cache-dir filled from one --data-dir was read for another.
TEST(FashionMnistTest, AGivenCacheFolderKeepsEachDataFolderApart) {
  if (!dataset_installed()) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  TemporaryDir cache, empty;
  ASSERT_EQ(prepare_fashion_mnist(FashionMnistOptions().cache_dir(cache.path().string())), 4);
  const auto other =
      FashionMnistOptions().source_dir(empty.path().string()).cache_dir(cache.path().string());
  EXPECT_NE(fashion_mnist_cache_dir(other), (cache.path() / "fashion-mnist").string());
  EXPECT_EQ(fs::path(fashion_mnist_cache_dir(other)).parent_path(), cache.path());
  try {
    prepare_fashion_mnist(other);
    FAIL() << "expected baton::Error: the empty folder borrowed the Debian data's cache";
  } catch (const baton::Error& error) {
    const fs::path missing = empty.path() / "train-images-idx3-ubyte.gz";
    EXPECT_THAT(error.what(), testing::HasSubstr(missing.string() + " not found"));
  }
}

TEST(FashionMnistTest, EachDataFolderGetsItsOwnDefaultCache) {
  TemporaryDir other;
  const std::string debian = default_fashion_mnist_cache_dir();
  const std::string mine = default_fashion_mnist_cache_dir(other.path().string());
  EXPECT_NE(mine, debian);
  EXPECT_EQ(fs::path(mine).parent_path(), fs::path(debian).parent_path());
  EXPECT_THAT(fs::path(mine).filename().string(),
              testing::MatchesRegex("fashion-mnist-[0-9a-f]{16}"));
  // The same folder by another spelling shares the cache.
  EXPECT_EQ(default_fashion_mnist_cache_dir((other.path() / "." / "").string()), mine);
  EXPECT_EQ(default_fashion_mnist_cache_dir(kFashionMnistSourceDir), debian);
}

TEST(FashionMnistTest, TheDefaultCacheFollowsXdgCacheHome) {
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string restore = saved ? saved : "";
  ::setenv("XDG_CACHE_HOME", "/some/cache", 1);
  EXPECT_EQ(default_fashion_mnist_cache_dir(), "/some/cache/baton/fashion-mnist");
  if (saved) {
    ::setenv("XDG_CACHE_HOME", restore.c_str(), 1);
  } else {
    ::unsetenv("XDG_CACHE_HOME");
  }
}

}  // namespace
}  // namespace baton::data
