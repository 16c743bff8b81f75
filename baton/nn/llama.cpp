#include "baton/nn/llama.h"

#include "baton/core/error.h"
#include "baton/nn/recompute_region.h"

#include <torch/nn/init.h>
#include <torch/nn/options/linear.h>

#include <cmath>
#include <limits>
#include <utility>

namespace baton::nn {
namespace {

Linear bias_free(int64_t in, int64_t out) {
  return Linear(torch::nn::LinearOptions(in, out).bias(false));
}

}  // namespace

namespace detail {

void check_llama_input(const Tensors& input, const char* layer) {
  BATON_CHECK(input.size() == 2 || input.size() == 3, "[nn.", layer,
              "] takes {hidden, positions} or {hidden, positions, mask}: got ", input.size(),
              " tensors");
  const torch::Tensor& x = input[0];
  const torch::Tensor& positions = input[1];
  BATON_CHECK(x.defined() && x.dim() == 3, "[nn.", layer,
              "] hidden must be [batch, time, hidden]: got ",
              x.defined() ? x.sizes() : torch::IntArrayRef{});
  BATON_CHECK(positions.defined() && positions.scalar_type() == torch::kLong &&
                  positions.sizes() == x.sizes().slice(0, 2),
              "[nn.", layer, "] positions must be int64 [batch, time] = ", x.sizes().slice(0, 2),
              ": got ", positions.defined() ? positions.sizes() : torch::IntArrayRef{});
  if (input.size() == 3) {
    BATON_CHECK(input[2].defined() && input[2].sizes() == x.sizes().slice(0, 2), "[nn.", layer,
                "] the mask must be [batch, time] = ", x.sizes().slice(0, 2), ": got ",
                input[2].defined() ? input[2].sizes() : torch::IntArrayRef{});
  }
}

}  // namespace detail

RmsNormImpl::RmsNormImpl(int64_t dim, double epsilon) : eps(epsilon) {
  BATON_CHECK(dim > 0, "[nn.RmsNorm] the dimension must be positive: got ", dim);
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const torch::Tensor h = x.scalar_type() == weight.scalar_type() ? x : x.to(weight.scalar_type());
  return h * torch::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps) * weight;
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& positions, double theta) {
  const int64_t d = x.size(-1);
  BATON_CHECK(d % 2 == 0, "[nn.apply_rotary] the head dimension must be even: got ", d);
  const int64_t half = d / 2;
  const auto fp32 = x.options().dtype(torch::kFloat);
  const torch::Tensor inverse_frequency =
      torch::pow(theta, torch::arange(half, fp32) * (-2.0 / static_cast<double>(d)));
  // [B, T, d/2] -> [B, 1, T, d/2], broadcast over the heads.
  const torch::Tensor angles =
      (positions.to(torch::kFloat).unsqueeze(-1) * inverse_frequency).unsqueeze(1);
  const torch::Tensor cos = angles.cos().to(x.scalar_type());
  const torch::Tensor sin = angles.sin().to(x.scalar_type());
  const torch::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return torch::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
}

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& mask) {
  const int64_t batch = q.size(0), heads = q.size(1), time = q.size(2), d = q.size(3);
  // The recomputed region (recompute_region.h): the mask, an input without
  // a gradient, rides in the closure.
  const torch::Tensor mixed = recomputed_product(
      [mask](const std::vector<torch::Tensor>& in) {
        const int64_t b = in[0].size(0), t = in[0].size(2), dim = in[0].size(3);
        // Scaled and masked in place (transformer.cpp's causal_attention_core).
        torch::Tensor scores = in[0].matmul(in[1].transpose(-2, -1));
        scores.div_(std::sqrt(static_cast<double>(dim)));
        const auto bool_options = in[0].options().dtype(torch::kBool);
        torch::Tensor allowed = torch::ones({t, t}, bool_options).tril();  // [T, T]
        if (mask.defined()) {
          // Key j is seen when it is a real token, or when it is the query itself.
          const torch::Tensor keys =
              mask.to(torch::kBool).view({b, 1, 1, t}).logical_or(torch::eye(t, bool_options));
          allowed = allowed.logical_and(keys);  // [B, 1, T, T]
        }
        // As an additive bias (transformer.h's causal_bias says why).
        const torch::Tensor bias =
            torch::zeros(allowed.sizes(), scores.options())
                .masked_fill_(allowed.logical_not(), -std::numeric_limits<double>::infinity());
        return scores.add_(bias).softmax(-1);  // [B, heads, T, T], times v: [B, heads, T, d]
      },
      {q, k}, v);
  return mixed.transpose(1, 2).reshape({batch, time, heads * d});
}

