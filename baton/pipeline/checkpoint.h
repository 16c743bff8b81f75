// Checkpoints: a model's layers, its optimizer's state, the step and the RNG
// state in a folder, keyed by global layer index so that a run can resume
// under another pp, balance or schedule. Pipeline::save / Pipeline::load are
// the entry points; this is the format they share with `baton train`.
//
// A checkpoint folder DIR holds:
//   DIR/manifest.json                     written last, by rank 0: names every file
//   DIR/step_00000004/layer_00003.pt      {parameter or buffer name: tensor} of layer 3
//   DIR/step_00000004/layer_00003.optim.pt {"<parameter>.<state>": tensor}, e.g.
//                                         "weight.exp_avg", "weight.step" (Adam)
//   DIR/step_00000004/rng.pt              the CPU generator's state (uint8 tensor)
// Every .pt file is a dict (or tensor) in the format of Python's torch.save,
// so torch.load reads it. The manifest holds the format version, the step,
// the model (name, layer count), the pipeline that saved it, the optimizer
// (kind, lr), the caller's `extra` JSON, and for each file its path relative
// to DIR, kind (layer | optimizer | rng), layer, size in bytes, CRC-32
// (zlib's, 8 hex digits; checked before a file is parsed) and tensors'
// shapes and dtypes.
//
// Atomicity: each file is written to a temporary name and renamed; all ranks
// finish their files (an all-gather of their file lists) before rank 0
// renames the new manifest into place; only then are the folders of older
// saves removed. A save killed at any point leaves the previous manifest and
// every file it names. Successive saves to one DIR use a folder per step
// (step_<N>, or step_<N>-1 when the current manifest already names step_<N>,
// so re-saving a step never overwrites the files in use).
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"
#include "baton/pipeline/checkpoint_files.h"

namespace baton::checkpoint {

// 2: each file's entry has "crc32".
inline constexpr int kFormatVersion = 2;
inline constexpr const char* kManifest = "manifest.json";

// Global layer index -> that layer's parameters and buffers (the live
// tensors, keyed by their name inside the layer, e.g. "attn.qkv.weight").
using Layers = std::map<int, NamedTensors>;

struct SaveRequest {
  std::string dir;
  int64_t step = 0;
  // This rank and its group (null: alone). Every rank of the group calls
  // save() with the same dir and step (a collective).
  int rank = 0;
  comm::Communicator* comm = nullptr;
  // The layers this rank writes, whole; over all ranks, each layer exactly
  // once.
  Layers layers;
  // Null: no optimizer state is saved. Otherwise its kind and lr go into the
  // manifest, and every layer of `layers` gets an optimizer file holding
  // optimizer_states[layer] ("<parameter>.<state>" tensors, whole; nothing
  // where absent).
  torch::optim::Optimizer* optimizer = nullptr;
  std::map<int, NamedTensors> optimizer_states;
  // {"name": ..., "layers": <count>}; the manifest's "model".
  nlohmann::json model;
  // What the saving pipeline looked like (informational).
  nlohmann::json pipeline;
  // The caller's, returned by load() as is.
  nlohmann::json extra = nlohmann::json::object();
};

// Writes a checkpoint of request.step into request.dir (created if needed).
// Throws baton::Error naming the path when a file cannot be written.
void save(const SaveRequest& request);

// Reads DIR/manifest.json and checks that it is a checkpoint of this format
// and that every file it names exists with its recorded size and has a
// CRC-32 (load() checks it when it reads the file). Returns the manifest.
// Throws baton::Error naming the file and what is wrong: missing manifest,
// malformed JSON, a missing or truncated file.
nlohmann::json check(const std::string& dir);

struct LoadResult {
  int64_t step = 0;
  nlohmann::json extra;
};

// This rank's part of `whole`, the checkpoint's tensor `name` of layer
// `layer` (a parameter's or buffer's name inside the layer; for optimizer
// state, the parameter's), e.g. its tensor-parallel slice.
using ToLocal = std::function<torch::Tensor(int layer, const std::string& name, const torch::Tensor& whole)>;

// Restores `layers` (copying into the live tensors) and, when `optimizer`
// is given, the optimizer state of those of their parameters that
// `optimizer` steps (with ZeRO-1, this replica's share); sets the CPU
// generator's state. `to_local`, when given, maps each tensor of a layer
// file and each non-scalar optimizer state entry to the part this rank
// holds before it is checked and copied. `model` is {"name", "layers"} of
// the model loading it. Not a collective: each rank reads the files of its
// own layers. Throws baton::Error naming the file and the mismatch for
// another model, a layer count, a missing layer, parameter names, shapes or
// dtypes that differ, an optimizer of another kind, or a file that does not
// load.
LoadResult load(const std::string& dir, const Layers& layers, torch::optim::Optimizer* optimizer,
                const nlohmann::json& model, const ToLocal& to_local = nullptr);

}  // namespace baton::checkpoint
