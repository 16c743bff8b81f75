// The layers of a small decoder-only transformer (GPT), each one pipeline
// layer: token + position embedding, pre-LN blocks, final norm + LM head.
// Projections are baton Linears, so their weight gradients can be deferred.
#pragma once

#include "baton/nn/linear.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>

namespace baton::nn {

// tokens int64 [B, T] -> [B, T, hidden]. REQUIRES: T <= context.
class TokenEmbeddingImpl : public torch::nn::Module {
 public:
  TokenEmbeddingImpl(int64_t vocab, int64_t context, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& tokens);

  torch::nn::Embedding token{nullptr};
  torch::nn::Embedding position{nullptr};
};
TORCH_MODULE(TokenEmbedding);

// `norm(x)` in the norm's own dtype (fp32): under bf16/fp16 autocast the
// residual stream is in the compute dtype, which LibTorch 1.13's CPU
// layer_norm does not mix with fp32 weights; normalising in fp32 is also what
// autocast does on CUDA.
torch::Tensor layer_norm_fp32(torch::nn::LayerNorm& norm, const torch::Tensor& x);

// The causal mask as an additive bias [T, T]: 0 where key <= query, -inf
// above the diagonal. Scores + bias are a masked fill's values (x + 0 is x),
// at a tenth of its time here (LibTorch 1.13's masked_fill_ with a broadcast
// mask took 2.9 ms against add_'s 0.2 at 4 x 8 heads x 256^2), and the
// add's backward passes the gradient through, where the fill's wrote a copy.
torch::Tensor causal_bias(int64_t time, const torch::TensorOptions& options);

// gpt's attention core: softmax(q k^T / sqrt(d), causal) v for q, k, v
// [B, heads, T, d] -> [B, heads, T, d]; a recomputed region
// (recompute_region.h) under --recompute selective.
torch::Tensor causal_attention_core(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v);

// Pre-LN block: x + attention(ln1(x)), then + mlp(ln2(x)); [B, T, H] -> same.
// Attention is causal: position t sees positions <= t only.
// REQUIRES: hidden % heads == 0.
class TransformerBlockImpl : public torch::nn::Module {
 public:
  TransformerBlockImpl(int64_t hidden, int64_t heads);
  torch::Tensor forward(const torch::Tensor& x);

  int64_t heads;
  torch::nn::LayerNorm ln1{nullptr};
  Linear qkv{nullptr};
  Linear proj{nullptr};
  torch::nn::LayerNorm ln2{nullptr};
  Linear fc1{nullptr};
  Linear fc2{nullptr};

 private:
  torch::Tensor attention(const torch::Tensor& x);
};
TORCH_MODULE(TransformerBlock);

// Final LayerNorm and LM head: [B, T, H] -> logits [B, T, vocab].
class LmHeadImpl : public torch::nn::Module {
 public:
  LmHeadImpl(int64_t hidden, int64_t vocab);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::LayerNorm ln{nullptr};
  Linear head{nullptr};
};
TORCH_MODULE(LmHead);

}  // namespace baton::nn
