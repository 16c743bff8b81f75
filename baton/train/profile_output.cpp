#include "baton/train/profile_output.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/nn/recompute_region.h"
#include "baton/pipeline/pipeline.h"
#include "baton/plan/profile.h"
#include "baton/runtime/memory_profile.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/profile.h"
#include "baton/sim/memory_model.h"
#include "baton/train/data_source.h"
#include "baton/train/memory_report.h"
#include "baton/train/optimizer.h"
#include "baton/train/trainer.h"

namespace baton::train {

constexpr int kRepeats = 5;
// Rounds of the layer timings; each layer keeps its fastest round's times.
// Decision: the fastest round, because this machine's virtual CPUs run the
// same layers up to 1.7x slower for seconds at a time (bench/RESULTS.md
// "Planner calibration on a machine whose CPUs change speed"), longer than
// one round of kRepeats; a round in such a spell once put every layer at
// 1.7x while the whole steps timed after it were at full speed.
constexpr int kRounds = 4;
// Whole steps on one process: not timed, then timed (the fastest counts).
constexpr int kWarmSteps = 2;
constexpr int kTimedSteps = 5;

namespace {

// Median seconds of the optimizer's step over `bytes` of fp32 parameters
// (one flat tensor with a gradient), per parameter byte.
double optimizer_seconds_per_byte(const TrainConfig& c, double bytes) {
  const int64_t n = std::max<int64_t>(1, static_cast<int64_t>(bytes / 4));
  torch::Tensor weight = torch::zeros({n}, torch::kFloat).requires_grad_(true);
  weight.mutable_grad() = torch::full({n}, 1e-3, torch::kFloat);
  auto optimizer = make_optimizer(c, {weight});
  std::vector<double> seconds;
  for (int k = 0; k <= kRepeats; ++k) {
    const auto start = std::chrono::steady_clock::now();
    optimizer->step();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (k > 0) seconds.push_back(s);  // the first allocates the state
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  return seconds[seconds.size() / 2] / (4.0 * n);
}

// The part of `at_b` (timed at micro-batch b) that does not scale with the
// micro-batch, from a second timing `at_half` at h = b / 2 samples: the
// intercept of the line through both, kept within [0, at_b].
double fixed_part(double at_b, double at_half, int64_t b, int64_t h) {
  if (h < 1 || h >= b) return 0;
  const double intercept = (at_half * b - at_b * h) / static_cast<double>(b - h);
  return std::clamp(intercept, 0.0, at_b);
}

// The fastest of kTimedSteps whole steps on one process (pp 1, 1F1B): `microbatches`
// micro-batches of the first rows of `inputs` and `targets`, zero_grad, step
// and the optimizer's step, as `baton train` runs them.
double one_process_step_seconds(const TrainConfig& c, const nn::ModelSpec& model,
                                const torch::Tensor& inputs, const torch::Tensor& targets,
                                int microbatches, int64_t rows) {
  PipelineOptions options;
  options.schedule("1f1b")
      .microbatches(microbatches)
      .pp(1)
      .recompute(c.recompute)
      .precision(c.precision)
      .seed(c.seed);
  Pipeline pipeline(model, model.loss, options);
  auto optimizer = make_optimizer(c, pipeline.parameters());
  const torch::Tensor in = inputs.narrow(0, 0, rows), target = targets.narrow(0, 0, rows);
  std::vector<double> seconds;
  for (int k = 0; k < kWarmSteps + kTimedSteps; ++k) {
    const auto start = std::chrono::steady_clock::now();
    optimizer->zero_grad();
    pipeline.step(in, target);
    optimizer->step();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (k >= kWarmSteps) seconds.push_back(s);
  }
  // The fastest: a step cannot beat its own work, and on a shared machine the
  // slower ones carry other processes' time (a median of 5 once took 54 ms
  // where the same step ran 39 ms before and after, and inflated the fit).
  return *std::min_element(seconds.begin(), seconds.end());
}

// `into` takes each layer's faster forward and backward of itself and `round`
// (`round` as it is when `into` is empty).
void keep_faster(std::vector<partition::LayerCost>& into,
                 const std::vector<partition::LayerCost>& round) {
  if (into.empty()) {
    into = round;
    return;
  }
  for (size_t i = 0; i < into.size(); ++i) {
    into[i].forward_time = std::min(into[i].forward_time, round[i].forward_time);
    into[i].backward_time = std::min(into[i].backward_time, round[i].backward_time);
  }
}

// What whole steps cost beyond the layers and the optimizer, as a part per
// micro-batch (`per_microbatch`) and a part per step (`per_step`): the
// line through the excess at m and at m / 2 micro-batches, both parts kept
// at or above 0 (plan/profile.h).
struct Overheads {
  double per_microbatch = 0, per_step = 0;
  double step_s = 0;  // the measured step at m micro-batches
};
Overheads fit_overheads(double at_m, double at_half, int m, double layers_s, double optimizer_s) {
  Overheads out;
  out.step_s = at_m;
  const double excess_m = at_m - m * layers_s - optimizer_s;
  if (m < 2) {
    out.per_microbatch = std::max(0.0, excess_m);
    return out;
  }
  const int h = m / 2;
  const double excess_h = at_half - h * layers_s - optimizer_s;
  out.per_microbatch = std::max(0.0, (excess_m - excess_h) / (m - h));
  out.per_step = excess_m - m * out.per_microbatch;
  if (out.per_step < 0) {  // the line crosses below 0: the excess is all per micro-batch
    out.per_step = 0;
    out.per_microbatch = std::max(0.0, excess_m / m);
  }
  return out;
}

// Each layer at the micro-batch b; again at half of it, for the part of each
// time that does not scale with it; and at the whole mini-batch (the largest
// micro-batch a plan can choose), where larger operations run more
// efficiently than the line through b / 2 and b says. kRounds rounds of the
// three, each layer's time the fastest round's.
struct ProfiledTimes {
  int64_t b = 0, h = 0;
  std::vector<partition::LayerCost> at_b, at_half, at_batch;
};

ProfiledTimes time_layers(const TrainConfig& c, const nn::ModelSpec& model,
                          const torch::Tensor& sample, const torch::Tensor& inputs) {
  ProfiledTimes t;
  t.b = sample.size(0);
  t.h = t.b / 2;
  const runtime::Precision precision = c.precision;
  for (int round = 0; round < kRounds; ++round) {
    keep_faster(t.at_b, runtime::profile_layers(model, sample, c.seed, kRepeats, precision));
    if (t.h >= 1)
      keep_faster(t.at_half, runtime::profile_layers(model, sample.narrow(0, 0, t.h), c.seed,
                                                     kRepeats, precision));
    if (inputs.size(0) > t.b)
      keep_faster(t.at_batch, runtime::profile_layers(model, inputs, c.seed, kRepeats, precision));
  }
  return t;
}

// The profile's row per layer (times in seconds); adds up the parameter
// bytes and every layer's F + B on one micro-batch.
nlohmann::json layer_rows(const nn::ModelSpec& model, const ProfiledTimes& t,
                          const std::vector<double>& kept, int64_t batch_rows,
                          double& parameter_bytes, double& layers_s) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < t.at_b.size(); ++i) {
    const partition::LayerCost& l = t.at_b[i];
    const double backward_s = l.backward_time / 1e3;
    const auto fixed = [&](double at_b, double at_half) {
      return fixed_part(at_b, at_half, t.b, t.h) / 1e3;
    };
    parameter_bytes += l.parameter_bytes;
    layers_s += (l.forward_time + l.backward_time) / 1e3;
    nlohmann::json timed_larger = nlohmann::json::array();
    if (!t.at_batch.empty()) {
      timed_larger.push_back({{"microbatch", batch_rows},
                              {"forward_s", t.at_batch[i].forward_time / 1e3},
                              {"backward_s", t.at_batch[i].backward_time / 1e3}});
    }
    layers.push_back(
        {{"name", model.layers[i].name},
         {"forward_s", l.forward_time / 1e3},
         {"input_backward_s", backward_s / 2},
         {"weight_backward_s", backward_s / 2},
         {"forward_fixed_s",
          t.at_half.empty() ? 0.0 : fixed(l.forward_time, t.at_half[i].forward_time)},
         {"backward_fixed_s",
          t.at_half.empty() ? 0.0 : fixed(l.backward_time, t.at_half[i].backward_time)},
         {"activation_bytes", kept[i]},
         {"parameter_bytes", l.parameter_bytes},
         {"output_bytes", l.output_bytes},
         {"larger", timed_larger}});
  }
  return layers;
}

}  // namespace

