// The layers of a Llama-style decoder (Touvron et al. 2023), each one
// pipeline layer: token embedding, pre-norm blocks (RMSNorm, causal
// self-attention with rotary position embeddings, SwiGLU MLP), final RMSNorm
// + LM head. Projections are bias-free baton Linears, so their weight
// gradients can be deferred.
//
// A stage boundary carries {hidden float [B, T, H], positions int64 [B, T]}
// and, when the model is given a padding mask, mask bool [B, T] as a third
// tensor (true: a real token). The embedding makes the positions; every
// block passes positions and mask on unchanged.
#pragma once

#include "baton/nn/layer_call.h"
#include "baton/nn/linear.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>
#include <utility>

namespace baton::nn {

// RMSNorm (Zhang & Sennrich 2019): x / sqrt(mean(x^2 over the last
// dimension) + eps) * weight, computed in the weight's dtype (fp32, as
// layer_norm_fp32 in transformer.h) and returned in it.
class RmsNormImpl : public torch::nn::Module {
 public:
  explicit RmsNormImpl(int64_t dim, double eps = 1e-5);
  torch::Tensor forward(const torch::Tensor& x);

  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(RmsNorm);

// Rotary position embedding (Su et al. 2021) in the "rotate half" layout of
// GPT-NeoX and Hugging Face's Llama: the pair (x_i, x_{i + d/2}) of each head
// turned by the angle position * theta^(-2i/d), i < d/2.
// x [B, heads, T, d] (d even), positions int64 [B, T] -> same shape as x.
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& positions,
                           double theta = 10000.0);

// Softmax attention of q, k, v [B, heads, T, d], causal (query t sees keys
// <= t); with `mask` (bool [B, T], may be undefined) also blind to padded
// keys, except that every query sees itself, so no row is empty.
// -> [B, T, heads * d].
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask);

// {tokens int64 [B, T]} or {tokens, mask [B, T]} -> {hidden [B, T, H],
// positions int64 [B, T] (0..T-1 in every row), mask as bool when given}.
class LlamaEmbeddingImpl : public torch::nn::Module {
 public:
  LlamaEmbeddingImpl(int64_t vocab, int64_t hidden);
  Tensors forward(Tensors input);

  torch::nn::Embedding token{nullptr};
};
TORCH_MODULE(LlamaEmbedding);

// Pre-norm block: h = x + wo(attention(rotary(wq n), rotary(wk n), wv n))
// with n = attention_norm(x), then h + down(silu(gate(m)) * up(m)) with
// m = ffn_norm(h). {x, positions[, mask]} -> {block output, positions[, mask]}.
// REQUIRES: hidden % heads == 0 and hidden / heads even.
class LlamaBlockImpl : public torch::nn::Module {
 public:
  LlamaBlockImpl(int64_t hidden, int64_t heads, int64_t ffn_hidden);
  Tensors forward(Tensors input);

  int64_t heads;
  RmsNorm attention_norm{nullptr};
  Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  RmsNorm ffn_norm{nullptr};
  Linear gate{nullptr}, up{nullptr}, down{nullptr};
};
TORCH_MODULE(LlamaBlock);

// Final RMSNorm and LM head: {hidden, positions[, mask]} -> logits [B, T, vocab].
class LlamaHeadImpl : public torch::nn::Module {
 public:
  LlamaHeadImpl(int64_t hidden, int64_t vocab);
  torch::Tensor forward(Tensors input);

  RmsNorm norm{nullptr};
  Linear head{nullptr};
};
TORCH_MODULE(LlamaHead);

namespace detail {

// What a block or head reads from its input list: BATON_CHECKs, naming
// `layer`, that it is {hidden [B, T, H], positions int64 [B, T][, mask [B, T]]}.
void check_llama_input(const Tensors& input, const char* layer);

// LlamaBlock's forward over the `heads` heads of `head_dim` that `block`
// holds: the whole block's, or a tensor-parallel share's
// (TensorParallelLlamaBlock, whose wq, wk, wv, gate and up are column-parallel
// and wo and down row-parallel). `block` has LlamaBlock's members by name.
template <class Block>
Tensors llama_block_forward(Block& block, Tensors input, int64_t heads, int64_t head_dim) {
  const torch::Tensor& x = input[0];
  const torch::Tensor& positions = input[1];
  const torch::Tensor mask = input.size() == 3 ? input[2] : torch::Tensor();
  const int64_t batch = x.size(0), time = x.size(1);
  auto split_heads = [&](const torch::Tensor& t) {  // [B, T, *] -> [B, heads, T, head_dim]
    return t.view({batch, time, heads, head_dim}).transpose(1, 2);
  };
  const torch::Tensor n = block.attention_norm(x);
  const torch::Tensor q = apply_rotary(split_heads(block.wq(n)), positions);
  const torch::Tensor k = apply_rotary(split_heads(block.wk(n)), positions);
  const torch::Tensor h = x + block.wo(causal_attention(q, k, split_heads(block.wv(n)), mask));
  const torch::Tensor m = block.ffn_norm(h);
  input[0] = h + block.down(torch::silu(block.gate(m)) * block.up(m));
  return input;
}

}  // namespace detail
}  // namespace baton::nn
