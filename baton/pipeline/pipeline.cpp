#include "baton/pipeline/pipeline.h"

#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "baton/comm/nccl.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/nn/tensor_parallel.h"
#include "baton/partition/balance.h"
#include "baton/pipeline/pipeline_state.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/profile.h"
#include "baton/runtime/stage.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/runnable.h"
#include "baton/topology/topology.h"

namespace baton {

namespace {

bool balance_profiles(const std::string& method) {
  return method == "params" || method == "time" || method == "memory" || method == "optimal";
}

// Sums a scalar over all ranks; `what` names the collective for its errors.
double sum_over_ranks(comm::Communicator* comm, double value, const std::string& what) {
  if (comm == nullptr) return value;
  std::vector<torch::Tensor> t{torch::tensor({value}, torch::kFloat64)};
  comm->all_reduce_sum(t, what);
  return t[0].item<double>();
}

// The device the stages run on: the CPU, or a CUDA device (cuda:local_rank
// when `requested` names no index).
torch::Device resolve_device(const torch::Device& requested, int local_rank) {
  if (requested.is_cpu()) return requested;
  BATON_CHECK(requested.is_cuda(), "[pipeline] device ", requested.str(),
              " is not supported; use cpu or cuda");
  BATON_CHECK(torch::cuda::is_available(), "[pipeline] device ", requested.str(),
              ": this process sees no CUDA device (or LibTorch was built without CUDA)");
  const int index = requested.has_index() ? requested.index() : local_rank;
  const auto count = static_cast<int>(torch::cuda::device_count());
  BATON_CHECK(index >= 0 && index < count, "[pipeline] device cuda:", index, " does not exist; ",
              count, " CUDA device(s) are visible");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

// zb-auto's costs from profiled layers cut by `partition`: the slowest
// stage's forward and backward (its uniform cost model charges every stage
// alike), the backward split evenly between I and W (a profile times the
// whole backward; for Linear layers the two are one matrix product each).
schedule::ZbAutoCosts zb_auto_costs(const std::vector<partition::LayerCost>& layers,
                                    const partition::Partition& partition) {
  schedule::ZbAutoCosts costs;
  costs.f = costs.i = 0;
  for (int stage = 0; stage < partition.stages(); ++stage) {
    double f = 0, b = 0;
    for (int l = partition.first_layer(stage); l < partition.end_layer(stage); ++l) {
      f += layers[l].forward_time;
      b += layers[l].backward_time;
    }
    costs.f = std::max(costs.f, f);
    costs.i = std::max(costs.i, b / 2);
  }
  // Profiles of tiny layers can read 0; zb-auto needs F and I above 0.
  costs.f = std::max(costs.f, 1e-9);
  costs.i = std::max(costs.i, 1e-9);
  costs.w = costs.i;
  return costs;
}

// The lowered schedule (its reductions come once the stages are built): the
// file's, or the generator's with `generator`.
schedule::Schedule make_schedule(const PipelineOptions& o, int world_size,
                                 const schedule::GeneratorOptions& generator) {
  if (o.schedule_file().empty())
    return schedule::lowered_schedule(schedule::ScheduleSource::generated(o.schedule(), generator));
  schedule::Schedule s =
      schedule::lowered_schedule(schedule::ScheduleSource::from_file(o.schedule_file()));
  BATON_CHECK(s.ranks == world_size, "[pipeline] schedule file ", printable(o.schedule_file(), 256),
              " has ", s.ranks, " ranks but pp is ", world_size,
              "; a schedule file must have one row per pipeline rank");
  BATON_CHECK(s.microbatches == o.microbatches(), "[pipeline] schedule file ",
              printable(o.schedule_file(), 256), " runs ", s.microbatches,
              " micro-batches but microbatches=", o.microbatches(),
              "; set microbatches to the file's");
  return s;
}

int64_t batch_size(const torch::Tensor& inputs, const torch::Tensor& targets) {
  const torch::Tensor& t = inputs.defined() ? inputs : targets;
  return t.defined() && t.dim() > 0 ? t.size(0) : 0;
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
  State& s = *state_;
  s.options = std::move(options);
  const PipelineOptions& o = s.options;
  BATON_CHECK(model.num_layers() > 0, "[pipeline] model \"", model.name,
              "\" has 0 layers; a pipeline needs at least one");
  if (!loss) loss = model.loss;
  BATON_CHECK(static_cast<bool>(loss), "[pipeline] loss is empty and model \"", model.name,
              "\" has none; pass a loss function");
  s.model = std::move(model);
  const runtime::Recompute recompute = runtime::parse_recompute(o.recompute());
  BATON_CHECK(o.microbatches() >= 1, "[pipeline] microbatches must be at least 1, got ", o.microbatches());
  BATON_CHECK(o.virtual_stages() >= 0, "[pipeline] virtual_stages must be >= 0 (0: the schedule's "
              "default), got ", o.virtual_stages());
  join_process_group();
  make_groups();

  auto generator = schedule::GeneratorOptions{}
                       .set_ranks(s.pp)
                       .set_microbatches(o.microbatches())
                       .set_virtual_stages(o.virtual_stages());
  if (o.schedule() == "zb-auto" && o.schedule_file().empty()) {
    // zb-auto searches with this model's costs: one stage per rank, cut first.
    BATON_CHECK(s.pp <= s.model.num_layers(), "[pipeline] schedule zb-auto with pp=",
                s.pp, " makes ", s.pp, " stages but model \"", s.model.name,
                "\" has only ", s.model.num_layers(), " layers; every stage needs at least one layer");
    s.partition = choose_partition(s.pp);
    generator.set_zb_auto(zb_auto_costs(profiled_costs("schedule \"zb-auto\" searches with"), s.partition));
  }
  s.schedule = make_schedule(o, s.pp, generator);
  const int stages = s.schedule.stages;
  BATON_CHECK(stages <= s.model.num_layers(), "[pipeline] schedule ", s.schedule.name, " with pp=",
              s.pp, " makes ", stages, " stages but model \"", s.model.name, "\" has only ",
              s.model.num_layers(), " layers; every stage needs at least one layer");
  if (s.partition.stages() != stages) s.partition = choose_partition(stages);
  const schedule::Placement placement(s.schedule);
  // With tp > 1 the blocks are built whole and split (profiling above ran them whole).
  const nn::ModelSpec built_model =
      s.tp > 1 ? nn::tensor_parallel(s.model, s.tp_rank, s.tp, &*s.tp_group) : s.model;
  auto built = runtime::build_stages(built_model, s.partition, placement.stages_of_rank(s.pipeline_rank), o.seed());
  // Profiling ran the user's modules (a Sequential's): drop the gradients it left.
  for (auto& stage : built) {
    for (auto& p : stage->parameters()) p.mutable_grad() = torch::Tensor();
    if (!s.device.is_cpu()) stage->module().to(s.device);
  }
  runtime::ExecutorOptions executor_options;
  executor_options.recompute = recompute;
  executor_options.device = s.device;
  executor_options.share_loss = !o.step_barrier();
  executor_options.world_ranks = s.world_ranks;
  if (s.tp > 1) {
    executor_options.tp_group = &*s.tp_group;
    executor_options.scatter_gather = o.tp_scatter_gather();
  }
  BATON_CHECK(!s.schedule.carries || (s.dp == 1 && s.tp == 1), "[pipeline] schedule ",
              s.schedule.name, " has no flush between steps and runs with dp=1 and tp=1 only, got dp=",
              s.dp, " tp=", s.tp, " (data parallelism reduces whole steps' gradients)");
  // A file's own reductions stay (schedule/runnable.h); the executor checks
  // its REDUCE_GRADs against the built stages' buckets.
  schedule::ReductionOptions reductions;
  reductions.set_dp(s.dp).set_overlap_grad_reduce(o.overlap_grad_reduce());
  if (s.dp > 1) {
    executor_options.dp_group = &*s.dp_group;
    executor_options.bucket_bytes = o.bucket_mb() * (1 << 20);
    reductions.set_buckets_per_stage(
        buckets_per_stage(built, placement, executor_options.bucket_bytes));
  }
  // Tied weights and replicated stages sum their copies' gradients.
  for (const auto& copies : s.model.tied) {
    reductions.tied.emplace_back();
    executor_options.tied.emplace_back();
    for (const nn::TiedParameter& copy : copies) {
      const int stage = s.partition.stage_of_layer(copy.layer);
      reductions.tied.back().push_back(stage);
      executor_options.tied.back().push_back({stage, std::to_string(copy.layer) + "." + copy.name});
    }
  }
  s.schedule = schedule::add_reductions(s.schedule, reductions);
  s.executor = std::make_unique<runtime::Executor>(s.schedule, s.pipeline_rank, std::move(built),
                                                   std::move(loss), s.comm, executor_options);
  if (o.zero() == 1 && s.dp > 1) shard_optimizer_state();
}

void Pipeline::shard_optimizer_state() {
  State& s = *state_;
  s.zero = true;
  const std::vector<torch::Tensor> all = s.executor->parameters();
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return all[a].numel() > all[b].numel(); });
  std::vector<int64_t> load(s.dp, 0);
  s.zero_owns.assign(all.size(), false);
  for (const size_t i : order) {
    const int owner = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[owner] += all[i].numel();
    s.zero_owns[i] = owner == s.dp_rank;
  }
  for (size_t i = 0; i < all.size(); ++i) (s.zero_owns[i] ? s.zero_owned : s.zero_others).push_back(all[i]);
}

void Pipeline::gather_parameters() const {
  State& s = *state_;
  if (!s.zero || s.zero_gathered_at == s.steps) return;
  s.zero_gathered_at = s.steps;
  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> all = s.executor->parameters();
  std::vector<torch::Tensor> flat;
  for (size_t i = 0; i < all.size(); ++i) {
    flat.push_back(s.zero_owns[i] ? all[i].detach().reshape({-1}) : torch::zeros({all[i].numel()}, all[i].options()));
  }
  if (flat.empty()) return;
  std::vector<torch::Tensor> buffer{torch::cat(flat)};
  s.dp_group->all_reduce_sum(buffer, detail::concat("the step ", s.steps, " ZeRO-1 parameter gather"));
  int64_t offset = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const int64_t n = all[i].numel();
    if (!s.zero_owns[i]) all[i].detach().copy_(buffer[0].narrow(0, offset, n).view_as(all[i]));
    offset += n;
  }
}

