#include "baton/data/synthetic.h"

#include "baton/core/error.h"

namespace baton::data {

Examples synthetic_classification(const SyntheticOptions& options) {
  BATON_CHECK(options.samples() > 0 && options.features() > 0 && options.classes() > 1,
              "[data.synthetic] need samples > 0, features > 0, classes > 1: got samples ",
              options.samples(), ", features ", options.features(), ", classes ",
              options.classes());
  at::Generator input_generator = make_generator(options.seed());
  at::Generator teacher_generator = make_generator(options.teacher_seed());
  const auto inputs =
      torch::randn({options.samples(), options.features()}, input_generator, torch::kFloat);
  const auto weight =
      torch::randn({options.features(), options.classes()}, teacher_generator, torch::kFloat);
  const auto bias = torch::randn({options.classes()}, teacher_generator, torch::kFloat);
  return Examples{inputs, inputs.matmul(weight).add(bias).argmax(1)};
}

}  // namespace baton::data
