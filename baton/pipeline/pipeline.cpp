#include "baton/pipeline/pipeline.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <mutex>

#include "baton/comm/device_choice.h"
#include "baton/comm/nccl.h"
#include "baton/comm/rank_layout.h"
#include "baton/core/blas_kernels.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/nn/tensor_parallel.h"
#include "baton/partition/balance.h"
#include "baton/pipeline/pipeline_plan.h"
#include "baton/pipeline/pipeline_state.h"
#include "baton/runtime/memory_profile.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/profile.h"
#include "baton/runtime/stage.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/runnable.h"
#include "baton/schedule/sharding.h"
#include "baton/topology/topology.h"

namespace baton {

namespace {

// Once per process: OpenBLAS on its generic kernels (core/blas_kernels.h).
void warn_about_openblas_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string warning = openblas_kernels_warning();
    if (!warning.empty()) std::cerr << warning << '\n';
  });
}

// Sums a scalar over the ranks of `group`; `what` names the collective for its errors.
double sum_over(comm::Communicator& group, double value, const std::string& what) {
  std::vector<torch::Tensor> t{torch::tensor({value}, torch::kFloat64)};
  group.all_reduce_sum(t, what);
  return t[0].item<double>();
}

void check_options(const PipelineOptions& o) {
  BATON_CHECK(o.microbatches() >= 1, "[pipeline] microbatches must be at least 1, got ",
              o.microbatches());
  BATON_CHECK(o.virtual_stages() >= 0,
              "[pipeline] virtual_stages must be >= 0 (0: the schedule's "
              "default), got ",
              o.virtual_stages());
  BATON_CHECK(o.dp() >= 1, "[pipeline] dp must be at least 1, got ", o.dp());
  BATON_CHECK(o.tp() >= 1, "[pipeline] tp must be at least 1, got ", o.tp());
  BATON_CHECK(o.zero() >= 0 && o.zero() <= schedule::kMaxZeroStage,
              "[pipeline] zero must be 0 to 3 (the ZeRO stage: 1 shards the optimizer state over "
              "the dp replicas, 2 the gradients too, 3 the parameters too), got ",
              o.zero());
  BATON_CHECK(std::isfinite(o.bucket_mb()) && o.bucket_mb() > 0,
              "[pipeline] bucket_mb must be a finite size above 0 MiB, got ", o.bucket_mb());
  BATON_CHECK(std::isfinite(o.clip_grad_norm()) && o.clip_grad_norm() >= 0,
              "[pipeline] clip_grad_norm must be a finite norm, or 0 for no clipping, got ",
              o.clip_grad_norm());
  runtime::check_pipemare_options(o.pipemare());
}

// Where this rank runs: the world it joins (the given communicator; the one
// rank_env, or else torchrun's variables, describe; or a solo one), its
// place in the dp x pp x tp grid with its groups (collective), and its device.
struct Joined {
  comm::RankLayout layout;
  torch::Device device = torch::kCPU;
};

