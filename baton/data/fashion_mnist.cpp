#include "baton/data/fashion_mnist.h"

#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/data/idx.h"

#include <torch/types.h>
#include <zlib.h>

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string_view>
#include <thread>

namespace baton::data {
namespace {

namespace fs = std::filesystem;

struct IdxFile {
  const char* name;  // in the cache; the source adds ".gz"
  const char* what;  // for messages
  std::vector<int64_t> dims;
  bool labels;
  uintmax_t size_bytes() const {
    uintmax_t count = 1;
    for (int64_t d : dims) count *= static_cast<uintmax_t>(d);
    return 4 + 4 * dims.size() + count;
  }
};

constexpr int kClasses = 10;

const IdxFile kFiles[] = {
    {"train-images-idx3-ubyte", "Fashion-MNIST's train images", {60000, 28, 28}, false},
    {"train-labels-idx1-ubyte", "Fashion-MNIST's train labels", {60000}, true},
    {"t10k-images-idx3-ubyte", "Fashion-MNIST's test images", {10000, 28, 28}, false},
    {"t10k-labels-idx1-ubyte", "Fashion-MNIST's test labels", {10000}, true},
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

// Throws baton::Error naming `name` unless `bytes` are `file` as Fashion-MNIST has it.
void check_file(const IdxFile& file, std::string_view bytes, const std::string& name) {
  const IdxArray array = parse_idx(bytes, name, file.dims.size());
  check_idx_dims(array, file.dims, name, file.what);
  if (file.labels) check_idx_labels(array, kClasses, name);
}

// The bytes of a cached file, or "" when it is missing, of another size or
// does not parse (left by an older baton): then it is decompressed again.
std::string read_cached(const fs::path& path, const IdxFile& file) {
  std::error_code error;
  if (!fs::is_regular_file(path, error) || fs::file_size(path, error) != file.size_bytes()) {
    return "";
  }
  std::ifstream in(path, std::ios::binary);
  std::string bytes(file.size_bytes(), '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return "";
  try {
    check_file(file, bytes, path.string());
  } catch (const Error&) {
    return "";
  }
  return bytes;
}

// Decompresses `source` into memory and checks it; only a file that passes is
// written, to a temporary name renamed into the cache as `destination`, so a
// bad file is never cached. Reads at most one byte past the expected size, so
// a gzip bomb stops there.
std::string decompress(const fs::path& source, const fs::path& destination, const IdxFile& file) {
  const fs::path temporary =
      destination.string() + ".tmp." + std::to_string(::getpid()) + "." +
      std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  gzFile in = gzopen(source.c_str(), "rb");
  BATON_CHECK(in != nullptr, "[data.fashion_mnist] cannot open ", source.string());
  std::string bytes(file.size_bytes() + 1, '\0');
  uintmax_t read_bytes = 0;
  int read = 0;
  while (read_bytes < bytes.size()) {
    const auto want =
        static_cast<unsigned>(std::min<uintmax_t>(bytes.size() - read_bytes, 1 << 20));
    read = gzread(in, bytes.data() + read_bytes, want);
    if (read <= 0) break;
    read_bytes += static_cast<uintmax_t>(read);
  }
  int status = Z_OK;
  std::string reason = gzerror(in, &status);
  gzclose(in);
  const std::string own_name = source.string() + ": ";  // zlib's prefix
  if (reason.rfind(own_name, 0) == 0) reason.erase(0, own_name.size());
  // A stream cut short reads as an end of file, with Z_BUF_ERROR left behind.
  BATON_CHECK(read >= 0 && (status == Z_OK || status == Z_STREAM_END), "[data.fashion_mnist] ",
              source.string(), " is a corrupt gzip file (", reason, ")");
  bytes.resize(read_bytes);
  // The IDX header names the file's shape: a message about it says more than a size.
  check_file(file, bytes, source.string());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    BATON_CHECK(out.good(), "[data.fashion_mnist] cannot write ", temporary.string());
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temporary, ignored);
      BATON_CHECK(false, "[data.fashion_mnist] cannot write ", temporary.string());
    }
  }
  std::error_code error;
  fs::rename(temporary, destination, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    BATON_CHECK(false, "[data.fashion_mnist] cannot rename ", temporary.string(), " to ",
                destination.string(), ": ", error.message());
  }
  return bytes;
}

}  // namespace