plan::ProfiledMemory measure_profiled_memory(const TrainConfig& c, const nn::ModelSpec& model,
                                             const torch::Tensor& sample) {
  plan::ProfiledMemory memory;
  {
    // Selective: the layers keep what their marked regions keep.
    const nn::SelectiveRecomputeScope selective(c.recompute == Recompute::Selective);
    memory.model = runtime::measure_model_memory(model, nn::Tensors{sample}, c.seed, c.precision);
  }
  for (int i = 0; i < model.num_layers(); ++i) {
    double largest = 0, all = 0;
    for (const auto& p : nn::build_layer(model, i, c.seed).ptr()->parameters()) {
      largest = std::max(largest, bytes_of(p));
      all += bytes_of(p);
    }
    memory.largest_parameter_bytes.push_back(largest);
    memory.parameter_bytes.push_back(all);
  }
  memory.optimizer_state_per_parameter_byte = optimizer_state_per_parameter_byte(c.optimizer);
  memory.gradients_freed = TORCH_VERSION_MAJOR >= 2;  // zero_grad sets them to none
  // As the ranks on this machine's CPU hold their messages.
  const MessageTerms messages = message_terms(c, torch::kCPU);
  memory.sends_copied_up_to = messages.sends_copied_up_to;
  memory.receives_on_arrival_up_to = messages.receives_on_arrival_up_to;
  return memory;
}

