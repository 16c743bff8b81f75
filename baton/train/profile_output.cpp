#include "baton/train/profile_output.h"

#include <ATen/Parallel.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/profile.h"
#include "baton/train/data_source.h"
#include "baton/train/trainer.h"

namespace baton::train {

constexpr int kRepeats = 5;

void write_profile(const TrainConfig& c) {
  BATON_CHECK(c.device == "cpu", "[train] --profile-out profiles on the cpu; --device ", c.device,
              " is not supported with it");
  at::set_num_threads(c.threads > 0 ? c.threads : available_cores());
  const nn::ModelSpec model = model_spec(c);
  const std::unique_ptr<DataSource> data = make_data_source(c);
  const torch::Tensor sample =
      runtime::split_microbatches(data->batch(0).first, c.microbatches).front();
  const std::vector<partition::LayerCost> costs = runtime::profile_layers(model, sample, c.seed, kRepeats);

  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < costs.size(); ++i) {
    const partition::LayerCost& l = costs[i];
    const double backward_s = l.backward_time / 1e3;
    layers.push_back({{"name", model.layers[i].name},
                      {"forward_s", l.forward_time / 1e3},
                      {"input_backward_s", backward_s / 2},
                      {"weight_backward_s", backward_s / 2},
                      {"activation_bytes", l.activation_bytes},
                      {"parameter_bytes", l.parameter_bytes},
                      {"output_bytes", l.output_bytes}});
  }
  const nlohmann::json out = {
      {"baton_profile", 1},
      {"model", {{"model", c.model}, {"layers", c.layers}, {"hidden", c.hidden},
                 {"heads", c.heads}, {"context", c.context}, {"in_features", c.in_features},
                 {"classes", c.classes}}},
      {"microbatch", sample.size(0)},
      {"batch", c.batch},
      {"microbatches", c.microbatches},
      {"threads", at::get_num_threads()},
      {"device", c.device},
      {"repeats", kRepeats},
      {"backward_split", "halved"},
      {"note", "times in seconds per micro-batch, medians; the whole backward was timed and "
               "split evenly into input_backward_s and weight_backward_s"},
      {"layers", layers}};
  std::ofstream file(c.profile_out);
  file << out.dump(1) << "\n";
  file.close();
  BATON_CHECK(!file.fail(), "[train] --profile-out ", c.profile_out, " could not be written");
}

}  // namespace baton::train
