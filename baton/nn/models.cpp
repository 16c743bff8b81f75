#include "baton/nn/models.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/core/model_shapes.h"
#include "baton/nn/chain.h"
#include "baton/nn/linear.h"
#include "baton/nn/llama.h"
#include "baton/nn/resnet.h"
#include "baton/nn/tensor_parallel.h"
#include "baton/nn/transformer.h"

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <cmath>
#include <sstream>

namespace baton::nn {
namespace {

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(logits, target);
}

// Cross entropy over every position of every sequence.
torch::Tensor token_loss(const torch::Tensor& logits, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              target.reshape({-1}));
}

std::string joined_model_names() {
  std::ostringstream out;
  const auto names = model_names();
  for (size_t i = 0; i < names.size(); ++i) {
    out << (i == 0 ? "" : ", ") << names[i];
  }
  return out.str();
}

// Blocks per ResNet stage: min(blocks, 3) stages, the remainder in the later ones.
std::vector<int> resnet_stage_blocks(int blocks) {
  const int stages = std::min(blocks, 3);
  std::vector<int> counts(static_cast<size_t>(stages), blocks / stages);
  for (int s = stages - blocks % stages; s < stages; ++s) ++counts[static_cast<size_t>(s)];
  return counts;
}

}  // namespace

ModelSpec mlp(int layers, int hidden, int in_features, int classes) {
  BATON_CHECK(layers >= 1 && hidden > 0 && in_features > 0 && classes > 0,
              "[nn.mlp] sizes must be positive: layers ", layers, ", hidden ", hidden,
              ", in_features ", in_features, ", classes ", classes);
  ModelSpec spec;
  spec.name = "mlp";
  for (int i = 0; i < layers; ++i) {
    const int in = i == 0 ? in_features : hidden;
    const int out = i == layers - 1 ? classes : hidden;
    const bool relu = i != layers - 1;
    spec.layers.push_back(
        LayerSpec{"linear" + std::to_string(i) + (relu ? "_relu" : ""), [in, out, relu] {
                    Chain chain;
                    chain->push_back(Linear(in, out));
                    if (relu) {
                      chain->push_back(torch::nn::ReLU());
                    }
                    return torch::nn::AnyModule(chain);
                  }});
    // Megatron's pairs: 2i column-parallel, 2i + 1 row-parallel; a last odd one stays whole.
    const bool row = i % 2 == 1, column = !row && i + 1 < layers;
    if (row || column) {
      const LinearCut cut = row ? LinearCut::kRow : LinearCut::kColumn;
      spec.layers.back().split = [cut](torch::nn::AnyModule whole, const TpGroup& group) {
        return split_linear_chain(whole, group, cut);
      };
    }
  }
  spec.loss = classification_loss;
  return spec;
}

ModelSpec fashion_cnn() {
  ModelSpec spec;
  spec.name = "fashion_cnn";
  spec.layers.push_back(LayerSpec{
      "conv1_relu", [] {
        Chain chain;
        chain->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
        chain->push_back(torch::nn::ReLU());
        return torch::nn::AnyModule(chain);
      }});
  spec.layers.push_back(LayerSpec{
      "pool1",
      [] { return torch::nn::AnyModule(torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2))); }});
  spec.layers.push_back(LayerSpec{
      "conv2_relu", [] {
        Chain chain;
        chain->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
        chain->push_back(torch::nn::ReLU());
        return torch::nn::AnyModule(chain);
      }});
  spec.layers.push_back(LayerSpec{"pool2_flatten", [] {
                                    Chain chain;
                                    chain->push_back(
                                        torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2)));
                                    chain->push_back(torch::nn::Flatten());
                                    return torch::nn::AnyModule(chain);
                                  }});
  spec.layers.push_back(LayerSpec{"fc1_relu", [] {
                                    Chain chain;
                                    chain->push_back(Linear(64 * 7 * 7, 128));
                                    chain->push_back(torch::nn::ReLU());
                                    return torch::nn::AnyModule(chain);
                                  }});
  spec.layers.push_back(LayerSpec{"fc2", [] { return torch::nn::AnyModule(Linear(128, 10)); }});
  spec.loss = classification_loss;
  return spec;
}