void write_profile(const TrainConfig& c) {
  BATON_CHECK(parse_device(c.device) == DeviceKind::Cpu,
              "[train] --profile-out profiles on the cpu; --device ", c.device,
              " is not supported with it");
  at::set_num_threads(c.threads > 0 ? c.threads : available_cores());
  const nn::ModelSpec model = model_spec(c);
  const std::unique_ptr<DataSource> data = make_data_source(c);
  const auto [inputs, targets] = data->batch(0);
  const torch::Tensor sample = runtime::split_microbatches(inputs, c.microbatches).front();
  const ProfiledTimes times = time_layers(c, model, sample, inputs);
  const plan::ProfiledMemory memory = measure_profiled_memory(c, model, sample);
  double parameter_bytes = 0;
  double layers_s = 0;  // F + B of every layer, one micro-batch
  const nlohmann::json layers = layer_rows(model, times, sim::layer_kept_bytes(memory.model),
                                           inputs.size(0), parameter_bytes, layers_s);
  const int64_t b = times.b;
  // Whole steps at m and m / 2 micro-batches of the profiled size.
  const double optimizer_per_byte = optimizer_seconds_per_byte(c, parameter_bytes);
  const int m = c.microbatches;
  const int64_t rows = std::min<int64_t>(m * b, inputs.size(0));
  const double at_m = one_process_step_seconds(c, model, inputs, targets, m, rows);
  const double at_half = m >= 2 ? one_process_step_seconds(c, model, inputs, targets, m / 2,
                                                           std::min<int64_t>((m / 2) * b, rows))
                                : 0;
  const Overheads overheads =
      fit_overheads(at_m, at_half, m, layers_s, optimizer_per_byte * parameter_bytes);
  const nlohmann::json out = {
      {"baton_profile", plan::kProfileVersion},
      {"model",
       {{"model", c.model},
        {"layers", c.layers},
        {"hidden", c.hidden},
        {"heads", c.heads},
        {"context", c.context},
        {"in_features", c.in_features},
        {"classes", c.classes}}},
      {"microbatch", sample.size(0)},
      {"batch", c.batch},
      {"microbatches", c.microbatches},
      {"threads", at::get_num_threads()},
      {"device", c.device},
      {"precision", std::string(to_string(c.precision))},
      {"repeats", kRepeats},
      {"rounds", kRounds},
      {"backward_split", "halved"},
      {"optimizer", std::string(to_string(c.optimizer))},
      {"optimizer_s_per_parameter_byte", optimizer_per_byte},
      {"action_overhead_s", overheads.per_microbatch / 2},
      {"step_overhead_s", overheads.per_step},
      {"one_process_step_s", overheads.step_s},
      {"note",
       "times in seconds per micro-batch, medians of repeats, the fastest of the rounds; the whole "
       "backward was timed and "
       "split evenly into input_backward_s and weight_backward_s; the *_fixed_s parts "
       "do not scale with the micro-batch (fitted from a second profile at half of it); "
       "larger: the layer timed again at the whole mini-batch; "
       "action_overhead_s (each F and each B of a stage) and step_overhead_s are what whole "
       "steps on one process at m and m / 2 micro-batches took beyond the layers and the "
       "optimizer; one_process_step_s is the step at m"},
      {"layers", layers},
      {"memory", plan::profiled_memory_json(memory)}};
  std::ofstream file(c.profile_out);
  file << out.dump(1) << "\n";
  file.close();
  BATON_CHECK(!file.fail(), "[train] --profile-out ", c.profile_out, " could not be written");
}

}  // namespace baton::train
