#include "baton/train/trainer.h"

#include <ATen/Parallel.h>
#include <torch/optim.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <tuple>

#include "baton/comm/communicator.h"
#include "baton/comm/p2p_probe.h"
#include "baton/core/error.h"
#include "baton/nn/models.h"
#include "baton/partition/balance.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/microbatch.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"
#include "baton/train/data_source.h"
#include "baton/train/output_paths.h"
#include "baton/train/profile.h"
#include "baton/train/timeline_gather.h"
#include "baton/trace/writers.h"

namespace baton::train {
namespace {

using Clock = std::chrono::steady_clock;

nn::ModelOptions model_options(const TrainConfig& c) {
  nn::ModelOptions options;
  options.layers(c.layers).hidden(c.hidden).heads(c.heads).context(c.context);
  options.in_features(c.in_features).classes(c.classes).vocab(256);
  return options;
}

std::string model_name(const TrainConfig& c) { return c.model == "cnn" ? "fashion_cnn" : c.model; }

nn::ModelSpec make_model(const TrainConfig& c) { return nn::make_model(model_name(c), model_options(c)); }

// The ranks all live on this machine: their float parameters alone must fit.
void check_parameter_memory(const TrainConfig& c) {
  const double bytes = nn::parameter_count(model_name(c), model_options(c)) * sizeof(float);
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  char text[160];
  std::snprintf(text, sizeof text, "%.0f bytes of parameters, more than the %.0f bytes", bytes, memory);
  BATON_CHECK(memory <= 0 || bytes <= memory, "[train] model ", c.model, " needs ", text,
              " of memory on this machine; lower --hidden or --layers");
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                        std::vector<torch::Tensor> params) {
  if (c.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(c.lr));
  }
  if (c.optimizer == "adamw") {
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(c.lr));
  }
  return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(c.lr));
}

schedule::Schedule make_schedule(const TrainConfig& c) {
  return schedule::lower(schedule::generate(c.schedule, schedule::GeneratorOptions{}
                                                            .set_ranks(c.pp)
                                                            .set_microbatches(c.microbatches)
                                                            .set_virtual_stages(c.virtual_stages)));
}

void check_stage_count(const TrainConfig& c, const nn::ModelSpec& model, int stages) {
  BATON_CHECK(stages <= model.num_layers(), "[train] schedule ", c.schedule, " with pp=", c.pp,
              " makes ", stages, " stages but model ", c.model, " has only ", model.num_layers(),
              " layers; every stage needs at least one layer (raise --layers or lower --pp/--virtual)");
}

// Sums a scalar over all ranks (ranks without a last stage contribute 0).
double sum_over_ranks(comm::Communicator* comm, double value, const std::string& what) {
  if (!comm) return value;
  std::vector<torch::Tensor> t{torch::tensor({value}, torch::kFloat64)};
  comm->all_reduce_sum(t, what);
  return t[0].item<double>();
}