std::string fashion_mnist_cache_dir(const FashionMnistOptions& options) {
  std::string name = "fashion-mnist";
  const fs::path source = canonical_folder(options.source_dir());
  if (source != canonical_folder(kFashionMnistSourceDir)) {
    char key[17];
    std::snprintf(key, sizeof key, "%016llx",
                  static_cast<unsigned long long>(fnv1a(source.string())));
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

namespace {

bool is_default_source(const FashionMnistOptions& options) {
  return canonical_folder(options.source_dir()) == canonical_folder(kFashionMnistSourceDir);
}

// The checked bytes of `file`, from the cache or decompressed into it.
std::string cached_file(const FashionMnistOptions& options, const IdxFile& file,
                        bool* decompressed) {
  const fs::path cache = fashion_mnist_cache_dir(options);
  const fs::path destination = cache / file.name;
  std::string bytes = read_cached(destination, file);
  if (!bytes.empty()) return bytes;
  const fs::path source = fs::path(options.source_dir()) / (std::string(file.name) + ".gz");
  const std::string kind = file_kind(source.string());
  // The package's hint only where the package puts the files.
  BATON_CHECK(kind != "missing", "[data.fashion_mnist] ", source.string(), " not found",
              is_default_source(options)
                  ? "; install it with: apt-get install dataset-fashion-mnist"
                  : "; the data folder needs {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz");
  BATON_CHECK(kind.empty(), "[data.fashion_mnist] ", source.string(), " is ", kind,
              ", not a regular file");
  std::error_code error;
  fs::create_directories(cache, error);
  BATON_CHECK(!error, "[data.fashion_mnist] cannot create the cache folder ", cache.string(), ": ",
              error.message());
  if (decompressed != nullptr) *decompressed = true;
  return decompress(source, destination, file);
}

void check_source_folder(const FashionMnistOptions& options) {
  if (is_default_source(options)) return;
  const std::string kind = file_kind(options.source_dir());
  BATON_CHECK(kind == "a folder", "[data.fashion_mnist] data folder ", options.source_dir(),
              (kind == "missing" ? " does not exist"
                                 : " is " + (kind.empty() ? "a file" : kind) + ", not a folder"),
              "; name the folder of the .gz files");
}

}  // namespace

int prepare_fashion_mnist(const FashionMnistOptions& options) {
  check_source_folder(options);
  int decompressed = 0;
  for (const IdxFile& file : kFiles) {
    bool fresh = false;
    cached_file(options, file, &fresh);
    decompressed += fresh ? 1 : 0;
  }
  return decompressed;
}

Examples load_fashion_mnist_bytes(Split split, const FashionMnistOptions& options,
                                  FashionMnistParts parts) {
  check_source_folder(options);
  const IdxFile& images_file = kFiles[split == Split::kTrain ? 0 : 2];
  const IdxFile& labels_file = kFiles[split == Split::kTrain ? 1 : 3];
  Examples out;
  // Each file is parsed (and so checked) in a string that is gone when this
  // returns; the tensors own copies of the bytes.
  if (parts.images) {
    const std::string images = cached_file(options, images_file, nullptr);
    const IdxArray array = parse_idx(images, images_file.name, images_file.dims.size());
    out.inputs = torch::from_blob(const_cast<char*>(array.values.data()),
                                  {array.dims[0], 1, 28, 28}, torch::kUInt8)
                     .clone();
  }
  if (parts.labels) {
    const std::string labels = cached_file(options, labels_file, nullptr);
    const IdxArray array = parse_idx(labels, labels_file.name, labels_file.dims.size());
    out.targets =
        torch::from_blob(const_cast<char*>(array.values.data()), {array.dims[0]}, torch::kUInt8)
            .to(torch::kInt64);
  }
  BATON_CHECK(!parts.images || !parts.labels || out.inputs.size(0) == out.targets.size(0),
              "[data.fashion_mnist] ", out.inputs.size(0), " images but ", out.targets.size(0),
              " labels");
  return out;
}

torch::Tensor normalize_fashion_mnist(const torch::Tensor& images) {
  // As torch::data::datasets::MNIST reads them: bytes / 255, then the dataset's mean and std.
  return (images.to(torch::kFloat32).div_(255) - kFashionMnistMean) / kFashionMnistStd;
}

Examples load_fashion_mnist(Split split, const FashionMnistOptions& options) {
  Examples bytes = load_fashion_mnist_bytes(split, options, FashionMnistParts{});
  return Examples{normalize_fashion_mnist(bytes.inputs), bytes.targets};
}

}  // namespace baton::data
