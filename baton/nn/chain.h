// Chain: a few modules run in order as one layer (Linear + ReLU, conv + ReLU),
// with a plain Tensor -> Tensor forward so it fits in an AnyModule (a
// torch::nn::Sequential's templated forward does not). Children are named
// "0", "1", ... as in a Sequential.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <vector>

namespace baton::nn {

class ChainImpl : public torch::nn::Module {
 public:
  ChainImpl() = default;

  void push_back(torch::nn::AnyModule part);
  template <typename ModuleType>
  void push_back(ModuleType module) {
    push_back(torch::nn::AnyModule(std::move(module)));
  }

  torch::Tensor forward(torch::Tensor input);
  size_t size() const { return parts_.size(); }
  const std::vector<torch::nn::AnyModule>& parts() const { return parts_; }

 private:
  std::vector<torch::nn::AnyModule> parts_;
};

TORCH_MODULE(Chain);

}  // namespace baton::nn
