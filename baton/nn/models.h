// The model zoo as ModelSpecs: every layer is built lazily and seeded by its
// global index (see layer_spec.h); every loss is the mean over the batch.
#pragma once

#include "baton/nn/layer_spec.h"

#include <torch/arg.h>

#include <string>
#include <vector>

namespace baton::nn {

// Layers: `layers` baton Linears, in_features -> hidden -> ... -> classes,
// each but the last followed by ReLU (one LayerSpec per Linear(+ReLU)).
// Input float [B, in_features]; output logits [B, classes]; cross-entropy loss.
// Under tensor parallelism layers 2i and 2i + 1 are a column/row-parallel
// pair (LayerSpec::split, tensor_parallel.h's LinearCut); with an odd count
// the last layer is whole on every tp rank. tp must then divide hidden.
ModelSpec mlp(int layers, int hidden, int in_features, int classes);

// A CNN for 1x28x28 Fashion-MNIST in 6 layers (3x3 convs, padding 1):
//   0 conv(1, 32) + ReLU   1 max-pool 2   2 conv(32, 64) + ReLU
//   3 max-pool 2 + flatten  4 Linear(3136, 128) + ReLU   5 Linear(128, 10)
// No batch norm or dropout, so micro-batching cannot change the gradients.
// The fully connected layers are baton Linears. Output logits [B, 10].
ModelSpec fashion_cnn();

// A ResNet of `blocks` bottleneck blocks (ResNet-50's, see resnet.h) for
// 1x28x28 images and 10 classes, in blocks + 2 layers: layer 0 the stem (3x3
// conv 1 -> width + norm + ReLU + max-pool to 14x14), then one layer per
// block, then the head (global average pooling + Linear to 10 logits). The
// blocks form min(blocks, 3) stages at 14x14, 7x7 and 4x4 (each later
// stage's first block strides 2); stage s has bottleneck width width * 2^s
// and 4 * width * 2^s output channels; blocks spread evenly, the remainder in
// the later stages (7 blocks: 2, 2, 3). Norms are GroupNorm (no batch statistics), so
// micro-batching does not change the gradients.
// REQUIRES: blocks >= 1, width >= 1.
ModelSpec resnet(int blocks, int width);

// A decoder-only transformer: layer 0 token + position embedding (int64
// [B, T] -> [B, T, hidden]), then `layers` pre-LN blocks, then final LayerNorm
// + LM head (-> logits [B, T, vocab]): layers + 2 layers in all. The loss is
// cross entropy averaged over every position of every sequence. With
// `tie_embeddings` the LM head's weight is the token embedding's (Press &
// Wolf 2017, as GPT-2): ModelSpec::tied holds {layer 0 "token.weight",
// layer layers + 1 "head.weight"}.
// REQUIRES: hidden % heads == 0; T <= context.
ModelSpec gpt(int layers, int hidden, int heads, int vocab, int context,
              bool tie_embeddings = false);

// A Llama-style decoder (llama.h): layer 0 token embedding (int64 [B, T], or
// {tokens, padding mask [B, T]} -> {hidden, positions[, mask]}), then
// `layers` blocks (RMSNorm, rotary positions, causal attention, SwiGLU of
// llama_ffn_hidden(hidden) units, core/model_shapes.h), then final RMSNorm + LM head (-> logits
// [B, T, vocab]): layers + 2 layers in all, no biases. Positions (and the
// mask) cross every stage boundary after the hidden states. The loss is
// cross entropy averaged over every position (targets of -100 are ignored).
// `tie_embeddings` ties layer 0 "token.weight" to layer layers + 1
// "head.weight", as gpt does.
// REQUIRES: hidden % heads == 0, hidden / heads even.
ModelSpec llama(int layers, int hidden, int heads, int vocab, bool tie_embeddings = false);

// Sizes for make_model; each model reads the ones it needs.
struct ModelOptions {
  TORCH_ARG(int, layers) = 4;               // mlp: Linears; gpt, llama, resnet: blocks
  TORCH_ARG(int, hidden) = 64;              // mlp, gpt, llama; resnet: the first stage's width
  TORCH_ARG(int, heads) = 4;                // gpt, llama
  TORCH_ARG(int, vocab) = 256;              // gpt, llama
  TORCH_ARG(int, context) = 64;             // gpt
  TORCH_ARG(int, in_features) = 32;         // mlp
  TORCH_ARG(int, classes) = 10;             // mlp
  TORCH_ARG(bool, tie_embeddings) = false;  // gpt, llama: one matrix for embedding and LM head
  // Every model's cross entropy against targets smoothed so: (1 - s) on the
  // label and s / classes on every class (PyTorch's label_smoothing). In [0, 1).
  TORCH_ARG(double, label_smoothing) = 0;
};

// The names make_model knows: "mlp", "fashion_cnn", "gpt", "llama", "resnet".
std::vector<std::string> model_names();

// Builds the spec named `name`; an unknown name throws baton::Error listing the
// known ones.
ModelSpec make_model(const std::string& name, const ModelOptions& options = {});

// The parameter count of make_model(name, options), computed from the sizes
// without building anything (a double: absurd sizes overflow int64).
// Throws baton::Error for an unknown name.
double parameter_count(const std::string& name, const ModelOptions& options = {});

}  // namespace baton::nn
