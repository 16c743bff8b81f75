#include "baton/data/fashion_mnist.h"

#include "baton/core/error.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

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

// An IDX file of unsigned bytes with the given dims, every element `fill`.
std::string idx(const std::vector<uint32_t>& dims, char fill = 0) {
  std::string bytes{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  size_t count = 1;
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes += static_cast<char>((d >> shift) & 0xff);
    count *= d;
  }
  return bytes + std::string(count, fill);
}

void write_gz(const fs::path& path, const std::string& bytes) {
  gzFile out = gzopen(path.c_str(), "wb1");
  ASSERT_NE(out, nullptr) << path;
  ASSERT_EQ(gzwrite(out, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  ASSERT_EQ(gzclose(out), Z_OK);
}

// A data folder of Fashion-MNIST's four files, all zeros but well formed.
void write_zero_dataset(const fs::path& folder) {
  write_gz(folder / "train-images-idx3-ubyte.gz", idx({60000, 28, 28}));
  write_gz(folder / "train-labels-idx1-ubyte.gz", idx({60000}));
  write_gz(folder / "t10k-images-idx3-ubyte.gz", idx({10000, 28, 28}));
  write_gz(folder / "t10k-labels-idx1-ubyte.gz", idx({10000}));
}

std::string prepare_error(const FashionMnistOptions& options) {
  try {
    prepare_fashion_mnist(options);
  } catch (const baton::Error& error) {
    return error.what();
  }
  return "no error";
}

// Every file under `folder`, temporary ones included.
std::vector<std::string> files_under(const fs::path& folder) {
  std::vector<std::string> files;
  if (!fs::exists(folder)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(folder)) {
    if (!entry.is_directory()) files.push_back(entry.path().string());
  }
  return files;
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

// Issue 16.9: the apt-get hint is for the folder the package fills, not for
// a folder the user named.
TEST(FashionMnistTest, AMissingFileInAGivenFolderSaysWhatTheFolderNeeds) {
  TemporaryDir source, cache;
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  try {
    load_fashion_mnist(Split::kTrain, options);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "[data.fashion_mnist] " + (source.path() / "train-images-idx3-ubyte.gz").string() +
                  " not found; the data folder needs "
                  "{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz");
  }
}

TEST(FashionMnistTest, AMissingDatasetInTheDefaultFolderSaysHowToInstallIt) {
  if (dataset_installed()) {
    GTEST_SKIP() << "the dataset is installed";
  }
  TemporaryDir cache;
  EXPECT_EQ(prepare_error(FashionMnistOptions().cache_dir(cache.path().string())),
            "[data.fashion_mnist] " +
                (fs::path(kFashionMnistSourceDir) / "train-images-idx3-ubyte.gz").string() +
                " not found; install it with: apt-get install dataset-fashion-mnist");
}

// Issue 16.6: a wrong magic number was exit 3 with no file named, and the
// bad file stayed in the cache.
TEST(FashionMnistTest, AWrongMagicNumberNamesTheFileAndLeavesNothingInTheCache) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  std::string bad = idx({60000});
  bad[2] = '\x09';
  write_gz(source.path() / "train-labels-idx1-ubyte.gz", bad);
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  const fs::path labels = source.path() / "train-labels-idx1-ubyte.gz";
  EXPECT_EQ(prepare_error(options),
            "[data.idx] " + labels.string() +
                " has the magic number 0x00000901; an IDX file of "
                "unsigned bytes starts 0x000008NN, NN the number of dimensions (at least 1)");
  const fs::path folder = fashion_mnist_cache_dir(options);
  EXPECT_FALSE(fs::exists(folder / "train-labels-idx1-ubyte"));
  // The good images before it are cached; nothing else, no temporary file.
  EXPECT_EQ(files_under(cache.path()),
            std::vector<std::string>{(folder / "train-images-idx3-ubyte").string()});
}

// Issue 16.6: a label of 200 was exit 3, after training started.
TEST(FashionMnistTest, ALabelOutsideZeroToNineNamesTheFileAndItsIndexBeforeCaching) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  std::string labels = idx({10000});
  labels[8 + 1234] = static_cast<char>(200);
  write_gz(source.path() / "t10k-labels-idx1-ubyte.gz", labels);
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  EXPECT_EQ(prepare_error(options), "[data.idx] " +
                                        (source.path() / "t10k-labels-idx1-ubyte.gz").string() +
                                        ": label 200 at index 1234 is outside 0..9");
  EXPECT_FALSE(fs::exists(fs::path(fashion_mnist_cache_dir(options)) / "t10k-labels-idx1-ubyte"));
  EXPECT_EQ(files_under(cache.path()).size(), 3u);
  try {
    load_fashion_mnist(Split::kTest, options);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_THAT(error.what(), testing::HasSubstr("label 200 at index 1234"));
  }
}