LlamaEmbeddingImpl::LlamaEmbeddingImpl(int64_t vocab, int64_t hidden) {
  BATON_CHECK(vocab > 0 && hidden > 0, "[nn.LlamaEmbedding] sizes must be positive: vocab ", vocab,
              ", hidden ", hidden);
  token = register_module("token", torch::nn::Embedding(vocab, hidden));
  torch::nn::init::normal_(token->weight, 0.0, 0.02);
}

Tensors LlamaEmbeddingImpl::forward(Tensors input) {
  BATON_CHECK(input.size() == 1 || input.size() == 2,
              "[nn.LlamaEmbedding] takes {tokens} or {tokens, mask}: got ", input.size(),
              " tensors");
  const torch::Tensor& tokens = input[0];
  BATON_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.scalar_type() == torch::kLong,
              "[nn.LlamaEmbedding] tokens must be int64 [batch, time]: got ",
              tokens.defined() ? tokens.scalar_type() : torch::kLong, " ",
              tokens.defined() ? tokens.sizes() : torch::IntArrayRef{});
  const int64_t batch = tokens.size(0), time = tokens.size(1);
  torch::Tensor positions =
      torch::arange(time, tokens.options()).expand({batch, time}).contiguous();
  Tensors out{token(tokens), std::move(positions)};
  if (input.size() == 2) {
    BATON_CHECK(input[1].defined() && input[1].sizes() == tokens.sizes(),
                "[nn.LlamaEmbedding] the mask must be [batch, time] = ", tokens.sizes(), ": got ",
                input[1].defined() ? input[1].sizes() : torch::IntArrayRef{});
    out.push_back(input[1].to(torch::kBool));
  }
  return out;
}

LlamaBlockImpl::LlamaBlockImpl(int64_t hidden, int64_t num_heads, int64_t ffn_hidden)
    : heads(num_heads) {
  BATON_CHECK(
      hidden > 0 && heads > 0 && ffn_hidden > 0 && hidden % heads == 0 && (hidden / heads) % 2 == 0,
      "[nn.LlamaBlock] hidden must be a positive multiple of heads with an even head "
      "dimension: hidden ",
      hidden, ", heads ", heads, ", ffn_hidden ", ffn_hidden);
  attention_norm = register_module("attention_norm", RmsNorm(hidden));
  wq = register_module("wq", bias_free(hidden, hidden));
  wk = register_module("wk", bias_free(hidden, hidden));
  wv = register_module("wv", bias_free(hidden, hidden));
  wo = register_module("wo", bias_free(hidden, hidden));
  ffn_norm = register_module("ffn_norm", RmsNorm(hidden));
  gate = register_module("gate", bias_free(hidden, ffn_hidden));
  up = register_module("up", bias_free(hidden, ffn_hidden));
  down = register_module("down", bias_free(ffn_hidden, hidden));
}

Tensors LlamaBlockImpl::forward(Tensors input) {
  detail::check_llama_input(input, "LlamaBlock");
  const int64_t head_dim = input[0].size(2) / heads;
  return detail::llama_block_forward(*this, std::move(input), heads, head_dim);
}

LlamaHeadImpl::LlamaHeadImpl(int64_t hidden, int64_t vocab) {
  norm = register_module("norm", RmsNorm(hidden));
  head = register_module("head", bias_free(hidden, vocab));
}

torch::Tensor LlamaHeadImpl::forward(Tensors input) {
  detail::check_llama_input(input, "LlamaHead");
  return head(norm(input[0]));
}

}  // namespace baton::nn