Joined join(const PipelineOptions& o) {
  std::optional<comm::RankEnv> env = o.rank_env();
  if (!env) env = comm::rank_env_from_environment();
  int world_size = 1;
  if (o.communicator()) {
    world_size = o.communicator()->world_size();
  } else if (env) {
    world_size = env->world_size;
  }
  // Without a launcher's LOCAL_RANK, a given communicator's rank is the local one.
  const int local_rank = env ? env->local_rank : (o.communicator() ? o.communicator()->rank() : 0);
  Joined joined;
  joined.device = comm::device_for_local_rank(o.device(), local_rank);
  const int dp = o.dp(), tp = o.tp();
  // The tp factor is named only when there is one (dp-only grids read as before).
  const std::string tp_text = tp > 1 ? detail::concat(" x tp=", tp) : std::string();
  BATON_CHECK(o.pp() > 0 || world_size % (dp * tp) == 0, "[pipeline] dp=", dp, tp_text,
              " does not divide the world of ", world_size, " ranks into equal pipelines");
  const int pp = o.pp() > 0 ? o.pp() : world_size / (dp * tp);
  BATON_CHECK(dp * pp * tp == world_size, "[pipeline] dp=", dp, " x pp=", pp, tp_text, " is ",
              dp * pp * tp, " ranks but the world has ", world_size, "; each rank runs one ",
              tp > 1 ? "tensor-parallel share of one " : "", "pipeline rank of one replica");
  std::shared_ptr<comm::Communicator> world = o.communicator();
  if (!world && world_size == 1) world = comm::solo(o.timeout());
  if (!world) {
    const auto connect_options = comm::ConnectOptions{}
                                     .set_rank(env->rank)
                                     .set_world_size(env->world_size)
                                     .set_master_addr(env->master_addr)
                                     .set_master_port(env->master_port)
                                     .set_agent_store_port(env->agent_store_port)
                                     .set_timeout(o.timeout())
                                     .set_transport(o.transport());
    // Stages on a GPU of their own talk over NCCL on that GPU; on the CPU, or
    // on one GPU that the machine's ranks share ("cuda:i" named with several
    // local ranks; NCCL takes one GPU per rank), over shared memory or Gloo,
    // the executor moving what arrives to the device.
    const bool shared_gpu = o.device().has_index() && env->local_world_size > 1;
    world = std::make_shared<comm::Communicator>(
        joined.device.is_cuda() && !shared_gpu
            ? comm::connect_nccl(connect_options, joined.device.index())
            : comm::connect(connect_options));
  }
  joined.layout =
      comm::make_rank_layout(std::move(world), topology::Topology(dp, pp, tp), local_rank);
  return joined;
}

// Every layer's profiled times on the options' sample, averaged over the
// world's ranks so that all cut the model (and pick a schedule) alike.
std::vector<partition::LayerCost> profiled_costs(const nn::ModelSpec& model,
                                                 const PipelineOptions& o,
                                                 comm::Communicator& world,
                                                 const std::string& why) {
  BATON_CHECK(o.sample().defined() || !o.sample_inputs().empty(), "[pipeline] ", why,
              " the layers' costs, profiled on a sample; set PipelineOptions().sample(one "
              "micro-batch of inputs), or sample_inputs() for a model of several inputs");
  const int L = model.num_layers();
  const nn::Tensors sample =
      o.sample_inputs().empty() ? nn::Tensors{o.sample()} : o.sample_inputs();
  // In the run's precision, as its steps compute.
  const runtime::Precision precision = o.precision();
  std::vector<partition::LayerCost> costs =
      runtime::profile_layers(model, sample, o.seed(), /*repeats=*/3, precision);
  // What each layer keeps for its backward, measured by the counting
  // allocator (--balance memory cuts by it), not the layer's input that
  // profile_layers counts: a transformer block keeps about 15 times that.
  const std::vector<double> kept =
      sim::layer_kept_bytes(runtime::measure_model_memory(model, sample, o.seed(), precision));
  for (int i = 0; i < L; ++i) costs[i].activation_bytes = kept[i];
  std::vector<torch::Tensor> times{torch::zeros({2, L}, torch::kFloat64)};
  for (int i = 0; i < L; ++i) {
    times[0][0][i] = costs[i].forward_time;
    times[0][1][i] = costs[i].backward_time;
  }
  world.all_reduce_sum(times, "the layer profile average");
  for (int i = 0; i < L; ++i) {
    costs[i].forward_time = times[0][0][i].item<double>() / world.world_size();
    costs[i].backward_time = times[0][1][i].item<double>() / world.world_size();
  }
  return costs;
}

