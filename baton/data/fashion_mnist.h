// Fashion-MNIST from Debian's dataset-fashion-mnist package. The .gz files are
// decompressed once into a cache folder, checked (baton/data/idx.h), then read
// as torch::data::datasets::MNIST reads them and normalized.
#pragma once

#include "baton/data/batches.h"

#include <torch/arg.h>

#include <string>

namespace baton::data {

inline constexpr const char* kFashionMnistSourceDir = "/usr/share/datasets/fashion-mnist";
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;

struct FashionMnistOptions {
  // Holds {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. Any folder other
  // than kFashionMnistSourceDir must exist, even when its files are cached.
  TORCH_ARG(std::string, source_dir) = kFashionMnistSourceDir;
  // The cache's root: the files go into a folder of it keyed by source_dir
  // (fashion_mnist_cache_dir), so another source never reads them; empty:
  // $XDG_CACHE_HOME/baton, else $HOME/.cache/baton.
  TORCH_ARG(std::string, cache_dir) = "";
};

// Where the files decompressed from options.source_dir live: the cache root /
// "fashion-mnist" for kFashionMnistSourceDir, and
// "fashion-mnist-<16 hex digits of a hash of its canonical path>" for others.
std::string fashion_mnist_cache_dir(const FashionMnistOptions& options);

// fashion_mnist_cache_dir of `source_dir` under the default root.
std::string default_fashion_mnist_cache_dir(const std::string& source_dir = kFashionMnistSourceDir);

enum class Split { kTrain, kTest };

// Decompresses every file not already in the cache and returns how many it
// decompressed. Every file, cached or not, is checked: its IDX header, its
// dimensions (60000 or 10000 examples of 28 x 28) and its labels (0..9); a
// cached file that fails is decompressed again. A source file is checked
// before it is renamed into the cache, so a bad one is never cached. Safe to
// run from several processes at once: each writes a private temporary file and
// renames it into place. Throws baton::Error naming the source file when it is
// missing (with the apt-get command that installs it, for
// kFashionMnistSourceDir), not a regular file, or fails a check (the first bad
// label by its index).
int prepare_fashion_mnist(const FashionMnistOptions& options = {});

// One split as whole tensors: inputs float [N, 1, 28, 28], normalized with
// kFashionMnistMean / kFashionMnistStd; targets int64 [N] in 0..9.
// N is 60000 for kTrain and 10000 for kTest.
Examples load_fashion_mnist(Split split, const FashionMnistOptions& options = {});

// Which parts of a split a reader needs (a pipeline's first stage the
// images, its last the labels).
struct FashionMnistParts {
  bool images = true;
  bool labels = true;
};

// The parts asked for, the images as their bytes: inputs uint8 [N, 1, 28, 28]
// (a quarter of the floats' memory), targets int64 [N]; a part not asked for
// is an undefined tensor and its file is not read.
Examples load_fashion_mnist_bytes(Split split, const FashionMnistOptions& options,
                                  FashionMnistParts parts);

// Images as load_fashion_mnist gives them, from their bytes: float, / 255,
// normalized. Elementwise, so a batch normalized alone is bitwise the rows of
// the whole split normalized.
torch::Tensor normalize_fashion_mnist(const torch::Tensor& images);

}  // namespace baton::data