ModelSpec resnet(int blocks, int width) {
  BATON_CHECK(blocks >= 1 && width >= 1, "[nn.resnet] sizes must be positive: blocks ", blocks,
              ", width ", width);
  ModelSpec spec;
  spec.name = "resnet";
  spec.layers.push_back(
      LayerSpec{"stem", [width] { return torch::nn::AnyModule(ResNetStem(1, width)); }});
  int64_t channels = width;
  const std::vector<int> stages = resnet_stage_blocks(blocks);
  for (size_t s = 0; s < stages.size(); ++s) {
    const int64_t stage_width = int64_t{width} << s;
    for (int b = 0; b < stages[s]; ++b) {
      const int64_t in = channels;
      const int64_t stride = s > 0 && b == 0 ? 2 : 1;
      spec.layers.push_back(
          LayerSpec{"block" + std::to_string(spec.layers.size() - 1), [in, stage_width, stride] {
                      return torch::nn::AnyModule(Bottleneck(in, stage_width, stride));
                    }});
      channels = BottleneckImpl::kExpansion * stage_width;
    }
  }
  spec.layers.push_back(
      LayerSpec{"head", [channels] { return torch::nn::AnyModule(ResNetHead(channels, 10)); }});
  spec.loss = classification_loss;
  return spec;
}

ModelSpec gpt(int layers, int hidden, int heads, int vocab, int context, bool tie_embeddings) {
  BATON_CHECK(layers >= 1 && hidden > 0 && heads > 0 && vocab > 0 && context > 0,
              "[nn.gpt] sizes must be positive: layers ", layers, ", hidden ", hidden, ", heads ",
              heads, ", vocab ", vocab, ", context ", context);
  BATON_CHECK(hidden % heads == 0, "[nn.gpt] hidden must be a multiple of heads: hidden ", hidden,
              ", heads ", heads);
  ModelSpec spec;
  spec.name = "gpt";
  spec.layers.push_back(LayerSpec{"embedding", [vocab, context, hidden] {
                                    return torch::nn::AnyModule(
                                        TokenEmbedding(vocab, context, hidden));
                                  }});
  for (int i = 0; i < layers; ++i) {
    spec.layers.push_back(LayerSpec{"block" + std::to_string(i), [hidden, heads] {
                                      return torch::nn::AnyModule(TransformerBlock(hidden, heads));
                                    }});
  }
  spec.layers.push_back(LayerSpec{
      "lm_head", [hidden, vocab] { return torch::nn::AnyModule(LmHead(hidden, vocab)); }});
  if (tie_embeddings) spec.tied.push_back({{0, "token.weight"}, {layers + 1, "head.weight"}});
  spec.loss = token_loss;
  return spec;
}

ModelSpec llama(int layers, int hidden, int heads, int vocab, bool tie_embeddings) {
  BATON_CHECK(layers >= 1 && hidden > 0 && heads > 0 && vocab > 0,
              "[nn.llama] sizes must be positive: layers ", layers, ", hidden ", hidden, ", heads ",
              heads, ", vocab ", vocab);
  BATON_CHECK(hidden % heads == 0 && (hidden / heads) % 2 == 0,
              "[nn.llama] hidden must be a multiple of heads with an even head dimension (rotary "
              "turns pairs): hidden ",
              hidden, ", heads ", heads);
  ModelSpec spec;
  spec.name = "llama";
  spec.layers.push_back(LayerSpec{"embedding", [vocab, hidden] {
                                    return torch::nn::AnyModule(LlamaEmbedding(vocab, hidden));
                                  }});
  const int64_t ffn = llama_ffn_hidden(hidden);
  for (int i = 0; i < layers; ++i) {
    spec.layers.push_back(LayerSpec{"block" + std::to_string(i), [hidden, heads, ffn] {
                                      return torch::nn::AnyModule(LlamaBlock(hidden, heads, ffn));
                                    }});
  }
  spec.layers.push_back(LayerSpec{
      "lm_head", [hidden, vocab] { return torch::nn::AnyModule(LlamaHead(hidden, vocab)); }});
  if (tie_embeddings) spec.tied.push_back({{0, "token.weight"}, {layers + 1, "head.weight"}});
  spec.loss = token_loss;
  return spec;
}

std::vector<std::string> model_names() {
  return {"mlp", "fashion_cnn", "gpt", "llama", "resnet"};
}