// Every stage's gradient buckets' bytes, in reduction order (a collective
// over the world): each rank knows its own stages' parameters, so the first
// replica's lowest holder of each stage contributes them, and sums give every
// rank all: first the counts, then the bytes. A stage without parameters
// still gets one (empty) bucket.
std::vector<std::vector<double>> bucket_bytes_per_stage(
    const std::vector<std::shared_ptr<runtime::Stage>>& built, const schedule::Placement& placement,
    int stages, const comm::RankLayout& layout, double bucket_bytes) {
  std::map<int, std::vector<double>> mine;
  for (const auto& stage : built) {
    const std::vector<int> holders = placement.ranks_of_stage(stage->index());
    if (layout.here.dp != 0 || layout.here.tp != 0 ||
        *std::min_element(holders.begin(), holders.end()) != layout.pipeline_rank()) {
      continue;
    }
    std::vector<double> bytes;
    for (const auto& p : stage->parameters()) bytes.push_back(static_cast<double>(p.nbytes()));
    mine[stage->index()] = schedule::gradient_buckets(bytes, bucket_bytes);
  }
  std::vector<torch::Tensor> counts{torch::zeros({stages}, torch::kFloat64)};
  for (const auto& [stage, buckets] : mine) counts[0][stage] = static_cast<double>(buckets.size());
  layout.world->all_reduce_sum(counts, "the gradient bucket counts");
  int64_t most = 1;
  for (int stage = 0; stage < stages; ++stage)
    most = std::max<int64_t>(most, std::lround(counts[0][stage].item<double>()));
  std::vector<torch::Tensor> table{torch::zeros({stages, most}, torch::kFloat64)};
  for (const auto& [stage, buckets] : mine) {
    for (size_t k = 0; k < buckets.size(); ++k)
      table[0][stage][static_cast<int64_t>(k)] = buckets[k];
  }
  layout.world->all_reduce_sum(table, "the gradient bucket sizes");
  std::vector<std::vector<double>> out;
  for (int stage = 0; stage < stages; ++stage) {
    const int64_t n = std::max<int64_t>(1, std::lround(counts[0][stage].item<double>()));
    out.emplace_back();
    for (int64_t k = 0; k < n; ++k) out.back().push_back(table[0][stage][k].item<double>());
  }
  return out;
}

// The samples in a mini-batch, from the inputs where this rank has them,
// else the targets; -1 on a rank given neither (one holding only middle
// stages, which never reads them).
int64_t batch_size(const nn::Tensors& inputs, const torch::Tensor& targets,
                   const std::vector<int>& whole) {
  const int64_t rows = runtime::batch_rows(inputs, whole);
  if (rows >= 0) return rows;
  return targets.defined() && targets.dim() > 0 ? targets.size(0) : -1;
}

nn::Tensors listed(const torch::Tensor& inputs) {
  return inputs.defined() ? nn::Tensors{inputs} : nn::Tensors{};
}

}  // namespace

Pipeline::Pipeline(torch::nn::Sequential model, runtime::LossFn loss, PipelineOptions options)
    : state_(std::make_unique<State>()) {
  BATON_CHECK(!model.is_empty(), "[pipeline] model is an empty torch::nn::Sequential holder");
  build(nn::from_sequential(model), std::move(loss), std::move(options));
}

Pipeline::Pipeline(nn::ModelSpec model, runtime::LossFn loss, PipelineOptions options)
    : state_(std::make_unique<State>()) {
  build(std::move(model), std::move(loss), std::move(options));
}

Pipeline::Pipeline(Pipeline&&) noexcept = default;
Pipeline& Pipeline::operator=(Pipeline&&) noexcept = default;
Pipeline::~Pipeline() = default;

