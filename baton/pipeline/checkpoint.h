// Checkpoints: a model's layers, its optimizer's state, the step and the RNG
// state in a folder, keyed by global layer index so that a run can resume
// under another pp, balance or schedule. Pipeline::save / Pipeline::load are
// the entry points; this is the format they share with `baton train`.
//
// A checkpoint folder DIR holds:
//   DIR/manifest.json                       the root manifest (manifest.h), written
//                                           last, by rank 0: names every file of
//                                           the newest save and the saves kept
//   DIR/step_00000004/layer_00003.pt        {parameter or buffer name: tensor} of layer 3
//   DIR/step_00000004/layer_00003.optim.pt  {"<parameter>.<state>": tensor}, e.g.
//                                           "weight.exp_avg", "weight.step" (Adam)
//   DIR/step_00000004/rng.pt                the CPU generator's state (uint8 tensor)
//   DIR/step_00000004/manifest.json         the same save's step manifest: DIR/step_00000004
//                                           is a checkpoint folder of its own
// Every .pt file is a dict (or tensor) in the format of Python's torch.save,
// so torch.load reads it. The manifest holds the format version, the step,
// the model (name, layer count, tied weights), the pipeline that saved it, the
// optimizer (kind, lr), the caller's `extra` JSON, and for each file its path
// relative to the manifest's folder, kind (layer | optimizer | rng), layer,
// size in bytes, CRC-32 (zlib's, 8 hex digits; checked before a file is
// parsed) and tensors' shapes and dtypes.
//
// What a save may touch: DIR must be empty or hold a root manifest
// (prepare_save_folder). A save writes a new step folder, never one that
// exists, first under the name step_<N>.partial; once every rank's files are
// on disk rank 0 renames it to step_<N> (step_<N>-1, -2, ... when that name
// is taken), writes its step manifest, then the root manifest. Only then
// are older step folders removed, and only those the previous root manifest
// lists in "kept" beyond the newest `keep_last` (default 2, so a corrupt
// newest save still leaves one), except `protect`ed ones (the folder a run
// resumed from), which stay listed for a later save to remove. A save that fails removes the files
// its rank wrote; one killed leaves a step_<N>.partial folder, which no manifest names (so it is
// never loaded) and which the next save into DIR removes when it holds only
// names baton writes. A save killed at any point leaves the previous root
// manifest and every file it names.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_layout.h"
#include "baton/pipeline/checkpoint_files.h"
#include "baton/pipeline/manifest.h"

namespace baton::checkpoint {

// Global layer index -> that layer's parameters and buffers (the live
// tensors, keyed by their name inside the layer, e.g. "attn.qkv.weight").
using Layers = std::map<int, NamedTensors>;

struct SaveRequest {
  std::string dir;
  int64_t step = 0;
  // The ranks that save together (solo: alone); every one calls save() with
  // the same dir and step (a collective). Rank 0 of it writes the manifests.
  std::shared_ptr<comm::Communicator> comm = comm::solo();
  // The layers this rank writes, whole; over all ranks, each layer exactly
  // once.
  Layers layers;
  // Null: no optimizer state is saved. Otherwise its kind and lr go into the
  // manifest, and every layer of `layers` gets an optimizer file holding
  // optimizer_states[layer] ("<parameter>.<state>" tensors, whole; nothing
  // where absent).
  torch::optim::Optimizer* optimizer = nullptr;
  std::map<int, NamedTensors> optimizer_states;
  // {"name": ..., "layers": <count>, "tied": [[{"layer", "name"}, ...], ...]};
  // the manifest's "model".
  nlohmann::json model;
  // What the saving pipeline looked like (informational).
  nlohmann::json pipeline;
  // The caller's, returned by load() as is.
  nlohmann::json extra = nlohmann::json::object();
  // How many saves DIR keeps (this one included); at least 1.
  int keep_last = 2;
  // Folders never removed by this save (e.g. the checkpoint a run resumed
  // from), by path; compared by identity.
  std::vector<std::string> protect;
};

// Writes a checkpoint of request.step into request.dir (created when missing;
// its parent must exist), as the header comment says. Throws baton::Error naming the path when the
// folder is not baton's (prepare_save_folder) or a file cannot be written;
// every rank throws when rank 0 refuses the folder.
void save(const SaveRequest& request);

struct LoadResult {
  int64_t step = 0;
  nlohmann::json extra;
};

// This rank's part of `whole`, the checkpoint's tensor `name` of layer
// `layer` (a parameter's or buffer's name inside the layer; for optimizer
// state, the parameter's), e.g. its tensor-parallel slice.
using ToLocal =
    std::function<torch::Tensor(int layer, const std::string& name, const torch::Tensor& whole)>;

// Under ZeRO (runtime/zero.h) the optimizer steps shards: `stepped` gives
// the tensor it steps for a parameter (undefined: the parameter itself), and
// `part` that tensor's part of a state entry shaped as the parameter (after
// to_local).
struct ToShard {
  std::function<torch::Tensor(const torch::Tensor& parameter)> stepped;
  std::function<torch::Tensor(const torch::Tensor& parameter, const torch::Tensor& state)> part;
};

// Restores `layers` (copying into the live tensors) and, when `optimizer`
// is given, the optimizer state of those of their parameters that
// `optimizer` steps (under ZeRO, through `to_shard`, this replica's shards); sets the CPU
// generator's state. `to_local`, when given, maps each tensor of a layer
// file and each non-scalar optimizer state entry to the part this rank
// holds before it is checked and copied. `model` is {"name", "layers"} of
// the model loading it (its "tied" groups must equal the saved ones, none
// when absent). Not a collective: each rank reads the files of its
// own layers. Throws baton::Error naming the file and the mismatch for
// another model, a layer count, a missing layer, parameter names, shapes or
// dtypes that differ, an optimizer of another kind, or a file that does not
// load.
LoadResult load(const std::string& dir, const Layers& layers, torch::optim::Optimizer* optimizer,
                const nlohmann::json& model, const ToLocal& to_local = nullptr,
                const ToShard& to_shard = {});

}  // namespace baton::checkpoint
