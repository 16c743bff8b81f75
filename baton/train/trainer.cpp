#include "baton/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/optim.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "baton/comm/device_choice.h"
#include "baton/comm/device_memory.h"
#include "baton/comm/memory_counter.h"
#include "baton/comm/p2p_probe.h"
#include "baton/comm/transport_limits.h"
#include "baton/core/blas_kernels.h"
#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/core/printable.h"
#include "baton/core/realtime.h"
#include "baton/core/test_hooks.h"
#include "baton/nn/models.h"
#include "baton/nn/recompute_region.h"
#include "baton/partition/balance.h"
#include "baton/pipeline/pipeline.h"
#include "baton/pipeline/pipeline_plan.h"
#include "baton/plan/profile_memory.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/memory_profile.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/precision.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/runnable.h"
#include "baton/schedule/update_delays.h"
#include "baton/topology/topology.h"
#include "baton/train/checkpoint_flags.h"
#include "baton/train/data_source.h"
#include "baton/train/evaluate.h"
#include "baton/train/memory_report.h"
#include "baton/train/optimizer.h"
#include "baton/train/output_paths.h"
#include "baton/train/profile_output.h"
#include "baton/train/progress.h"
#include "baton/train/timeline_output.h"

namespace baton::train {
namespace {

// The median of `values` (the upper one of an even count); 0 when empty.
double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

using Clock = std::chrono::steady_clock;

nn::ModelOptions model_options(const TrainConfig& c) {
  nn::ModelOptions options;
  options.layers(c.layers).hidden(c.hidden).heads(c.heads).context(c.context);
  options.tie_embeddings(c.tie_embeddings).label_smoothing(c.label_smoothing);
  options.in_features(c.in_features).classes(c.classes).vocab(vocabulary(c));
  return options;
}

std::string model_name(const TrainConfig& c) {
  return c.model == "cnn" ? "fashion_cnn" : c.model;
}

nn::ModelSpec make_model(const TrainConfig& c) {
  return nn::make_model(model_name(c), model_options(c));
}

// The ranks all live on this machine: their float parameters alone must fit.
void check_parameter_memory(const TrainConfig& c) {
  const double bytes = nn::parameter_count(model_name(c), model_options(c)) * sizeof(float);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  char text[160];
  std::snprintf(text, sizeof text, "%.0f bytes of parameters, more than the %.0f bytes", bytes,
                memory);
  BATON_CHECK(memory <= 0 || bytes <= memory, "[train] model ", c.model, " needs ", text,
              " of memory on this machine; lower --hidden or --layers");
}

std::string schedule_label(const TrainConfig& c) {
  return c.schedule_file.empty() ? c.schedule : "file " + printable(c.schedule_file, 256);
}

// PipeMare's flags belong to schedule pipemare (generated or a file's):
// elsewhere they would change nothing, so a value other than the default is
// a mistake.
void check_pipemare_flags(const TrainConfig& c, const schedule::Schedule& s) {
  if (s.updates == schedule::WeightUpdates::kPipeMare) return;
  const TrainConfig defaults;
  const char* given = c.pipemare_warmup != defaults.pipemare_warmup ? "--pipemare-warmup"
                      : c.pipemare_correction != defaults.pipemare_correction
                          ? "--pipemare-correction"
                      : c.pipemare_decay != defaults.pipemare_decay ? "--pipemare-decay"
                                                                    : nullptr;
  BATON_CHECK(given == nullptr, "[train.config] ", given, " applies to --schedule pipemare only; ",
              "schedule ", schedule_label(c), " would ignore it");
}

// What a schedule without a flush cannot run with beyond plan_pipeline's
// rules: the command line's checkpoints, evaluation and comparison.
void check_no_flush_combinations(const TrainConfig& c, const schedule::Schedule& s) {
  if (!s.carries) return;
  const std::string which =
      c.schedule_file.empty() ? "--schedule " + c.schedule : "schedule " + schedule_label(c);
  BATON_CHECK(c.save.empty() && c.resume.empty(), "[train.config] ", which,
              " cannot --save or "
              "--resume: its weight versions and carried backwards are not checkpointed "
              "(use a schedule with a flush, e.g. 1f1b)");
  BATON_CHECK(c.valid.empty(), "[train.config] ", which,
              " carries backwards between steps, so no step ends with whole weights to evaluate "
              "--valid on (use a schedule with a flush, e.g. 1f1b)");
  BATON_CHECK(!c.compare_sim, "[train.config] --compare-sim compares one flushed step; ", which,
              " carries backwards between steps (compare its median step with `baton simulate`'s "
              "steady_step)");
}

// The façade's options for this configuration, on any rank.
PipelineOptions pipeline_options(const TrainConfig& c) {
  PipelineOptions options;
  options.schedule(c.schedule)
      .schedule_file(c.schedule_file)
      .step_barrier(c.step_barrier)
      .microbatches(c.microbatches)
      .virtual_stages(c.virtual_stages)
      .balance(c.balance)
      .recompute(c.recompute)
      .timeout(std::chrono::milliseconds(static_cast<int64_t>(c.timeout_s * 1000)))
      .transport(c.transport)
      .device(torch::Device(c.device))  // "cuda": the Pipeline picks cuda:LOCAL_RANK
      .seed(c.seed)
      .pp(c.pp)
      .dp(c.dp)
      .tp(c.tp)
      .tp_scatter_gather(c.tp_scatter_gather)
      .bucket_mb(c.bucket_mb)
      .overlap_grad_reduce(c.overlap_grad_reduce)
      .clip_grad_norm(c.clip_grad_norm)
      .precision(c.precision)
      .zero(c.zero)
      .prefetch_unshard(c.prefetch_unshard)
      .pipemare(runtime::PipeMareOptions()
                    .warmup_steps(c.pipemare_warmup)
                    .correction(c.pipemare_correction)
                    .decay(c.pipemare_decay));
  return options;
}

// The plan the ranks' Pipeline makes (pipeline_plan.h), made here before
// they start: the schedule and every rule exact, the cut uniform's where
// the balance would read the ranks' measured costs.
PipelinePlan plan_of(const TrainConfig& c, const nn::ModelSpec& model) {
  return plan_pipeline(pipeline_options(c), model, topology::Topology(c.dp, c.pp, c.tp), {},
                       PlanWording::command_line());
}

// The façade's options for this configuration and rank.
PipelineOptions pipeline_options(const TrainConfig& c, const comm::RankEnv& env, DataSource& data) {
  PipelineOptions options = pipeline_options(c);
  options.rank_env(env);
  // zb-auto searches with the profiled costs of the layers, as these balances cut by them.
  if (partition::needs_layer_costs(c.balance) || schedule::takes_measured_costs(c.schedule)) {
    // One micro-batch of a replica's share of the batch.
    torch::Tensor inputs = data.batch(0).first;
    if (!inputs.defined()) inputs = data.zero_inputs(c.batch);  // a rank that reads none
    options.sample(runtime::split_microbatches(inputs, c.microbatches * c.dp).front());
  }
  return options;
}

// The activation model's peak for pipeline rank `pp_rank`'s steady-state
// step (sim/memory_model.h): the layers measured on one micro-batch of zero
// inputs with the counting allocator, composed by the schedule's order.
//
// On a CUDA device the layers are measured on the CPU (the bytes autograd
// keeps are the same), and what the device holds outside the steps is the
// step's batch, copied to it whole, and `library_bytes`, what its math
// libraries keep (comm/device_memory.h).
sim::MemoryPrediction predict_rank_memory(const TrainConfig& c, const nn::ModelSpec& model,
                                          const Pipeline& pipeline, DataSource& data, int pp_rank,
                                          int64_t step, torch::Device device, double library_bytes,
                                          std::vector<double>& stage_kept) {
  // What lives outside the steps: the data this rank holds, and one step's
  // batch as it reads it (a source's batch(step) is a function of the step).
  const auto held_other = [] {
    return static_cast<double>(
        comm::memory_figures().current[static_cast<int>(comm::MemoryCategory::kOther)]);
  };
  const double at_rest = held_other();
  double other = at_rest;
  {
    const auto batch = data.batch(step);
    other += held_other() - at_rest;
  }
  const torch::Tensor inputs = data.zero_inputs(c.batch);
  const nn::Tensors sample{runtime::split_microbatches(inputs, c.microbatches * c.dp).front()};
  const runtime::Recompute recompute = c.recompute;
  // Selective: the layers measured keeping what their regions keep.
  const nn::SelectiveRecomputeScope selective(recompute == runtime::Recompute::Selective);
  const sim::ModelMemory measured =
      runtime::measure_model_memory(model, sample, c.seed, c.precision);
  const schedule::Schedule& schedule = pipeline.schedule();
  const partition::Partition& cut = pipeline.partition();
  std::vector<sim::StageMemory> stages;
  for (int s = 0; s < schedule.stages; ++s) {
    stages.push_back(sim::stage_memory(measured, cut.first_layer(s), cut.end_layer(s),
                                       s == schedule.stages - 1));
    // What a micro-batch leaves from its F to its B (--compare-sim's simulator
    // charges it per micro-batch in flight): under full recomputation its input.
    stage_kept.push_back(recompute == runtime::Recompute::Always ? stages.back().input_bytes
                                                                 : stages.back().stash);
  }
  double largest = 0, stepped = 0;  // what the optimizer steps (its shards under --zero)
  for (const auto& p : pipeline.parameters()) {
    stepped += bytes_of(p);
    largest = std::max(largest, bytes_of(p));
  }
  // The stages' weights as the step uses them. ZeRO-3: gathered whole from
  // their UNSHARD to their RESHARD, dp shards each (exact up to the padding).
  // Else the layers' weights (ZeRO-1/2 shards are views of them), each
  // storage once.
  double whole = 0;
  if (c.zero == 3 && c.dp > 1) {
    whole = c.dp * stepped;
  } else {
    std::set<const void*> seen;
    for (const auto& p : pipeline.held_parameters())
      if (seen.insert(p.storage().unsafeGetStorageImpl()).second) whole += bytes_of(p);
  }
  const double per_byte = optimizer_state_per_parameter_byte(c.optimizer);
  sim::StaticMemory fixed = sim::replica_static(whole, stepped, c.zero, c.dp, per_byte);
  fixed.other = device.is_cpu() ? other : other - at_rest + library_bytes;
  fixed.gradients_freed = TORCH_VERSION_MAJOR >= 2;  // zero_grad sets them to none
  const MessageTerms messages = message_terms(c, device);
  fixed.sends_copied_up_to = messages.sends_copied_up_to;
  fixed.receives_on_arrival_up_to = messages.receives_on_arrival_up_to;
  std::vector<bool> recomputed(c.microbatches);
  for (int mb = 0; mb < c.microbatches; ++mb)
    recomputed[mb] = runtime::recomputes(recompute, mb, c.microbatches);
  // Adam's step makes two temporaries the size of the parameter it updates
  // (its denominator's square root and quotient; measured on the mlp).
  return sim::predict_rank_memory(schedule, pp_rank, stages, fixed, recomputed,
                                  per_byte > 0 ? 2 * largest : 0);
}

}  // namespace

nn::ModelSpec model_spec(const TrainConfig& c) {
  return make_model(c);
}

void check_memory_cap_before_start(const TrainConfig& c) {
  // A cut by measured costs is the ranks' to make (the plan here cuts as
  // uniform does); tp shares layers the profile measures whole.
  if (c.max_memory_gb <= 0 || c.tp != 1 || partition::needs_layer_costs(c.balance) ||
      parse_device(c.device) != DeviceKind::Cpu)
    return;
  const nn::ModelSpec model = make_model(c);
  // One micro-batch of a replica's share of the batch, as the ranks measure.
  const torch::Tensor sample =
      runtime::split_microbatches(make_data_source(c)->zero_inputs(c.batch), c.microbatches * c.dp)
          .front();
  const PipelinePlan plan = plan_of(c, model);
  std::vector<bool> recomputed(c.microbatches);
  for (int mb = 0; mb < c.microbatches; ++mb)
    recomputed[mb] = runtime::recomputes(c.recompute, mb, c.microbatches);
  const std::vector<sim::MemoryPrediction> ranks =
      plan::profiled_rank_memory(measure_profiled_memory(c, model, sample), plan.schedule,
                                 plan.partition, recomputed, plan::Replicas{c.dp, c.zero});
  std::vector<RankMemory> all(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    // Pipeline rank r's first replica (topology.h: rank = pp_index * dp +
    // dp_index at tp 1); its replicas hold the same, up to the padding.
    all[r].rank = static_cast<int>(r) * c.dp;
    set_prediction(all[r], ranks[r]);
  }
  const std::string refusal = memory_cap_refusal(all, c.max_memory_gb);
  BATON_CHECK(refusal.empty(), refusal,
              " (checked before any rank started, without the data batch)");
}

void check_setup(const TrainConfig& c, bool check_outputs) {
  check_config(c);
  const nn::ModelSpec model = make_model(c);
  // The plan's rules (the stage count, a file's ranks and micro-batches, no
  // flush, the reductions) as the ranks will apply them, named by flag.
  const PipelinePlan planned = plan_of(c, model);
  check_no_flush_combinations(c, planned.schedule);
  check_pipemare_flags(c, planned.schedule);
  runtime::check_precision_supported(c.precision, torch::Device(c.device));
  check_parameter_memory(c);
  if (check_outputs) check_output_paths(c);
  BATON_CHECK(parse_device(c.device) != DeviceKind::Cuda || torch::cuda::is_available(),
              "[train.config] device cuda: this process sees no CUDA device (or LibTorch was built "
              "without CUDA)");
  check_checkpoint_flags(c);
  if (c.realtime) {
    const std::string refusal = realtime_refusal();
    BATON_CHECK(refusal.empty(), refusal);
  }
  const int world = c.dp * c.pp * c.tp;
  if (world > 1 && c.transport != TransportKind::kGloo &&
      parse_device(c.device) == DeviceKind::Cpu) {
    const std::string refusal = comm::shm_transport_refusal(world);
    BATON_CHECK(refusal.empty(), refusal);
  }
  check_data(c);
}

namespace {

// The run's first line (rank 0): model, schedule, layout, balance, precision,
// threads and steps; with pipemare its delays and techniques.
void print_banner(const TrainConfig& c, const nn::ModelSpec& model, const Pipeline& pipeline,
                  int threads, int64_t total) {
  const char* omp_policy = std::getenv("OMP_WAIT_POLICY");
  const bool omp_passive = omp_policy != nullptr && std::string(omp_policy) == "PASSIVE";
  const std::string blas = blas_kernels();  // OpenBLAS's kernels (core/blas_kernels.h)
  const std::string dp =
      (c.dp > 1 ? detail::concat("dp=", c.dp, ", ") : std::string()) +
      (c.tp > 1 ? detail::concat("tp=", c.tp, ", ") : std::string()) +
      (c.zero > 0 ? detail::concat("zero=", c.zero, c.dp > 1 ? ", " : " (no-op at dp=1), ")
                  : std::string());
  std::printf(
      "baton train: model %s (%d layers), schedule %s, %spp=%d, stages=%d, micro-batches=%d, "
      "batch=%d, balance %s -> %s, recompute %s, precision %s, %s, %d thread(s) per "
      "rank%s%s%s, %lld steps\n",
      c.model.c_str(), model.num_layers(), schedule_label(c).c_str(), dp.c_str(), c.pp,
      pipeline.schedule().stages, c.microbatches, c.batch, c.balance.c_str(),
      pipeline.partition().to_string().c_str(), std::string(to_string(c.recompute)).c_str(),
      std::string(to_string(c.precision)).c_str(),
      c.clip_grad_norm > 0 ? detail::concat("clip-grad-norm ", c.clip_grad_norm).c_str()
                           : "no clipping",
      threads, omp_passive ? " (OpenMP waits passive)" : "",
      c.realtime ? ", real-time (SCHED_FIFO)" : "", blas.empty() ? "" : (", " + blas).c_str(),
      static_cast<long long>(total));
  if (pipeline.schedule().updates == schedule::WeightUpdates::kPipeMare) {
    std::string delays;
    for (int d : schedule::update_delays(pipeline.schedule()))
      delays += (delays.empty() ? "" : ",") + std::to_string(d);
    std::printf(
        "baton train: pipemare: stage delays %s (updates between a forward and its "
        "backward); lr warm-up %s; discrepancy correction %s\n",
        delays.c_str(),
        c.pipemare_warmup > 0 ? detail::concat("over ", c.pipemare_warmup, " steps").c_str()
                              : "off",
        c.pipemare_correction ? detail::concat("on (decay ", c.pipemare_decay, ")").c_str()
                              : "off");
  }
  flush_stdout("[train]");
}

// The activation model's peak for this rank (sim/memory_model.h), or none
// under tp (the layers measured would be whole, the rank holds a share).
// Measured before the steps, since measuring moves the allocator's peak
// (reset at the third).
sim::MemoryPrediction predicted_memory(const TrainConfig& c, const nn::ModelSpec& model,
                                       const Pipeline& pipeline, DataSource& data, int pp_rank,
                                       int64_t first, bool leader, int rank, torch::Device device,
                                       double library_bytes, std::vector<double>& stage_kept) {
  sim::MemoryPrediction predicted;
  if (c.tp == 1) {
    try {
      predicted = predict_rank_memory(c, model, pipeline, data, pp_rank, first, device,
                                      library_bytes, stage_kept);
    } catch (const std::exception& e) {
      stage_kept.clear();
      if (c.max_memory_gb > 0) throw;  // the cap cannot be checked without it
      // A prediction that fails costs the report its line, not the run. Each
      // rank measures every layer (one at a time), so rank 0 says why for all.
      if (leader)
        std::fprintf(stderr, "baton train: warning: rank %d: no memory prediction: %s\n", rank,
                     std::string(e.what()).substr(0, std::string(e.what()).find('\n')).c_str());
    }
  }
  return predicted;
}

// What the steps leave for the end of the run: the last loss, the largest
// activation peak and weight-version count, the dp reduction times.
struct StepTotals {
  double loss = 0;
  double peak_activation_bytes = 0;
  int weight_versions = 1;
  std::vector<double> reduction_ms, exposed_reduction_ms;  // per step, dp > 1