namespace {

ModelSpec make_unsmoothed(const std::string& name, const ModelOptions& options) {
  const std::vector<std::string> known = model_names();
  BATON_CHECK(!options.tie_embeddings() || name == "gpt" || name == "llama" ||
                  std::find(known.begin(), known.end(), name) == known.end(),
              "[nn.make_model] tie_embeddings ties gpt's and llama's token embedding and LM head; "
              "model '",
              name, "' has no embedding to tie");
  if (name == "mlp") {
    return mlp(options.layers(), options.hidden(), options.in_features(), options.classes());
  }
  if (name == "fashion_cnn") {
    return fashion_cnn();
  }
  if (name == "gpt") {
    return gpt(options.layers(), options.hidden(), options.heads(), options.vocab(),
               options.context(), options.tie_embeddings());
  }
  if (name == "llama") {
    return llama(options.layers(), options.hidden(), options.heads(), options.vocab(),
                 options.tie_embeddings());
  }
  if (name == "resnet") {
    return resnet(options.layers(), options.hidden());
  }
  BATON_CHECK(false, "[nn.make_model] unknown model '", name, "': known models are ",
              joined_model_names());
  return {};
}

}  // namespace

ModelSpec make_model(const std::string& name, const ModelOptions& options) {
  const double smoothing = options.label_smoothing();
  BATON_CHECK(std::isfinite(smoothing) && smoothing >= 0 && smoothing < 1,
              "[nn.make_model] label_smoothing must be in [0, 1), got ", smoothing);
  ModelSpec spec = make_unsmoothed(name, options);
  if (smoothing > 0) {
    // Every zoo loss is a cross entropy over the last dimension's classes.
    spec.loss = [smoothing](const torch::Tensor& logits, const torch::Tensor& target) {
      return torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(-1)}), target.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(smoothing));
    };
  }
  return spec;
}

double parameter_count(const std::string& name, const ModelOptions& o) {
  // A Linear(in, out) holds in * out weights and out biases.
  auto linear = [](double in, double out) { return in * out + out; };
  if (name == "mlp") {
    double count = 0;
    for (int i = 0; i < o.layers(); ++i) {
      count += linear(i == 0 ? o.in_features() : o.hidden(),
                      i == o.layers() - 1 ? o.classes() : o.hidden());
    }
    return count;
  }
  if (name == "fashion_cnn") {
    return linear(1 * 9, 32) + linear(32 * 9, 64) + linear(64 * 7 * 7, 128) + linear(128, 10);
  }
  if (name == "gpt") {
    const double h = o.hidden();
    // Two LayerNorms (2h each), qkv, proj, fc1, fc2.
    const double block =
        4 * h + linear(h, 3 * h) + linear(h, h) + linear(h, 4 * h) + linear(4 * h, h);
    return (o.vocab() + o.context()) * h + o.layers() * block + 2 * h + linear(h, o.vocab());
  }
  if (name == "llama") {
    const double h = o.hidden();
    const double ffn = static_cast<double>(llama_ffn_hidden(o.hidden()));
    // Two RMSNorms, wq, wk, wv, wo, gate, up, down; no biases.
    const double block = 2 * h + 4 * h * h + 3 * h * ffn;
    return o.vocab() * h + o.layers() * block + h + h * o.vocab();
  }
  if (name == "resnet") {
    // Convolutions have no bias; a norm holds a scale and a shift per channel.
    auto conv_norm = [](double in, double out, double kernel) {
      return in * out * kernel * kernel + 2 * out;
    };
    double channels = o.hidden();
    double count = conv_norm(1, channels, 3);
    const std::vector<int> stages = resnet_stage_blocks(o.layers());
    for (size_t s = 0; s < stages.size(); ++s) {
      const double width = o.hidden() * std::pow(2.0, static_cast<double>(s));
      const double out = 4 * width;
      for (int b = 0; b < stages[s]; ++b) {
        count +=
            conv_norm(channels, width, 1) + conv_norm(width, width, 3) + conv_norm(width, out, 1);
        if (b == 0 && (s > 0 || channels != out)) count += conv_norm(channels, out, 1);
        channels = out;
      }
    }
    return count + linear(channels, 10);
  }
  make_model(name, o);  // throws, naming the known models
  return 0;
}

}  // namespace baton::nn