std::vector<int> Pipeline::buckets_per_stage(const std::vector<std::shared_ptr<runtime::Stage>>& built,
                                             const schedule::Placement& placement,
                                             double bucket_bytes) {
  State& s = *state_;
  // Each rank knows its own stages' parameters: the first replica's lowest
  // holder of each stage contributes its count, and a sum over the world
  // gives every rank all of them.
  std::vector<torch::Tensor> counts{torch::zeros({s.schedule.stages}, torch::kFloat64)};
  for (const auto& stage : built) {
    const std::vector<int> holders = placement.ranks_of_stage(stage->index());
    if (s.dp_rank != 0 || s.tp_rank != 0 ||
        *std::min_element(holders.begin(), holders.end()) != s.pipeline_rank) {
      continue;
    }
    std::vector<double> bytes;
    for (const auto& p : stage->parameters()) bytes.push_back(static_cast<double>(p.nbytes()));
    counts[0][stage->index()] =
        static_cast<double>(schedule::gradient_buckets(bytes, bucket_bytes).size());
  }
  s.comm->all_reduce_sum(counts, "the gradient bucket counts");
  std::vector<int> out;
  for (int stage = 0; stage < s.schedule.stages; ++stage) {
    // A stage without parameters still gets one (empty) bucket.
    out.push_back(std::max(1, static_cast<int>(std::lround(counts[0][stage].item<double>()))));
  }
  return out;
}

