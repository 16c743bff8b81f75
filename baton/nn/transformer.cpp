#include "baton/nn/transformer.h"

#include "baton/core/error.h"
#include "baton/nn/recompute_region.h"

#include <torch/nn/init.h>

#include <cmath>
#include <limits>

namespace baton::nn {

torch::Tensor layer_norm_fp32(torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  const auto dtype = norm->weight.scalar_type();
  return norm(x.scalar_type() == dtype ? x : x.to(dtype));
}

TokenEmbeddingImpl::TokenEmbeddingImpl(int64_t vocab, int64_t context, int64_t hidden) {
  BATON_CHECK(vocab > 0 && context > 0 && hidden > 0,
              "[nn.TokenEmbedding] sizes must be positive: vocab ", vocab, ", context ", context,
              ", hidden ", hidden);
  token = register_module("token", torch::nn::Embedding(vocab, hidden));
  position = register_module("position", torch::nn::Embedding(context, hidden));
  // GPT-2's init; torch's N(0, 1) makes the residual stream too large.
  torch::nn::init::normal_(token->weight, 0.0, 0.02);
  torch::nn::init::normal_(position->weight, 0.0, 0.02);
}

torch::Tensor TokenEmbeddingImpl::forward(const torch::Tensor& tokens) {
  BATON_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kLong,
              "[nn.TokenEmbedding] tokens must be int64 [batch, time]: got ", tokens.scalar_type(),
              " ", tokens.sizes());
  const int64_t time = tokens.size(1);
  const int64_t context = position->options.num_embeddings();
  BATON_CHECK(time <= context, "[nn.TokenEmbedding] sequence length ", time,
              " exceeds the context ", context);
  const auto positions = torch::arange(time, tokens.options());
  return token(tokens) + position(positions);
}

TransformerBlockImpl::TransformerBlockImpl(int64_t hidden, int64_t num_heads) : heads(num_heads) {
  BATON_CHECK(hidden > 0 && heads > 0 && hidden % heads == 0,
              "[nn.TransformerBlock] hidden must be a positive multiple of heads: hidden ", hidden,
              ", heads ", heads);
  ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
  qkv = register_module("qkv", Linear(hidden, 3 * hidden));
  proj = register_module("proj", Linear(hidden, hidden));
  ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
  fc1 = register_module("fc1", Linear(hidden, 4 * hidden));
  fc2 = register_module("fc2", Linear(4 * hidden, hidden));
}

torch::Tensor causal_bias(int64_t time, const torch::TensorOptions& options) {
  return torch::full({time, time}, -std::numeric_limits<double>::infinity(), options)
      .triu(/*diagonal=*/1);
}

torch::Tensor causal_attention_core(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v) {
  return recomputed_product(
      [](const std::vector<torch::Tensor>& in) {
        const int64_t time = in[0].size(2), head_dim = in[0].size(3);
        // Scaled and masked in place: the values of the out-of-place ops,
        // without two more s^2 tensors a head (matmul saves no output).
        torch::Tensor scores = in[0].matmul(in[1].transpose(-2, -1));
        scores.div_(std::sqrt(static_cast<double>(head_dim)));
        return scores.add_(causal_bias(time, scores.options())).softmax(-1);
      },
      {q, k}, v);
}

torch::Tensor TransformerBlockImpl::attention(const torch::Tensor& x) {
  const int64_t batch = x.size(0);
  const int64_t time = x.size(1);
  const int64_t hidden = x.size(2);
  const int64_t head_dim = hidden / heads;
  // [B, T, 3H] -> 3 x [B, heads, T, head_dim]
  const auto qkv_heads = qkv(x).view({batch, time, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  const auto mixed = causal_attention_core(qkv_heads[0], qkv_heads[1], qkv_heads[2]);
  return proj(mixed.transpose(1, 2).reshape({batch, time, hidden}));
}

torch::Tensor TransformerBlockImpl::forward(const torch::Tensor& x) {
  BATON_CHECK(x.dim() == 3, "[nn.TransformerBlock] input must be [batch, time, hidden]: got ",
              x.sizes());
  auto h = x + attention(layer_norm_fp32(ln1, x));
  // Under selective recomputation fc2 keeps fc1's output, not the GELU's.
  return h + fc2->forward_gelu(fc1(layer_norm_fp32(ln2, h)));
}

LmHeadImpl::LmHeadImpl(int64_t hidden, int64_t vocab) {
  ln = register_module("ln", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})));
  head = register_module("head", Linear(hidden, vocab));
}

torch::Tensor LmHeadImpl::forward(const torch::Tensor& x) {
  return head(layer_norm_fp32(ln, x));
}

}  // namespace baton::nn
