// The files of a checkpoint: tensor files Python's torch.load reads, written
// atomically, and the names they take inside a checkpoint folder. The format
// itself (manifest, which file holds what) is checkpoint.h's.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/pipeline/manifest.h"

namespace baton::checkpoint {

// Named tensors, in a stable order (a file's dict order).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// What the manifest records of a file: its size and its CRC-32 (zlib's).
struct FileRecord {
  int64_t bytes = 0;
  uint32_t crc32 = 0;
};

// The first line of `text` (an error message without its backtrace).
std::string first_line(const std::string& text);

// Writes `bytes` to `path` so that a reader sees the old file or the whole
// new one: a temporary file beside it, fsync, rename. Throws baton::Error
// naming the path when it cannot.
FileRecord write_atomically(const std::string& path, const std::vector<char>& bytes);

// Writes `tensors` as a dict {name: tensor} in the format of Python's
// torch.save (a zip archive of data.pkl and the tensors' records), without
// TorchScript's type tags, so torch.load(path) with its defaults reads it
// (weights_only=True in PyTorch 2.6+; LibTorch 1.13's pickle_load too);
// atomically.
FileRecord write_tensors(const std::string& path, const NamedTensors& tensors);
// A single tensor (not a dict), for the RNG state.
FileRecord write_tensor(const std::string& path, const torch::Tensor& tensor);

// Reads a file write_tensors wrote, whose CRC-32 must be `expected_crc32`.
// The checksum is checked before LibTorch's parser sees a byte: that parser
// is not safe on arbitrary input (LibTorch 1.13 reads freed memory on a
// zeroed file, found by AddressSanitizer). Throws baton::Error naming the
// path when the file is missing, unreadable, corrupt, or not such a dict.
NamedTensors read_tensors(const std::string& path, uint32_t expected_crc32);
torch::Tensor read_tensor(const std::string& path, uint32_t expected_crc32);

// {"shape": [..], "dtype": "float32"}, with Python's dtype names.
nlohmann::json describe(const torch::Tensor& tensor);
// {name: describe(tensor), ...}
nlohmann::json describe(const NamedTensors& tensors);

// Names inside a checkpoint folder, relative to it.
std::string layer_file(const std::string& step_dir, int layer);
std::string optimizer_file(const std::string& step_dir, int layer);
std::string rng_file(const std::string& step_dir);

// Test hook: with BATON_TEST_KILL_IN_SAVE="<rank>:<step>" in the
// environment (core/test_hooks.h: markers, "^" for the launcher), rank
// <rank> kills itself with SIGKILL during the save of step <step>, right
// after its first file, leaving a half-written temporary file beside it. CLI
// tests use it to check that an interrupted save leaves the previous
// checkpoint loadable.
void kill_if_asked(int rank, int64_t step, const std::string& next_path);

}  // namespace baton::checkpoint
