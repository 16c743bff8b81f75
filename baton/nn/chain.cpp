#include "baton/nn/chain.h"

#include <string>

namespace baton::nn {

void ChainImpl::push_back(torch::nn::AnyModule part) {
  register_module(std::to_string(parts_.size()), part.ptr());
  parts_.push_back(std::move(part));
}

torch::Tensor ChainImpl::forward(torch::Tensor input) {
  for (auto& part : parts_) {
    input = part.forward(input);
  }
  return input;
}

}  // namespace baton::nn