void Pipeline::join_process_group() {
  State& s = *state_;
  const PipelineOptions& o = s.options;
  std::optional<comm::RankEnv> env = o.rank_env();
  if (o.communicator() != nullptr) {
    s.comm = o.communicator();
    s.rank = s.comm->rank();
    s.world_size = s.comm->world_size();
    if (!env) env = comm::rank_env_from_environment();
    s.local_rank = env ? env->local_rank : s.rank;
  } else {
    if (!env) env = comm::rank_env_from_environment();
    if (env) {
      s.rank = env->rank;
      s.world_size = env->world_size;
      s.local_rank = env->local_rank;
    }
  }
  s.device = resolve_device(o.device(), s.local_rank);
  BATON_CHECK(o.dp() >= 1, "[pipeline] dp must be at least 1, got ", o.dp());
  BATON_CHECK(o.tp() >= 1, "[pipeline] tp must be at least 1, got ", o.tp());
  BATON_CHECK(o.zero() == 0 || o.zero() == 1, "[pipeline] zero must be 0 or 1 (ZeRO stage 1: the optimizer "
              "state sharded over the dp replicas), got ", o.zero());
  BATON_CHECK(std::isfinite(o.bucket_mb()) && o.bucket_mb() > 0,
              "[pipeline] bucket_mb must be a finite size above 0 MiB, got ", o.bucket_mb());
  s.dp = o.dp();
  s.tp = o.tp();
  // The tp factor is named only when there is one (dp-only grids read as before).
  const std::string tp_text = s.tp > 1 ? detail::concat(" x tp=", s.tp) : std::string();
  BATON_CHECK(o.pp() > 0 || s.world_size % (s.dp * s.tp) == 0, "[pipeline] dp=", s.dp, tp_text,
              " does not divide the world of ", s.world_size, " ranks into equal pipelines");
  s.pp = o.pp() > 0 ? o.pp() : s.world_size / (s.dp * s.tp);
  BATON_CHECK(s.dp * s.pp * s.tp == s.world_size, "[pipeline] dp=", s.dp, " x pp=", s.pp, tp_text, " is ",
              s.dp * s.pp * s.tp, " ranks but the world has ", s.world_size, "; each rank runs one ",
              s.tp > 1 ? "tensor-parallel share of one " : "", "pipeline rank of one replica");
  const topology::Topology grid(s.dp, s.pp, s.tp);
  const topology::Coords here = grid.coords(s.rank);
  s.pipeline_rank = here.pp;
  s.dp_rank = here.dp;
  s.tp_rank = here.tp;
  s.world_ranks.clear();
  if (s.dp > 1 || s.tp > 1) {
    for (int r = 0; r < s.pp; ++r) s.world_ranks.push_back(grid.rank({here.dp, r, here.tp}));
  }
  if (s.comm != nullptr || s.world_size == 1) return;
  const comm::TransportKind transport = comm::parse_transport(o.transport());
  const auto connect_options = comm::ConnectOptions{}
                                   .set_rank(env->rank)
                                   .set_world_size(env->world_size)
                                   .set_master_addr(env->master_addr)
                                   .set_master_port(env->master_port)
                                   .set_timeout(o.timeout())
                                   .set_transport(transport);
  // Stages on a GPU talk over NCCL on that GPU; on the CPU, shared memory or Gloo.
  s.owned.emplace(s.device.is_cuda() ? comm::connect_nccl(connect_options, s.device.index())
                                     : comm::connect(connect_options));
  s.comm = &*s.owned;
}