void Pipeline::build(nn::ModelSpec model, runtime::LossFn loss, PipelineOptions options) {
  BATON_CHECK(model.num_layers() > 0, "[pipeline] model \"", model.name,
              "\" has 0 layers; a pipeline needs at least one");
  if (!loss) loss = model.loss;
  BATON_CHECK(static_cast<bool>(loss), "[pipeline] loss is empty and model \"", model.name,
              "\" has none; pass a loss function");
  const runtime::Recompute recompute = options.recompute();
  check_options(options);
  // Each step below takes what it needs and returns what it decided.
  Joined joined = join(options);
  const comm::RankLayout& layout = joined.layout;
  const int dp = layout.grid.dp(), tp = layout.grid.tp();
  if (joined.device.is_cpu()) warn_about_openblas_kernels();
  const LayerCostsFn costs = [&](const std::string& why) {
    return profiled_costs(model, options, *layout.world, why);
  };
  PipelinePlan plan = plan_pipeline(options, model, layout.grid, costs);
  const runtime::Precision precision = options.precision();
  runtime::check_precision_supported(precision, joined.device);
  const schedule::Placement placement(plan.schedule);
  // With tp > 1 the blocks are built whole and split (profiling above ran them whole).
  const nn::ModelSpec built_model = tp > 1 ? nn::tensor_parallel(model, layout.tp) : model;
  auto built =
      runtime::build_stages(built_model, plan.partition,
                            placement.stages_of_rank(layout.pipeline_rank()), options.seed());
  // Profiling ran the user's modules (a Sequential's): drop the gradients it left.
  for (auto& stage : built) {
    for (auto& p : stage->parameters()) p.mutable_grad() = torch::Tensor();
    if (!joined.device.is_cpu()) stage->module().to(joined.device);
  }
  runtime::ExecutorOptions executor_options;
  executor_options.recompute = recompute;
  executor_options.device = joined.device;
  executor_options.share_loss = !options.step_barrier();
  executor_options.scatter_gather = options.tp_scatter_gather();
  executor_options.bucket_bytes = options.bucket_mb() * (1 << 20);
  executor_options.zero = options.zero();
  executor_options.precision = precision;
  executor_options.whole_inputs = options.whole_inputs();
  executor_options.pipemare = options.pipemare();
  if (options.clip_grad_norm() > 0) executor_options.clip_grad_norm = options.clip_grad_norm();
  std::vector<std::vector<double>> bucket_bytes;
  if (dp > 1) {
    bucket_bytes = bucket_bytes_per_stage(built, placement, plan.schedule.stages, layout,
                                          executor_options.bucket_bytes);
    std::vector<int> counts;
    for (const auto& buckets : bucket_bytes) counts.push_back(static_cast<int>(buckets.size()));
    plan.reductions.set_buckets_per_stage(counts);
  }
  // Tied weights sum their copies' gradients, at the stages the plan's reductions name.
  for (size_t g = 0; g < model.tied.size(); ++g) {
    executor_options.tied.emplace_back();
    for (size_t k = 0; k < model.tied[g].size(); ++k) {
      const nn::TiedParameter& copy = model.tied[g][k];
      executor_options.tied.back().push_back(
          {plan.reductions.tied[g][k], std::to_string(copy.layer) + "." + copy.name});
    }
  }
  State& s = *state_;
  s.options = std::move(options);
  s.model = std::move(model);
  s.layout = std::move(joined.layout);
  s.device = joined.device;
  s.partition = std::move(plan.partition);
  s.bucket_bytes = std::move(bucket_bytes);
  s.schedule = schedule::add_reductions(plan.schedule, plan.reductions);
  s.executor = std::make_unique<runtime::Executor>(s.schedule, s.layout, std::move(built),
                                                   std::move(loss), executor_options);
}

void Pipeline::gather_parameters() const {
  State& s = *state_;
  runtime::ZeroShards* zero = s.executor->zero();
  if (zero == nullptr || s.gathered_at == s.steps) return;
  // The replicas' last updates (ZeRO-1/2), or the freed weights (ZeRO-3):
  // one all-gather per stage and dtype, a collective over the dp group.
  s.gathered_at = s.steps;
  zero->gather_all();
}

void Pipeline::release_parameters() const {
  runtime::ZeroShards* zero = state_->executor->zero();
  if (zero == nullptr || zero->zero() != 3) return;
  zero->reshard_all();
  state_->gathered_at = -1;
}

double Pipeline::step(const torch::Tensor& inputs, const torch::Tensor& targets) {
  return step(listed(inputs), targets);
}

