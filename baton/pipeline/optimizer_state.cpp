#include "baton/pipeline/optimizer_state.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <memory>
#include <sstream>
#include <type_traits>

#include "baton/core/error.h"

namespace baton::checkpoint {
namespace {

using StateMap = std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;
using StateKey = StateMap::key_type;

// LibTorch 1.13 keys the state by the printed TensorImpl address, 2.x by the address.
// (A template, so that the branch for the other version is discarded.)
template <typename Key = StateKey>
Key key_of(const torch::Tensor& parameter) {
  void* impl = parameter.unsafeGetTensorImpl();
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream out;
    out << impl;
    return out.str();
  } else {
    return impl;
  }
}

torch::optim::OptimizerParamState* find_state(torch::optim::Optimizer& optimizer,
                                              const torch::Tensor& parameter) {
  auto it = optimizer.state().find(key_of(parameter));
  return it == optimizer.state().end() ? nullptr : it->second.get();
}

void add_if_defined(NamedTensors& out, const char* name, const torch::Tensor& tensor) {
  if (tensor.defined()) out.emplace_back(name, tensor);
}

template <typename AdamState>
NamedTensors adam_state(const AdamState& s) {
  NamedTensors out{{"step", torch::tensor(static_cast<int64_t>(s.step()), torch::kLong)}};
  add_if_defined(out, "exp_avg", s.exp_avg());
  add_if_defined(out, "exp_avg_sq", s.exp_avg_sq());
  add_if_defined(out, "max_exp_avg_sq", s.max_exp_avg_sq());
  return out;
}

class StateReader {
 public:
  StateReader(const NamedTensors& state, const torch::Tensor& parameter, const std::string& file,
              const std::string& name)
      : parameter_(parameter), file_(file), name_(name) {
    for (const auto& [key, tensor] : state) entries_[key] = tensor;
  }
  // The entry `key`, of the parameter's shape and dtype (copied, so the file's storage is not
  // shared).
  torch::Tensor like_parameter(const std::string& key, bool required = true) const {
    const torch::Tensor t = find(key, required);
    if (!t.defined()) return t;
    BATON_CHECK(t.sizes() == parameter_.sizes() && t.scalar_type() == parameter_.scalar_type(),
                "[checkpoint] file ", file_, ": optimizer state ", name_, ".", key, " has ",
                describe(t).dump(), " but parameter ", name_, " has ", describe(parameter_).dump());
    return t.to(parameter_.device()).clone();  // state lives where its parameter does
  }
  int64_t step() const {
    const torch::Tensor t = find("step", true);
    BATON_CHECK(t.numel() == 1, "[checkpoint] file ", file_, ": optimizer state ", name_,
                ".step has ", t.numel(), " elements, expected 1");
    return t.item<int64_t>();
  }

 private:
  torch::Tensor find(const std::string& key, bool required) const {
    auto it = entries_.find(key);
    BATON_CHECK(it != entries_.end() || !required, "[checkpoint] file ", file_,
                ": optimizer state of parameter ", name_, " lacks \"", key, "\"");
    return it == entries_.end() ? torch::Tensor() : it->second;
  }
  std::map<std::string, torch::Tensor> entries_;
  const torch::Tensor& parameter_;
  const std::string& file_;
  const std::string& name_;
};

template <typename AdamState>
std::unique_ptr<AdamState> read_adam(const StateReader& r) {
  auto s = std::make_unique<AdamState>();
  s->step(r.step());
  s->exp_avg(r.like_parameter("exp_avg"));
  s->exp_avg_sq(r.like_parameter("exp_avg_sq"));
  s->max_exp_avg_sq(r.like_parameter("max_exp_avg_sq", false));
  return s;
}

}  // namespace

std::string optimizer_kind(torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<torch::optim::SGD*>(&optimizer)) return "sgd";
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer)) return "adamw";
  if (dynamic_cast<torch::optim::Adam*>(&optimizer)) return "adam";
  BATON_CHECK(false, "[checkpoint] optimizer ", typeid(optimizer).name(),
              " is not supported by checkpoints (supported: torch::optim::SGD, Adam, AdamW)");
}

NamedTensors optimizer_state_of(torch::optim::Optimizer& optimizer,
                                const torch::Tensor& parameter) {
  torch::optim::OptimizerParamState* state = find_state(optimizer, parameter);
  if (state == nullptr) return {};
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state)) return adam_state(*adam);
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state)) return adam_state(*adamw);
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state)) {
    NamedTensors out;
    add_if_defined(out, "momentum_buffer", sgd->momentum_buffer());
    return out;
  }
  BATON_CHECK(false, "[checkpoint] optimizer state ", typeid(*state).name(), " is not supported");
}

void set_optimizer_state(torch::optim::Optimizer& optimizer, const torch::Tensor& parameter,
                         const NamedTensors& state, const std::string& file,
                         const std::string& parameter_name) {
  const std::string kind = optimizer_kind(optimizer);
  optimizer.state().erase(key_of(parameter));
  if (state.empty()) return;
  const StateReader reader(state, parameter, file, parameter_name);
  std::unique_ptr<torch::optim::OptimizerParamState> s;
  if (kind == "adam") {
    s = read_adam<torch::optim::AdamParamState>(reader);
  } else if (kind == "adamw") {
    s = read_adam<torch::optim::AdamWParamState>(reader);
  } else {
    auto sgd = std::make_unique<torch::optim::SGDParamState>();
    sgd->momentum_buffer(reader.like_parameter("momentum_buffer"));
    s = std::move(sgd);
  }
  optimizer.state()[key_of(parameter)] = std::move(s);
}

}  // namespace baton::checkpoint
