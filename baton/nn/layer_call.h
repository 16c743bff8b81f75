// Calling one layer of a pipeline on the tensors a stage boundary carries.
//
// A boundary carries an ordered list of tensors (Tensors): hidden states with
// positions or a mask, any count, any dtype. A layer's forward takes either
// one torch::Tensor or a std::vector<torch::Tensor>, and returns either; a
// layer taking one tensor is given a list of exactly one. Which of the two a
// layer takes is learned on its first call (AnyModule erases it) and kept.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <string>
#include <vector>

namespace baton::nn {

using Tensors = std::vector<torch::Tensor>;

// How a layer's forward takes its input.
enum class LayerInput { kUnknown, kTensor, kTensors };

// One layer and what the stage knows of it: its global index and name for
// messages, and how it takes its input once learned.
struct LayerSlot {
  torch::nn::AnyModule module;
  int index = 0;
  std::string name;
  LayerInput input = LayerInput::kUnknown;
};

// Runs `layer` on `input` (learning layer.input on the first call). Throws
// baton::Error, one line naming the layer's index and name, when it takes one
// tensor but `input` holds another count, or when it returns something other
// than a torch::Tensor or a std::vector<torch::Tensor> (a std::tuple, say).
// `previous`: the layer that returned `input`, for that message (null: the
// stage's input).
Tensors call_layer(LayerSlot& layer, const Tensors& input, const LayerSlot* previous);

// Bytes of every tensor in `tensors` (undefined ones count 0).
double bytes_of(const Tensors& tensors);

}  // namespace baton::nn