void Pipeline::make_groups() {
  State& s = *state_;
  const topology::Topology grid(s.dp, s.pp, s.tp);
  // Every rank makes its groups in the same order: tp, then dp.
  if (s.tp > 1) s.tp_group.emplace(s.comm->new_group(grid.tp_group(s.rank), "tp"));
  if (s.dp > 1) s.dp_group.emplace(s.comm->new_group(grid.dp_group(s.rank), "dp"));
}

const std::vector<partition::LayerCost>& Pipeline::profiled_costs(const std::string& why) {
  State& s = *state_;
  if (s.profiled) return *s.profiled;
  BATON_CHECK(s.options.sample().defined(), "[pipeline] ", why,
              " the layers' costs, profiled on a sample; set PipelineOptions().sample(one micro-batch of inputs)");
  const int L = s.model.num_layers();
  std::vector<partition::LayerCost> costs = runtime::profile_layers(s.model, s.options.sample(), s.options.seed());
  if (s.comm != nullptr) {
    // Every rank must cut the model (and pick a schedule) the same way: average the timings.
    std::vector<torch::Tensor> times{torch::zeros({2, L}, torch::kFloat64)};
    for (int i = 0; i < L; ++i) {
      times[0][0][i] = costs[i].forward_time;
      times[0][1][i] = costs[i].backward_time;
    }
    s.comm->all_reduce_sum(times, "the layer profile average");
    for (int i = 0; i < L; ++i) {
      costs[i].forward_time = times[0][0][i].item<double>() / s.world_size;
      costs[i].backward_time = times[0][1][i].item<double>() / s.world_size;
    }
  }
  s.profiled = std::move(costs);
  return *s.profiled;
}

partition::Partition Pipeline::choose_partition(int stages) {
  State& s = *state_;
  const std::string& method = s.options.balance();
  const int L = s.model.num_layers();
  std::vector<partition::LayerCost> costs(L);
  if (balance_profiles(method)) costs = profiled_costs("balance \"" + method + "\" cuts by");
  partition::BalanceOptions options;
  options.set_activations_in_flight(partition::one_f_one_b_in_flight(stages));
  return partition::balance(method, costs, stages, options);
}