std::string format_eta(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

partition::Partition choose_partition(const TrainConfig& c, const nn::ModelSpec& model,
                                      int stages, DataSource& data, comm::Communicator* comm) {
  const int L = model.num_layers();
  check_stage_count(c, model, stages);
  const bool needs_costs = c.balance == "params" || c.balance == "time" || c.balance == "memory" ||
                           c.balance == "optimal";
  std::vector<partition::LayerCost> costs(L);
  if (needs_costs) {
    const torch::Tensor sample =
        runtime::split_microbatches(data.batch(0).first, c.microbatches).front();
    costs = profile_layers(model, sample, c.seed);
    if (comm) {
      // Every rank must cut the model the same way: average the timings.
      std::vector<torch::Tensor> times{torch::zeros({2, L}, torch::kFloat64)};
      for (int i = 0; i < L; ++i) {
        times[0][0][i] = costs[i].forward_time;
        times[0][1][i] = costs[i].backward_time;
      }
      comm->all_reduce_sum(times, "the layer profile average");
      for (int i = 0; i < L; ++i) {
        costs[i].forward_time = times[0][0][i].item<double>() / comm->world_size();
        costs[i].backward_time = times[0][1][i].item<double>() / comm->world_size();
      }
    }
  }
  partition::BalanceOptions options;
  options.set_activations_in_flight(partition::one_f_one_b_in_flight(stages));
  return partition::balance(c.balance, costs, stages, options);
}

// Test accuracy of a classifier: forward-only pipeline over the test set.
double test_accuracy(runtime::Executor& executor, DataSource& data, const TrainConfig& c,
                     comm::Communicator* comm) {
  auto [inputs, targets] = data.test_set();
  if (!inputs.defined()) return -1;
  const int64_t n = inputs.size(0);
  double correct = 0;
  for (int64_t begin = 0; begin < n; begin += c.batch) {
    const int64_t size = std::min<int64_t>(c.batch, n - begin);
    const int m = static_cast<int>(std::min<int64_t>(c.microbatches, size));
    const auto outputs = executor.run_forward(inputs.narrow(0, begin, size), m);
    const auto labels = runtime::split_microbatches(targets.narrow(0, begin, size), m);
    for (const auto& [mb, logits] : outputs) {
      correct += logits.argmax(-1).eq(labels[mb]).sum().item<double>();
    }
  }
  return sum_over_ranks(comm, correct, "the test accuracy sum") / static_cast<double>(n);
}

// Measured vs simulated: the simulator fed with the stage costs just measured.
// Simulates the schedule with the costs just measured (per-stage mean F, B,
// I, W times; activation and boundary bytes; the probed link) and prints
// measured against simulated: step time, bubble, the largest start-time
// deviation of any action, and rank 0's peak activation bytes.
void compare_with_simulation(const schedule::Schedule& schedule, const trace::Timeline& measured,
                             const std::map<int, double>& stage_bytes,
                             const std::map<int, double>& boundary_bytes, const comm::P2pCost& link,
                             double measured_peak_bytes, int rank_of_peak) {
  // Mean measured time of each kind (F, B, I, W) per stage.
  std::vector<std::array<double, 4>> sum(schedule.stages, {0, 0, 0, 0}), count = sum;
  for (const auto& e : measured.events) {
    const auto k = static_cast<size_t>(e.kind);
    if (k >= 4) continue;
    sum[e.stage][k] += e.end - e.start;
    count[e.stage][k] += 1;
  }
  auto mean = [&](int s, schedule::ActionKind kind) {
    const auto k = static_cast<size_t>(kind);
    return count[s][k] > 0 ? sum[s][k] / count[s][k] : 0.0;
  };
  sim::CostModel costs;
  costs.comm_latency = link.latency_ms;
  costs.comm_bytes_per_time = link.bytes_per_ms;
  costs.stages.resize(schedule.stages);
  for (int s = 0; s < schedule.stages; ++s) {
    sim::StageCost& cost = costs.stages[s];
    cost.forward = mean(s, schedule::ActionKind::F);
    cost.weight_backward = mean(s, schedule::ActionKind::W);
    // A full B is charged as I + W.
    cost.input_backward = count[s][static_cast<size_t>(schedule::ActionKind::B)] > 0
                              ? mean(s, schedule::ActionKind::B) - cost.weight_backward
                              : mean(s, schedule::ActionKind::I);
    const auto it = stage_bytes.find(s);
    cost.activation_bytes = it == stage_bytes.end() ? 0 : it->second;
    const auto boundary = boundary_bytes.find(s);
    cost.boundary_bytes = boundary == boundary_bytes.end() ? 0 : boundary->second;
  }
  const sim::Result predicted = sim::simulate(schedule, costs);
  const double measured_ms = trace::makespan(measured);
  std::printf("compare-sim: link %.1f us + %.2f GB/s; measured step %.2f ms, simulated %.2f ms "
              "(efficiency %.1f%%); bubble measured %.1f%%, simulated %.1f%%\n",
              link.latency_ms * 1000, link.bytes_per_ms / 1e6, measured_ms,
              predicted.stats.makespan, 100.0 * predicted.stats.makespan / std::max(1e-9, measured_ms),
              100.0 * trace::bubble_fraction(measured), 100.0 * predicted.stats.bubble_fraction);
  // Action by action: the start that strays furthest from its prediction.
  std::map<std::tuple<int, int, int, int>, double> simulated_start;
  for (const auto& e : predicted.timeline.events) {
    simulated_start[{e.rank, e.stage, e.microbatch, static_cast<int>(e.kind)}] = e.start;
  }
  const trace::Event* worst = nullptr;
  double worst_deviation = 0;
  for (const auto& e : measured.events) {
    const auto it = simulated_start.find({e.rank, e.stage, e.microbatch, static_cast<int>(e.kind)});
    if (it == simulated_start.end()) continue;
    const double deviation = e.start - it->second;
    if (worst == nullptr || std::abs(deviation) > std::abs(worst_deviation)) {
      worst = &e;
      worst_deviation = deviation;
    }
  }
  if (worst != nullptr) {
    std::printf("compare-sim: largest start deviation %+.3f ms at rank %d %s (measured %.3f ms)\n",
                worst_deviation, worst->rank,
                schedule::to_string(schedule::Action{worst->kind, worst->stage, worst->microbatch}).c_str(),
                worst->start);
  }
  std::printf("compare-sim: peak activation bytes on rank %d: measured %.0f, simulated %.0f\n",
              rank_of_peak, measured_peak_bytes, predicted.stats.peak_activation_bytes[rank_of_peak]);
}

}  // namespace