double Pipeline::step(const std::vector<torch::Tensor>& inputs, const torch::Tensor& targets) {
  State& s = *state_;
  BATON_CHECK(!s.executor->needs_update(), "[pipeline] schedule ", s.schedule.name,
              " updates the weights after every micro-batch's backward: give the Pipeline your "
              "optimizer with set_optimizer() before step()");
  const int m = s.options.microbatches();
  const std::vector<int>& whole = s.options.whole_inputs();
  const int64_t batch = batch_size(inputs, targets, whole);
  const int dp = s.layout.grid.dp();
  if (batch < 0) {
    // Neither inputs nor targets here: this rank holds only middle stages,
    // and the ranks that read them check the batch.
    s.last = s.executor->run_step(nn::Tensors{}, torch::Tensor());
  } else if (dp == 1) {
    BATON_CHECK(batch >= m, "[pipeline] microbatches=", m, " is more than the batch of ", batch,
                " samples; use a batch of at least ", m, " or fewer micro-batches");
    s.last = s.executor->run_step(inputs, targets);
  } else {
    BATON_CHECK(batch % dp == 0, "[pipeline] the batch of ", batch,
                " samples does not split into dp=", dp,
                " equal replica batches; use a multiple of ", dp);
    const int64_t share = batch / dp;
    BATON_CHECK(share >= m, "[pipeline] microbatches=", m, " is more than a replica's ", share,
                " samples (batch ", batch, " / dp=", dp, "); use a batch of at least ", m * dp,
                " or fewer micro-batches");
    auto slice = [&](const torch::Tensor& t) {
      return t.defined() && t.dim() > 0 ? t.narrow(0, s.layout.here.dp * share, share) : t;
    };
    nn::Tensors shares;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool shared = std::find(whole.begin(), whole.end(), static_cast<int>(i)) != whole.end();
      shares.push_back(shared ? inputs[i] : slice(inputs[i]));
    }
    s.last = s.executor->run_step(shares, slice(targets));
  }
  ++s.steps;
  if (!s.options.step_barrier()) {
    if (dp == 1) return s.last.minibatch_loss;
    // Each replica's loss is its share's mean: their mean is the batch's. A
    // collective among this pipeline rank's replicas only, which the step's
    // REDUCE_GRADs have already brought together.
    return sum_over(*s.layout.dp, s.last.minibatch_loss,
                    detail::concat("the step ", s.steps, " loss sum")) /
           dp;
  }
  // A collective cannot tell which rank is missing; it names the group. Each
  // replica's losses add up to its share's mean: their mean is the batch's
  // (each of a stage's tp ranks computes the same loss).
  return sum_over(*s.layout.world, s.last.loss,
                  detail::concat("the step ", s.steps, " loss sum (an all-reduce over ranks 0-",
                                 s.layout.world_size() - 1, ")")) /
         (dp * s.layout.grid.tp());
}

torch::Tensor Pipeline::eval(const torch::Tensor& inputs) {
  return eval(listed(inputs));
}

torch::Tensor Pipeline::eval(const std::vector<torch::Tensor>& inputs) {
  State& s = *state_;
  const int64_t batch = batch_size(inputs, torch::Tensor(), s.options.whole_inputs());
  BATON_CHECK(batch != 0, "[pipeline] eval needs a batch of at least 1 sample, got 0");
  // A rank without inputs (middle stages only) takes the batch to hold at
  // least `microbatches` samples, as the first stage's rank must then too.
  const int m = batch < 0 ? s.options.microbatches()
                          : static_cast<int>(std::min<int64_t>(s.options.microbatches(), batch));
  std::map<int, torch::Tensor> outputs = eval_microbatches(inputs, m);
  if (outputs.empty()) return {};
  std::vector<torch::Tensor> parts;
  for (auto& [mb, out] : outputs) parts.push_back(out);
  return torch::cat(parts);
}

std::map<int, torch::Tensor> Pipeline::eval_microbatches(const torch::Tensor& inputs,
                                                         int microbatches) {
  return eval_microbatches(listed(inputs), microbatches);
}

std::map<int, torch::Tensor> Pipeline::eval_microbatches(const std::vector<torch::Tensor>& inputs,
                                                         int microbatches) {
  gather_parameters();
  std::map<int, torch::Tensor> out = state_->executor->evaluate(inputs, microbatches);
  release_parameters();
  return out;
}

