#include "baton/data/fashion_mnist.h"

#include "baton/core/error.h"

#include <torch/data/datasets/mnist.h>
#include <zlib.h>

#include <cstdio>
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

// FNV-1a, 64 bits: stable across runs and builds, unlike std::hash.
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  return hash;
}

fs::path canonical_folder(const std::string& folder) {
  std::error_code error;
  fs::path path = fs::weakly_canonical(fs::absolute(folder), error);
  if (error) path = fs::absolute(folder).lexically_normal();
  // "a/b/" names the folder "a/b".
  while (!path.has_filename() && path.has_relative_path()) path = path.parent_path();
  return path;
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

std::string fashion_mnist_cache_dir(const FashionMnistOptions& options) {
  std::string name = "fashion-mnist";
  const fs::path source = canonical_folder(options.source_dir());
  if (source != canonical_folder(kFashionMnistSourceDir)) {
    char key[17];
    std::snprintf(key, sizeof key, "%016llx", static_cast<unsigned long long>(fnv1a(source.string())));
    name += std::string("-") + key;
  }
  if (!options.cache_dir().empty()) return (fs::path(options.cache_dir()) / name).string();
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') {
    return (fs::path(xdg) / "baton" / name).string();
  }
  const char* home = std::getenv("HOME");
  BATON_CHECK(home != nullptr && *home != '\0',
              "[data.fashion_mnist] neither XDG_CACHE_HOME nor HOME is set: pass a cache_dir");
  return (fs::path(home) / ".cache" / "baton" / name).string();
}

std::string default_fashion_mnist_cache_dir(const std::string& source_dir) {
  return fashion_mnist_cache_dir(FashionMnistOptions().source_dir(source_dir));
}

int prepare_fashion_mnist(const FashionMnistOptions& options) {
  if (canonical_folder(options.source_dir()) != canonical_folder(kFashionMnistSourceDir)) {
    std::error_code error;
    BATON_CHECK(fs::is_directory(options.source_dir(), error), "[data.fashion_mnist] data folder ",
                options.source_dir(), " does not exist or is not a folder; name the folder of",
                " the .gz files, or leave it out and install it with: apt-get install",
                " dataset-fashion-mnist");
  }
  const fs::path cache = fashion_mnist_cache_dir(options);
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
  torch::data::datasets::MNIST mnist(fashion_mnist_cache_dir(options),
                                     split == Split::kTrain
                                         ? torch::data::datasets::MNIST::Mode::kTrain
                                         : torch::data::datasets::MNIST::Mode::kTest);
  return Examples{(mnist.images() - kFashionMnistMean) / kFashionMnistStd, mnist.targets()};
}

}  // namespace baton::data
