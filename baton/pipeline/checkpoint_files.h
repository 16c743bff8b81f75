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

namespace baton::checkpoint {

// Named tensors, in a stable order (a file's dict order).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes `bytes` to `path` so that a reader sees the old file or the whole
// new one: a temporary file beside it, fsync, rename. Returns the size in
// bytes. Throws baton::Error naming the path when it cannot.
int64_t write_atomically(const std::string& path, const std::vector<char>& bytes);

// Writes `tensors` as a dict {name: tensor} in the format of Python's
// torch.save (torch::pickle_save, a zip archive), so torch.load(path) reads
// it; atomically. Returns the file's size in bytes.
int64_t write_tensors(const std::string& path, const NamedTensors& tensors);
// A single tensor (not a dict), for the RNG state.
int64_t write_tensor(const std::string& path, const torch::Tensor& tensor);

// Reads a file write_tensors wrote. Throws baton::Error naming the path when
// it is missing, unreadable, or not such a dict (truncated, another format).
NamedTensors read_tensors(const std::string& path);
torch::Tensor read_tensor(const std::string& path);

// {"shape": [..], "dtype": "float32"}, with Python's dtype names.
nlohmann::json describe(const torch::Tensor& tensor);
// {name: describe(tensor), ...}
nlohmann::json describe(const NamedTensors& tensors);

// Names inside a checkpoint folder, relative to it.
std::string layer_file(const std::string& step_dir, int layer);
std::string optimizer_file(const std::string& step_dir, int layer);
std::string rng_file(const std::string& step_dir);

// Test hook: with BATON_TEST_KILL_IN_SAVE="<rank>:<step>" in the
// environment, rank <rank> kills itself with SIGKILL during the save of step
// <step>, right after its first file, leaving a half-written temporary file
// beside it. CLI tests use it to check that an interrupted save leaves the
// previous checkpoint loadable.
void kill_if_asked(int rank, int64_t step, const std::string& next_path);

}  // namespace baton::checkpoint