double Pipeline::step(const torch::Tensor& inputs, const torch::Tensor& targets) {
  State& s = *state_;
  if (s.zero) {
    gather_parameters();
    // The caller's zero_grad() reaches only the owned parameters.
    for (auto& p : s.zero_others) p.mutable_grad() = torch::Tensor();
  }
  BATON_CHECK(!s.executor->needs_update(), "[pipeline] schedule ", s.schedule.name,
              " updates the weights after every micro-batch's backward: give the Pipeline your "
              "optimizer with set_optimizer() before step()");
  const int m = s.options.microbatches();
  const int64_t batch = batch_size(inputs, targets);
  if (s.dp == 1) {
    BATON_CHECK(batch >= m, "[pipeline] microbatches=", m, " is more than the batch of ", batch,
                " samples; use a batch of at least ", m, " or fewer micro-batches");
    s.last = s.executor->run_step(inputs, targets);
  } else {
    BATON_CHECK(batch % s.dp == 0, "[pipeline] the batch of ", batch, " samples does not split into dp=",
                s.dp, " equal replica batches; use a multiple of ", s.dp);
    const int64_t share = batch / s.dp;
    BATON_CHECK(share >= m, "[pipeline] microbatches=", m, " is more than a replica's ", share,
                " samples (batch ", batch, " / dp=", s.dp, "); use a batch of at least ", m * s.dp,
                " or fewer micro-batches");
    auto slice = [&](const torch::Tensor& t) {
      return t.defined() && t.dim() > 0 ? t.narrow(0, s.dp_rank * share, share) : t;
    };
    s.last = s.executor->run_step(slice(inputs), slice(targets));
  }
  ++s.steps;
  if (!s.options.step_barrier()) {
    if (s.dp == 1) return s.last.minibatch_loss;
    // Each replica's loss is its share's mean: their mean is the batch's. A
    // collective among this pipeline rank's replicas only, which the step's
    // REDUCE_GRADs have already brought together.
    std::vector<torch::Tensor> t{torch::tensor({s.last.minibatch_loss}, torch::kFloat64)};
    s.dp_group->all_reduce_sum(t, detail::concat("the step ", s.steps, " loss sum"));
    return t[0].item<double>() / s.dp;
  }
  // A collective cannot tell which rank is missing; it names the group. Each
  // replica's losses add up to its share's mean: their mean is the batch's
  // (each of a stage's tp ranks computes the same loss).
  return sum_over_ranks(s.comm, s.last.loss,
                        detail::concat("the step ", s.steps, " loss sum (an all-reduce over ranks 0-",
                                       s.world_size - 1, ")")) /
         (s.dp * s.tp);
}

torch::Tensor Pipeline::eval(const torch::Tensor& inputs) {
  State& s = *state_;
  const int64_t batch = batch_size(inputs, torch::Tensor());
  BATON_CHECK(batch >= 1, "[pipeline] eval needs a batch of at least 1 sample, got ", batch);
  const int m = static_cast<int>(std::min<int64_t>(s.options.microbatches(), batch));
  std::map<int, torch::Tensor> outputs = eval_microbatches(inputs, m);
  if (outputs.empty()) return {};
  std::vector<torch::Tensor> parts;
  for (auto& [mb, out] : outputs) parts.push_back(out);
  return torch::cat(parts);
}

std::map<int, torch::Tensor> Pipeline::eval_microbatches(const torch::Tensor& inputs, int microbatches) {
  gather_parameters();
  return state_->executor->evaluate(inputs, microbatches);
}

std::vector<torch::Tensor> Pipeline::parameters() const {
  return state_->zero ? state_->zero_owned : state_->executor->parameters();
}

std::vector<std::pair<std::string, torch::Tensor>> Pipeline::named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  // Without a flush the optimizer's tensors are the executor's masters, in
  // the modules' order (runtime/weight_versions.h).
  const bool masters = state_->schedule.carries;
  const std::vector<torch::Tensor> all = masters ? state_->executor->parameters() : std::vector<torch::Tensor>{};
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
  state_->executor->set_update([optimizer] { optimizer->step(); });
}

bool Pipeline::updates_inside_step() const { return state_->executor->updates_per_microbatch(); }

runtime::StepResult Pipeline::flush() {
  State& s = *state_;
  return s.executor->carrying() ? s.executor->drain() : runtime::StepResult{};
}

int Pipeline::rank() const { return state_->rank; }
int Pipeline::world_size() const { return state_->world_size; }

std::vector<std::pair<int, std::vector<int>>> Pipeline::stage_layers() const {
  std::vector<std::pair<int, std::vector<int>>> out;
  for (const auto& [index, stage] : state_->executor->stages()) {
    std::vector<int> layers(stage->layer_count());
    for (int i = 0; i < stage->layer_count(); ++i) layers[i] = stage->first_layer() + i;
    out.emplace_back(index, std::move(layers));
  }
  return out;
}

const schedule::Schedule& Pipeline::schedule() const { return state_->schedule; }
const partition::Partition& Pipeline::partition() const { return state_->partition; }
const runtime::StepResult& Pipeline::last_step() const { return state_->last; }
runtime::Executor& Pipeline::executor() { return *state_->executor; }
comm::Communicator* Pipeline::communicator() const { return state_->comm; }
int64_t Pipeline::steps() const { return state_->steps; }

}  // namespace baton