std::vector<torch::Tensor> Pipeline::parameters() const {
  const runtime::ZeroShards* zero = state_->executor->zero();
  return zero != nullptr ? zero->shards() : state_->executor->parameters();
}

std::vector<torch::Tensor> Pipeline::held_parameters() const {
  std::vector<torch::Tensor> out = state_->executor->parameters();
  if (const runtime::ZeroShards* zero = state_->executor->zero())
    out.insert(out.end(), zero->shards().begin(), zero->shards().end());
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> Pipeline::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  // Under ZeRO-3 the weights are gathered for the caller to read (until the
  // next step's RESHARD frees them).
  gather_parameters();
  // Without a flush the optimizer's tensors are the executor's masters, in
  // the modules' order (runtime/weight_versions.h).
  const bool masters = state_->schedule.carries;
  const std::vector<torch::Tensor> all =
      masters ? state_->executor->parameters() : std::vector<torch::Tensor>{};
  size_t k = 0;
  for (const auto& [index, stage] : state_->executor->stages()) {
    for (const auto& item : stage->module().named_parameters()) {
      out.emplace_back("layer." + item.key(), masters ? all.at(k++) : item.value());
    }
  }
  return out;
}

void Pipeline::set_optimizer(torch::optim::Optimizer* optimizer) {
  BATON_CHECK(optimizer != nullptr, "[pipeline] set_optimizer needs an optimizer, got null");
  state_->executor->set_update([optimizer](double lr_scale) {
    if (lr_scale == 1) {
      optimizer->step();
      return;
    }
    // PipeMare's warm-up scales this one update's learning rate.
    std::vector<double> lrs;
    for (auto& group : optimizer->param_groups()) {
      lrs.push_back(group.options().get_lr());
      group.options().set_lr(lrs.back() * lr_scale);
    }
    optimizer->step();
    size_t i = 0;
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lrs[i++]);
  });
}

bool Pipeline::updates_inside_step() const {
  return state_->executor->updates_per_microbatch();
}

runtime::StepResult Pipeline::flush() {
  State& s = *state_;
  return s.executor->carrying() ? s.executor->drain() : runtime::StepResult{};
}

int Pipeline::rank() const {
  return state_->layout.world_rank();
}
int Pipeline::world_size() const {
  return state_->layout.world_size();
}

std::vector<std::pair<int, std::vector<int>>> Pipeline::stage_layers() const {
  std::vector<std::pair<int, std::vector<int>>> out;
  for (const auto& [index, stage] : state_->executor->stages()) {
    std::vector<int> layers(stage->layer_count());
    for (int i = 0; i < stage->layer_count(); ++i) layers[i] = stage->first_layer() + i;
    out.emplace_back(index, std::move(layers));
  }
  return out;
}

const schedule::Schedule& Pipeline::schedule() const {
  return state_->schedule;
}
const partition::Partition& Pipeline::partition() const {
  return state_->partition;
}
const runtime::StepResult& Pipeline::last_step() const {
  return state_->last;
}
const comm::RankLayout& Pipeline::layout() const {
  return state_->layout;
}
const std::vector<std::vector<double>>& Pipeline::gradient_bucket_bytes() const {
  return state_->bucket_bytes;
}

comm::Communicator& Pipeline::communicator() const {
  return *state_->layout.world;
}
double Pipeline::clip_grad_norm(double max_norm) {
  State& s = *state_;
  BATON_CHECK(std::isfinite(max_norm) && max_norm > 0,
              "[pipeline] clip_grad_norm needs a finite max norm above 0, got ", max_norm);
  BATON_CHECK(!s.schedule.carries, "[pipeline] schedule ", s.schedule.name,
              " has no flush between steps, so no point where a step's gradients are whole "
              "to clip by their norm");
  return s.executor->clip_grad_norm(max_norm);
}

int64_t Pipeline::steps() const {
  return state_->steps;
}

}  // namespace baton