TEST(FashionMnistTest, AFileOfTheWrongShapeNamesItAndBothShapes) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  write_gz(source.path() / "t10k-images-idx3-ubyte.gz", idx({10000, 784}));
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  EXPECT_EQ(prepare_error(options),
            "[data.idx] " + (source.path() / "t10k-images-idx3-ubyte.gz").string() +
                " holds 10000 x 784 elements; Fashion-MNIST's test images are 10000 x 28 x 28");
}

TEST(FashionMnistTest, ATruncatedGzipFileIsCalledCorruptAndNotCached) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  const fs::path labels = source.path() / "train-labels-idx1-ubyte.gz";
  fs::resize_file(labels, fs::file_size(labels) / 2);
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  EXPECT_EQ(prepare_error(options), "[data.fashion_mnist] " + labels.string() +
                                        " is a corrupt gzip file (unexpected end of file)");
  EXPECT_EQ(files_under(cache.path()).size(), 1u);  // the images before it
}

TEST(FashionMnistTest, WellFormedFilesLoadAsTorchsMnistReaderWouldReadThem) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  std::string labels = idx({10000});
  labels[8 + 7] = 9;
  write_gz(source.path() / "t10k-labels-idx1-ubyte.gz", labels);
  std::string images = idx({10000, 28, 28});
  images[16 + 784 + 3] = static_cast<char>(255);
  write_gz(source.path() / "t10k-images-idx3-ubyte.gz", images);
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  const Examples test = load_fashion_mnist(Split::kTest, options);
  ASSERT_EQ(test.inputs.sizes(), (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(test.targets.scalar_type(), torch::kLong);
  EXPECT_EQ(test.targets[7].item<int64_t>(), 9);
  EXPECT_EQ(test.targets.sum().item<int64_t>(), 9);
  const double zero = -kFashionMnistMean / kFashionMnistStd;
  const double one = (1 - kFashionMnistMean) / kFashionMnistStd;
  EXPECT_NEAR(test.inputs[0][0][0][0].item<double>(), zero, 1e-6);
  EXPECT_NEAR(test.inputs[1][0][0][3].item<double>(), one, 1e-6);
}

// A file cached by an older baton that fails the checks is decompressed again.
TEST(FashionMnistTest, ACachedFileThatFailsTheChecksIsReplaced) {
  TemporaryDir source, cache;
  write_zero_dataset(source.path());
  const auto options =
      FashionMnistOptions().source_dir(source.path().string()).cache_dir(cache.path().string());
  ASSERT_EQ(prepare_fashion_mnist(options), 4);
  const fs::path cached = fs::path(fashion_mnist_cache_dir(options)) / "train-labels-idx1-ubyte";
  std::string bad = idx({60000}, 100);  // the right size, every label 100
  {
    std::ofstream out(cached, std::ios::binary | std::ios::trunc);
    out.write(bad.data(), static_cast<std::streamsize>(bad.size()));
  }
  EXPECT_EQ(prepare_fashion_mnist(options), 1);
  const Examples train = load_fashion_mnist(Split::kTrain, options);
  EXPECT_EQ(train.targets.max().item<int64_t>(), 0);
}

// Issue 7.11: a --data-dir that does not exist trained on whatever was cached.
TEST(FashionMnistTest, ADataFolderThatDoesNotExistIsRejectedEvenWhenItsCacheIsFull) {
  if (!dataset_installed()) {
    GTEST_SKIP() << "apt-get install dataset-fashion-mnist";
  }
  TemporaryDir cache;
  ASSERT_EQ(prepare_fashion_mnist(FashionMnistOptions().cache_dir(cache.path().string())), 4);
  const auto options = FashionMnistOptions()
                           .source_dir("/nonexistent/fashion-mnist")
                           .cache_dir(cache.path().string());
  try {
    prepare_fashion_mnist(options);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_STREQ(error.what(),
                 "[data.fashion_mnist] data folder /nonexistent/fashion-mnist does not exist; "
                 "name the folder of the .gz files");
  }
}

// Issue 16.9: /dev/zero as the data folder was said not to exist.
TEST(FashionMnistTest, ADataFolderThatIsADeviceIsCalledADevice) {
  TemporaryDir cache;
  EXPECT_EQ(
      prepare_error(FashionMnistOptions().source_dir("/dev/zero").cache_dir(cache.path().string())),
      "[data.fashion_mnist] data folder /dev/zero is a character device, not a folder; "
      "name the folder of the .gz files");
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
