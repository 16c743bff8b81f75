#include "baton/data/fashion_mnist.h"

#include "baton/core/error.h"

#include <torch/data/datasets/mnist.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

namespace baton::data {
namespace {

namespace fs = std::filesystem;

struct IdxFile {
  const char* name;  // as torch's MNIST reader expects it, without ".gz"
  uintmax_t size_bytes;
};

// Header plus payload: 16 + N*28*28 bytes of images, 8 + N bytes of labels.
constexpr IdxFile kFiles[] = {
    {"train-images-idx3-ubyte", 16 + 60000ULL * 28 * 28},
    {"train-labels-idx1-ubyte", 8 + 60000ULL},
    {"t10k-images-idx3-ubyte", 16 + 10000ULL * 28 * 28},
    {"t10k-labels-idx1-ubyte", 8 + 10000ULL},
};

std::string cache_dir_of(const FashionMnistOptions& options) {
  return options.cache_dir().empty() ? default_fashion_mnist_cache_dir() : options.cache_dir();
}

bool is_cached(const fs::path& path, uintmax_t size_bytes) {
  std::error_code error;
  return fs::is_regular_file(path, error) && fs::file_size(path, error) == size_bytes;
}

void decompress(const fs::path& source, const fs::path& destination, uintmax_t size_bytes) {
  const fs::path temporary =
      destination.string() + ".tmp." + std::to_string(::getpid()) + "." +
      std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  gzFile in = gzopen(source.c_str(), "rb");
  BATON_CHECK(in != nullptr, "[data.fashion_mnist] cannot open ", source.string());
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out) {
    gzclose(in);
    BATON_CHECK(false, "[data.fashion_mnist] cannot write ", temporary.string());
  }
  std::vector<char> buffer(1 << 20);
  uintmax_t written = 0;
  int read = 0;
  while ((read = gzread(in, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
    out.write(buffer.data(), read);
    written += static_cast<uintmax_t>(read);
  }
  gzclose(in);
  out.close();
  if (read < 0 || !out || written != size_bytes) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    BATON_CHECK(false, "[data.fashion_mnist] ", source.string(), " decompressed to ", written,
                " bytes, expected ", size_bytes, (read < 0 ? " (corrupt gzip stream)" : ""));
  }
  fs::rename(temporary, destination);
}

}  // namespace

std::string default_fashion_mnist_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "baton" / "fashion-mnist").string();
  }
  const char* home = std::getenv("HOME");
  BATON_CHECK(home != nullptr && *home != '\0',
              "[data.fashion_mnist] neither XDG_CACHE_HOME nor HOME is set: pass a cache_dir");
  return (fs::path(home) / ".cache" / "baton" / "fashion-mnist").string();
}

int prepare_fashion_mnist(const FashionMnistOptions& options) {
  const fs::path cache = cache_dir_of(options);
  int decompressed = 0;
  for (const IdxFile& file : kFiles) {
    const fs::path destination = cache / file.name;
    if (is_cached(destination, file.size_bytes)) {
      continue;
    }
    const fs::path source = fs::path(options.source_dir()) / (std::string(file.name) + ".gz");
    BATON_CHECK(fs::exists(source), "[data.fashion_mnist] ", source.string(),
                " not found; install it with: apt-get install dataset-fashion-mnist");
    std::error_code error;
    fs::create_directories(cache, error);
    BATON_CHECK(!error, "[data.fashion_mnist] cannot create the cache folder ", cache.string(),
                ": ", error.message());
    decompress(source, destination, file.size_bytes);
    ++decompressed;
  }
  return decompressed;
}

Examples load_fashion_mnist(Split split, const FashionMnistOptions& options) {
  prepare_fashion_mnist(options);
  torch::data::datasets::MNIST mnist(cache_dir_of(options),
                                     split == Split::kTrain
                                         ? torch::data::datasets::MNIST::Mode::kTrain
                                         : torch::data::datasets::MNIST::Mode::kTest);
  return Examples{(mnist.images() - kFashionMnistMean) / kFashionMnistStd, mnist.targets()};
}

}  // namespace baton::data
