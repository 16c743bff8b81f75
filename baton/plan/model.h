// The arithmetic of a GPT-style Transformer that the planner needs: FLOPs
// (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on
// GPU Clusters Using Megatron-LM", appendix), parameters, and activation
// memory (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", section 4). Pure functions of the shape; no torch.
#pragma once

#include <cstdint>

#include "baton/core/model_shapes.h"

namespace baton::plan {

struct ModelShape {
  int layers = 0;  // l
  int hidden = 0;  // h
  int heads = 0;   // a
  int seq = 0;     // s
  int vocab = 0;   // V
  // The LM head's weight is the token embedding's (Press & Wolf 2017): one
  // V x h matrix, copied to the last stage when that sits on another rank,
  // whose two gradients are summed once per step. Untied, the last stage
  // holds its own V x h head.
  bool tie_embeddings = false;
};

// REQUIRES for all: positive sizes (check_shape() says which is not).
void check_shape(const ModelShape& shape);

// FLOPs of one forward pass of one Transformer layer over b sequences:
// 24 b s h^2 (1 + s / 6h). Its input-gradient and weight-gradient passes cost
// as much each (F : I : W = 1 : 1 : 1).
double layer_forward_flops(const ModelShape& shape, double microbatch);
// FLOPs of one forward pass of the logit layer (h x V) over b sequences:
// 2 b s h V; its I and W cost as much each. Never recomputed.
double logits_forward_flops(const ModelShape& shape, double microbatch);
// FLOPs of a training step over a global batch of B sequences.
// Model FLOPs (recompute false; the numerator of MFU as Chowdhery et al.
// 2022, "PaLM", define it): three passes per layer (F, I, W) and three for the logits,
// 72 B s l h^2 (1 + s / 6h) + 6 B s h V. Hardware FLOPs (recompute true; HFU's,
// Narayanan et al. 2021, appendix): the recomputed forward counted too,
// Megatron's 96 B s l h^2 (1 + s / 6h + V / 16 l h). At most 4/3 apart.
double step_flops(const ModelShape& shape, double batch, bool recompute);

// Parameters of one layer: 12 h^2 + 13 h (QKV, projection, two MLP matrices,
// their biases and two layer norms).
double layer_parameters(const ModelShape& shape);
// Token and position embeddings: V h + s h (on the first stage).
double embedding_parameters(const ModelShape& shape);
// The LM head's weight, V h, on the last stage: its own (untied) or a copy of
// the token embedding (tied, when the last stage is on another rank).
double head_parameters(const ModelShape& shape);

// Activation bytes one layer keeps for its backward, per micro-batch of b
// sequences, with t-way tensor parallelism and no sequence parallelism
// (Korthikanti eq. 2): s b h (10 + 24 / t + 5 a s / (h t)); at t = 1,
// 34 s b h + 5 a s^2 b. With full recomputation only the layer's input,
// 2 s b h (Korthikanti section 4.1).
// Selective recomputation drops the attention core's 5 a s / (h t) term
// (Korthikanti eq. 6 without sequence parallelism: s b h (10 + 24 / t)) and,
// as baton's runs it (nn/linear.h's forward_gelu), the GELU's output, 8 s b h
// / t of the MLP's 19 s b h: s b h (10 + 16 / t).
double layer_activation_bytes(const ModelShape& shape, double microbatch, int tensor_parallel,
                              bool recompute, bool selective = false);
// The attention core's forward FLOPs of one layer (QK^T and the weighted
// sum of V: 4 b s^2 h), what selective recomputation runs again.
double attention_core_flops(const ModelShape& shape, double microbatch);

// Bytes of model state per parameter at a rank's peak with Adam in mixed
// precision: 2 (fp16 weights) + 2 (fp16 gradients) + `optimizer_bytes` (12:
// fp32 master weights, momentum and variance; Megatron-LM's fp16 optimizer
// also keeps fp32 gradients, 16, its docs' "20 bytes per parameter"), the
// last divided over d ranks with ZeRO-1 and 2. As baton runs them
// (runtime/zero.h), a stage's gradients are whole until its reduction at the
// end of its backwards (ZeRO-2 saves them only at rest), and under ZeRO-3 its
// weights are whole from its UNSHARD to its RESHARD, the shard (2 / d) held
// beside them: 4 + (2 + optimizer_bytes) / d.
double state_bytes_per_parameter(int data_parallel, int zero, double optimizer_bytes = 12);

// Llama's SwiGLU width (core/model_shapes.h), by its old name here.
using ::baton::llama_ffn_hidden;

}  // namespace baton::plan
