#include "baton/nn/layer_call.h"

#include <c10/util/Exception.h>
#include <c10/util/TypeIndex.h>

#include "baton/core/error.h"

namespace baton::nn {
namespace {

// AnyModule's message when a value is not the type forward() takes.
bool is_argument_type_error(const c10::Error& e) {
  return e.msg().find("Expected argument #0 to be of type") != std::string::npos;
}

std::string described(const LayerSlot& layer) {
  return detail::concat("layer ", layer.index, " (\"", layer.name, "\")");
}

Tensors unpack_result(const LayerSlot& layer, torch::nn::AnyValue&& out) {
  if (auto* tensor = out.try_get<torch::Tensor>()) return {std::move(*tensor)};
  if (auto* tensors = out.try_get<Tensors>()) return std::move(*tensors);
  BATON_CHECK(false, "[nn] ", described(layer), " returned ", c10::demangle(out.type_info().name()),
              "; a pipeline layer returns torch::Tensor or std::vector<torch::Tensor> (several "
              "tensors cross a stage boundary as a vector)");
  return {};
}

std::string source(const LayerSlot* previous) {
  return previous ? described(*previous) + " returned" : std::string("the stage's input is");
}

}  // namespace

Tensors call_layer(LayerSlot& layer, const Tensors& input, const LayerSlot* previous) {
  if (layer.input == LayerInput::kUnknown) {
    if (input.size() == 1) {
      try {
        Tensors out = unpack_result(layer, layer.module.any_forward(input.front()));
        layer.input = LayerInput::kTensor;
        return out;
      } catch (const c10::Error& e) {
        if (!is_argument_type_error(e)) throw;
      }
    }
    try {
      Tensors out = unpack_result(layer, layer.module.any_forward(input));
      layer.input = LayerInput::kTensors;
      return out;
    } catch (const c10::Error& e) {
      if (!is_argument_type_error(e)) throw;
      // Neither: it takes one tensor and was given another count.
      BATON_CHECK(input.size() == 1, "[nn] ", described(layer), " takes one torch::Tensor but ",
                  source(previous), " ", input.size(),
                  " tensors; make it take std::vector<torch::Tensor>, or return one tensor");
      const std::string what = e.what_without_backtrace();
      BATON_CHECK(false, "[nn] ", described(layer),
                  " takes neither torch::Tensor nor std::vector<torch::Tensor>: ",
                  what.substr(0, what.find('\n')));
    }
  }
  if (layer.input == LayerInput::kTensor) {
    BATON_CHECK(input.size() == 1, "[nn] ", described(layer), " takes one torch::Tensor but ",
                source(previous), " ", input.size(),
                " tensors; make it take std::vector<torch::Tensor>, or return one tensor");
    return unpack_result(layer, layer.module.any_forward(input.front()));
  }
  return unpack_result(layer, layer.module.any_forward(input));
}

double bytes_of(const Tensors& tensors) {
  double bytes = 0;
  for (const auto& t : tensors) {
    if (t.defined()) bytes += static_cast<double>(t.numel() * t.element_size());
  }
  return bytes;
}

}  // namespace baton::nn