  void add(double step_loss, const runtime::StepResult& done, int dp) {
    loss = step_loss;
    peak_activation_bytes = std::max(peak_activation_bytes, done.peak_activation_bytes);
    weight_versions = std::max(weight_versions, done.weight_versions);
    if (dp > 1) {
      reduction_ms.push_back(done.reduction_ms);
      exposed_reduction_ms.push_back(done.exposed_reduction_ms);
    }
  }
};

// The clip's norm is the same on every rank (one all-reduce), so every rank
// skips the same steps; the leader says so.
void warn_skipped(int64_t step, const runtime::StepResult& done, bool fp16) {
  std::fprintf(stderr,
               "baton train: warning: step %lld: the gradients' norm is %g%s; the update "
               "is skipped\n",
               static_cast<long long>(step + 1), done.grad_norm,
               fp16 ? " (an fp16 overflow: the loss scale halves)" : "");
}

// A step's --metrics fields beyond its loss and time.
StepExtras step_extras(const TrainConfig& c, const runtime::StepResult& done, double data_ms,
                       bool fp16) {
  StepExtras extras;
  if (c.dp > 1) {
    extras.reduction_wait_ms = done.reduction_wait_ms;
    extras.reduction_ms = done.reduction_ms;
    extras.exposed_reduction_ms = done.exposed_reduction_ms;
    if (c.zero > 0) extras.unshard_wait_ms = done.unshard_wait_ms;
  }
  extras.grad_norm = done.grad_norm;
  extras.data_ms = data_ms;
  extras.skipped = done.skip_update;
  if (fp16) extras.loss_scale = done.loss_scale;
  return extras;
}

// What this rank holds at rest, after the run (evaluation freed again what
// --zero 3 gathered; with --zero, parameters() is only the shards its
// optimizer steps), beside its prediction and the run's reduction times.
RankMemory rank_memory(int rank, Pipeline& pipeline, torch::optim::Optimizer& optimizer,
                       const StepTotals& totals, const sim::MemoryPrediction& predicted,
                       const RankMemory& steps_peak) {
  RankMemory local = measure_memory(rank, pipeline.held_parameters(), optimizer,
                                    totals.peak_activation_bytes, totals.weight_versions);
  copy_allocator_peak(local, steps_peak);
  set_prediction(local, predicted);
  local.reduction_ms = median(totals.reduction_ms);
  local.exposed_reduction_ms = median(totals.exposed_reduction_ms);
  return local;
}

}  // namespace

void train(const TrainConfig& c, const comm::RankEnv& ctx) {
  check_config(c);
  BATON_CHECK(
      ctx.world_size == c.dp * c.pp * c.tp, "[train] world size ", ctx.world_size,
      " does not equal dp=", c.dp, " x pp=", c.pp,
      c.tp > 1 ? detail::concat(" x tp=", c.tp) : std::string(),
      ": each process runs one tensor-parallel share of one pipeline rank of one replica (start ",
      c.dp * c.pp * c.tp, " ranks, e.g. --nproc ", c.dp * c.pp * c.tp, ")");
  const int cores = available_cores();
  const int threads =
      c.threads > 0 ? c.threads : std::max(1, cores / std::max(1, ctx.local_world_size));
  // Before the intra-op and communication threads start: they inherit the class.
  if (c.realtime) run_realtime();
  // Before anything is allocated: every byte of the rank counted (comm/memory_counter.h).
  comm::install_memory_counter();
  const torch::Device device = comm::device_for_local_rank(torch::Device(c.device), ctx.local_rank);
  // Before the model runs there: the workspaces its first products leave.
  const double library_bytes = static_cast<double>(comm::device_library_bytes(device));
  at::set_num_threads(threads);
  torch::manual_seed(c.seed);
  const bool leader = ctx.rank == 0;

  const nn::ModelSpec model = make_model(c);
  // Only the data this rank's stages read: inputs on the first stage's
  // ranks, targets on the last's.
  const topology::Coords here = topology::Topology(c.dp, c.pp, c.tp).coords(ctx.rank);
  const DataRoles roles = data_roles(plan_of(c, model).schedule, here.pp);
  std::unique_ptr<DataSource> data = make_data_source(c, roles, here.dp);
  std::unique_ptr<DataSource> valid = make_valid_source(c, roles);
  // What a checkpoint records of --data (rank 0, which writes the manifest, reads the data).
  const nlohmann::json dataset = leader ? dataset_identity(c) : nlohmann::json();
  Pipeline pipeline(model, model.loss, pipeline_options(c, ctx, *data));
  comm::Communicator& comm = pipeline.communicator();
  auto optimizer = make_optimizer(c, pipeline.parameters());
  // pipedream, async and pipemare update inside the step, after each micro-batch's backward.
  const bool updates_inside = pipeline.updates_inside_step();
  if (updates_inside) pipeline.set_optimizer(optimizer.get());

  const int64_t per_epoch = data->steps_per_epoch();
  const int64_t total =
      c.steps > 0 ? c.steps : (c.epochs > 0 && per_epoch > 0 ? c.epochs * per_epoch : 100);
  if (leader) print_banner(c, model, pipeline, threads, total);
  const int64_t first = resume_if_asked(c, pipeline, *optimizer, total, *data);
  if (leader && first > 0) {
    std::printf("baton train: resumed from %s at step %lld\n", c.resume.c_str(),
                static_cast<long long>(first));
    flush_stdout("[train]");
  }
  // Test hook (core/test_hooks.h): "R:S" kills rank R once S steps are done
  // and saved, the resumed ones included (S = the step resumed from).
  constexpr const char* kKillHook = "BATON_TEST_KILL_AT_STEP";
  kill_if_hooked(kKillHook, ctx.rank, first);
  std::vector<double> stage_kept;  // each stage's measured bytes kept per micro-batch
  const sim::MemoryPrediction predicted =
      predicted_memory(c, model, pipeline, *data, here.pp, first, leader, ctx.rank, device,
                       library_bytes, stage_kept);
  if (c.max_memory_gb > 0) check_memory_cap(comm, ctx.rank, predicted, c.max_memory_gb);
  Progress progress(c, total, leader, first);
  const SaveOptions saving = save_options(c);

  StepTotals totals;
  const int64_t compared_from = c.compare_sim ? std::max(first, total - kComparedSteps) : total;
  std::vector<trace::Timeline> compared;  // the steps --compare-sim measures, but the last
  const bool fp16 = c.precision == Precision::Fp16;
  for (int64_t step = first; step < total; ++step) {
    // The measured peak is the steady state's: from this run's third step on.
    if (step == first + 2) {
      comm::reset_memory_peak();
      comm::reset_device_memory_peak(device);
    }
    const auto read_started = Clock::now();
    auto [inputs, targets] = data->batch(step);
    const double data_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - read_started).count();
    set_learning_rate(*optimizer, learning_rate(c, step, total));
    optimizer->zero_grad();
    // The steps --compare-sim measures start on every rank at once, as the
    // simulator starts them: without the barrier a rank that finished the
    // previous step early starts this one early, and its wait for the first
    // stage (the previous step's tail) would count as this step's bubble.
    if (step >= compared_from) comm.barrier("the steps --compare-sim measures");
    const auto t0 = Clock::now();
    const double loss = pipeline.step(inputs, targets);
    // Every rank sees the mini-batch loss (no barrier: step() returns it on
    // every rank, runtime/executor.h), so every rank stops at this step,
    // before an update from non-finite gradients (pipedream, async and pipemare have
    // updated inside the step already; they stop after it).
    BATON_CHECK(std::isfinite(loss), "[train] rank ", ctx.rank, ": the loss of step ", step + 1,
                " is ", loss, "; training diverged (lower --lr, now ", c.lr, ")");
    const runtime::StepResult& done = pipeline.last_step();
    if (done.skip_update && leader) warn_skipped(step, done, fp16);
    if (!updates_inside && !done.skip_update) {
      comm::MemoryCategoryScope charged(comm::MemoryCategory::kOptimizer);
      optimizer->step();
    }
    const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    totals.add(loss, done, c.dp);
    progress.step_done(step, loss, step_s, step_extras(c, done, data_ms, fp16));
    if (step >= compared_from && step + 1 < total)
      compared.push_back(gather_step_timeline(c, pipeline));
    if (valid && ((c.eval_every > 0 && (step + 1) % c.eval_every == 0) || step + 1 == total))
      progress.valid_done(step, valid_loss(pipeline, model, *valid, c));
    save_if_due(c, pipeline, *optimizer, step + 1, total, saving, *data, dataset);
    kill_if_hooked(kKillHook, ctx.rank, step + 1);
  }
  // What a message costs, for --compare-sim's simulator to charge
  // (collective; nothing alone). Probed after the steps, as they ran: at
  // start-up, with the ranks still building and the spin policy not yet
  // settled, the probe's waits often slept, and the latency it read moved
  // between 1 and 23 µs from run to run (hidden 16).
  const comm::P2pCost link = c.compare_sim ? comm::measure_p2p_cost(comm) : comm::P2pCost{};
  if (pipeline.schedule().carries && total > first) {
    // No flush between steps (2bw): the last step's gradients are whole once
    // its carried backwards have run; apply them like every other step's.
    pipeline.flush();
    if (!updates_inside) optimizer->step();
  }

  // The allocator's peak over the steps (from the third), before the test
  // set's forwards add theirs.
  RankMemory steps_peak;
  take_allocator_peak(steps_peak, device);
  const double accuracy = c.test_set ? test_accuracy(pipeline, *data, c) : -1;
  const RankMemory mine =
      rank_memory(ctx.rank, pipeline, *optimizer, totals, predicted, steps_peak);
  progress.finish(totals.loss, accuracy, gather_memory(comm, mine));
  // --compare-sim's activations: the allocator's against the simulator fed
  // the measured layers' kept bytes (where measured: CPU, tp = 1).
  ComparedActivations activations;
  if (!stage_kept.empty() && !mine.measured_on_device) {
    activations.stage_kept = stage_kept;
    activations.measured = mine.measured[static_cast<int>(comm::MemoryCategory::kActivations)];
  }
  write_timelines(c, pipeline, link, compared, activations);
  comm.barrier("the end of training");
}

}  // namespace baton::train