void check_setup(const TrainConfig& c) {
  check_config(c);
  const schedule::Schedule lowered = make_schedule(c);
  const nn::ModelSpec model = make_model(c);
  check_stage_count(c, model, lowered.stages);
  check_parameter_memory(c);
  check_output_paths(c);
  runtime::parse_recompute(c.recompute);
  // Zero costs are enough to check a method's name or hand-written counts.
  partition::balance(c.balance, std::vector<partition::LayerCost>(model.num_layers()), lowered.stages);
  check_data(c);
}

void train(const TrainConfig& c, const RankContext& ctx) {
  check_config(c);
  BATON_CHECK(ctx.world_size == c.pp, "[train] world size ", ctx.world_size,
              " does not equal pp=", c.pp, ": each process runs one pipeline rank (start ", c.pp,
              " ranks, e.g. --nproc ", c.pp, ")");
  const int cores = available_cores();
  const int threads = c.threads > 0 ? c.threads : std::max(1, cores / std::max(1, ctx.local_world_size));
  at::set_num_threads(threads);
  torch::manual_seed(c.seed);
  const bool leader = ctx.rank == 0;
  if (leader) check_output_paths(c);  // again: torchrun starts ranks without check_setup

  const schedule::Schedule lowered = make_schedule(c);
  const nn::ModelSpec model = make_model(c);
  const runtime::Recompute recompute = runtime::parse_recompute(c.recompute);
  std::unique_ptr<DataSource> data = make_data_source(c);

  std::optional<comm::Communicator> communicator;
  if (ctx.world_size > 1) {
    communicator.emplace(comm::connect(comm::ConnectOptions{}
                                           .set_rank(ctx.rank)
                                           .set_world_size(ctx.world_size)
                                           .set_master_addr(ctx.master_addr)
                                           .set_master_port(ctx.master_port)
                                           .set_timeout(std::chrono::milliseconds(
                                               static_cast<int64_t>(c.timeout_s * 1000)))
                                           .set_transport(comm::parse_transport(c.transport))));
  }
  comm::Communicator* comm = communicator ? &*communicator : nullptr;
  // What a message costs, for the simulator to charge (collective).
  const comm::P2pCost link = c.compare_sim && comm ? comm::measure_p2p_cost(*comm) : comm::P2pCost{};

  const partition::Partition part = choose_partition(c, model, lowered.stages, *data, comm);
  const schedule::Placement placement(lowered);
  runtime::Executor executor(lowered, ctx.rank,
                             runtime::build_stages(model, part, placement.stages_of_rank(ctx.rank), c.seed),
                             model.loss, comm, runtime::ExecutorOptions{recompute});
  auto optimizer = make_optimizer(c, executor.parameters());

  const int64_t per_epoch = data->steps_per_epoch();
  const int64_t total = c.steps > 0 ? c.steps : (c.epochs > 0 && per_epoch > 0 ? c.epochs * per_epoch : 100);
  std::ofstream metrics;
  if (leader) {
    std::printf("baton train: model %s (%d layers), schedule %s, pp=%d, stages=%d, micro-batches=%d, "
                "batch=%d, balance %s -> %s, recompute %s, %d thread(s) per rank, %lld steps\n",
                c.model.c_str(), model.num_layers(), c.schedule.c_str(), c.pp, lowered.stages,
                c.microbatches, c.batch, c.balance.c_str(), part.to_string().c_str(),
                c.recompute.c_str(), threads, static_cast<long long>(total));
    std::fflush(stdout);
    if (!c.metrics.empty()) {
      metrics.open(c.metrics);
      BATON_CHECK(metrics.good(), "[train] cannot write metrics file \"", c.metrics, "\"");
    }
  }

  runtime::StepResult last;
  double last_loss = 0;
  const auto started = Clock::now();
  for (int64_t step = 0; step < total; ++step) {
    auto [inputs, targets] = data->batch(step);
    if (c.lr_schedule == "cosine") {
      const double lr = 0.5 * c.lr * (1 + std::cos(M_PI * static_cast<double>(step) / total));
      for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
    }
    optimizer->zero_grad();
    const auto t0 = Clock::now();
    last = executor.run_step(inputs, targets);
    optimizer->step();
    const double step_s = std::chrono::duration<double>(Clock::now() - t0).count();
    // A collective cannot tell which rank is missing; it names the group.
    last_loss = sum_over_ranks(comm, last.loss,
                               detail::concat("the step ", step + 1, " loss sum (an all-reduce over ranks 0-",
                                              ctx.world_size - 1, ")"));
    // Every rank sees the summed loss, so every rank stops here.
    BATON_CHECK(std::isfinite(last_loss), "[train] rank ", ctx.rank, ": the loss of step ", step + 1,
                " is ", last_loss, "; training diverged (lower --lr, now ", c.lr, ")");
    if (leader) {
      const double samples_per_s = c.batch / std::max(1e-9, step_s);
      const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();
      const double eta = elapsed / (step + 1) * (total - step - 1);
      if ((step + 1) % c.log_every == 0 || step + 1 == total) {
        std::printf("step %lld/%lld  loss %.4f  samples/s %.1f  ETA %s\n",
                    static_cast<long long>(step + 1), static_cast<long long>(total), last_loss,
                    samples_per_s, format_eta(eta).c_str());
        std::fflush(stdout);
      }
      if (metrics.is_open()) {
        metrics << nlohmann::json{{"step", step + 1}, {"loss", last_loss},
                                  {"samples_per_s", samples_per_s}, {"step_ms", step_s * 1000}}
                       .dump()
                << "\n";
        metrics.flush();
        BATON_CHECK(metrics.good(), "[train] cannot write the metrics file \"", c.metrics,
                    "\": ", std::strerror(errno));
      }
    }
  }

  const double accuracy = test_accuracy(executor, *data, c, comm);
  const trace::Timeline timeline = gather_timeline(comm, last.events, last.start_ms, ctx.rank, ctx.world_size,
                                                   lowered.name + " p=" + std::to_string(c.pp) +
                                                       " m=" + std::to_string(c.microbatches) +
                                                       " (measured)");
  const std::map<int, double> stage_bytes = gather_stage_bytes(comm, last.stage_activation_bytes, lowered.stages);
  const std::map<int, double> boundary_bytes =
      gather_stage_bytes(comm, last.stage_boundary_bytes, lowered.stages);
  const double peak0 = last.peak_activation_bytes;
  if (leader) {
    if (accuracy >= 0) std::printf("test accuracy %.4f\n", accuracy);
    std::printf("final loss %.4f, %.1f s\n", last_loss,
                std::chrono::duration<double>(Clock::now() - started).count());
    if (metrics.is_open()) {
      nlohmann::json final_line{{"final", true}, {"loss", last_loss}, {"steps", total}};
      if (accuracy >= 0) final_line["test_accuracy"] = accuracy;
      metrics << final_line.dump() << "\n";
      metrics.flush();
      BATON_CHECK(metrics.good(), "[train] cannot write the metrics file \"", c.metrics, "\": ",
                  std::strerror(errno));
    }
    if (!c.trace.empty()) trace::write_file(c.trace, trace::to_chrome_trace(timeline));
    if (!c.svg.empty()) trace::write_file(c.svg, trace::to_svg(timeline));
    if (c.compare_sim) {
      compare_with_simulation(lowered, timeline, stage_bytes, boundary_bytes, link, peak0, 0);
    }
    std::fflush(stdout);
  }
  if (comm) comm->barrier("the end of training");
}

}  // namespace baton::train
