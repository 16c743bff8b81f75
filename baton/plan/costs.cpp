#include "baton/plan/costs.h"

#include <algorithm>
#include <cmath>

#include "baton/core/error.h"
#include "baton/plan/schedules.h"

namespace baton::plan {

namespace {

double bytes_per_second(double gbps) {
  return gbps * 1e9 / 8;
}

struct Link {
  double gbps, latency_us;
};
Link link(const Cluster& c, bool in_node) {
  return in_node ? Link{c.intra_node_gbps, c.intra_node_latency_us}
                 : Link{c.inter_node_gbps, c.inter_node_latency_us};
}

int stages_of(const Config& c) {
  return c.p * c.virtual_stages;
}

bool v_map(const Config& c) {
  const SearchedSchedule* s = find_searched_schedule(c.schedule);
  return s && s->map == schedule::StageMap::V;
}

// Tied, the head is the embedding itself when the last stage is on rank 0.
bool head_is_embedding(const ModelShape& shape, const Config& c) {
  return shape.tie_embeddings && (c.p == 1 || v_map(c));
}

}  // namespace

std::vector<int> stage_layers_of(int layers, const Config& c) {
  const int stages = stages_of(c);
  if (!c.stage_layers.empty()) {
    BATON_ASSERT(static_cast<int>(c.stage_layers.size()) == stages, c.stage_layers.size(),
                 " stage layer counts for ", stages, " stages");
    return c.stage_layers;
  }
  BATON_ASSERT(layers % stages == 0, "layers ", layers, " not split into ", stages);
  return std::vector<int>(stages, layers / stages);
}

std::vector<int> balanced_stage_layers(int layers, int stages, double last_extra) {
  BATON_ASSERT(stages >= 1 && stages <= layers && last_extra >= 0, "balance ", layers,
               " layers over ", stages, " stages");
  auto capacity = [&](int s, double time) {
    const double extra = s == stages - 1 ? last_extra : 0;
    return std::max(0, static_cast<int>(std::floor(time - extra + 1e-9)));
  };
  auto total = [&](double time) {
    long sum = 0;
    for (int s = 0; s < stages; ++s) sum += capacity(s, time);
    return sum;
  };
  // The slowest stage's time: j blocks, or the last stage's blocks and the
  // logits (j + the fraction of last_extra); feasibility grows with it.
  const double fraction = last_extra - std::floor(last_extra);
  double time = 0;
  for (int j = layers / stages;; ++j) {
    if (total(j) >= layers) {
      time = j;
      break;
    }
    if (fraction > 0 && total(j + fraction) >= layers) {
      time = j + fraction;
      break;
    }
  }
  std::vector<int> out(stages);
  long spare = -layers;
  for (int s = 0; s < stages; ++s) spare += out[s] = capacity(s, time);
  // Give the spare blocks back from the ends inwards, one per stage a round.
  while (spare > 0) {
    for (int k = 0; k < stages && spare > 0; ++k) {
      const int s = k % 2 == 0 ? k / 2 : stages - 1 - k / 2;
      if (out[s] > 0) --out[s], --spare;
    }
  }
  return out;
}

std::vector<int> stages_of_rank(const Config& c, int r) {
  if (v_map(c)) return {r, 2 * c.p - 1 - r};
  std::vector<int> out;
  for (int s = r; s < stages_of(c); s += c.p) out.push_back(s);
  return out;
}

double gemm_efficiency(const Cluster& cluster, const ModelShape& shape, int b, int t) {
  const double x = static_cast<double>(b) * shape.seq * shape.hidden / t;
  return cluster.efficiency * x / (x + cluster.efficiency_half_size);
}

double allreduce_seconds(double bytes, int n, double gbps, double latency_us) {
  if (n <= 1) return 0;
  return 2.0 * (n - 1) / n * bytes / bytes_per_second(gbps) + latency_us * 1e-6;
}

bool tensor_parallel_in_node(const Cluster& cluster, const Config& c) {
  return c.t <= cluster.gpus_per_node;
}
bool data_parallel_in_node(const Cluster& cluster, const Config& c) {
  return static_cast<long>(c.t) * c.d <= cluster.gpus_per_node;
}
bool pipeline_in_node(const Cluster& cluster, const Config& c) {
  return static_cast<long>(c.t) * c.d * c.p <= cluster.gpus_per_node;
}

sim::CostModel stage_costs(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  const int stages = stages_of(c);
  const std::vector<int> blocks = stage_layers_of(shape.layers, c);
  const double flops_per_s =
      cluster.peak_tflops * 1e12 * gemm_efficiency(cluster, shape, c.microbatch, c.t);
  const double layer = layer_forward_flops(shape, c.microbatch) / c.t / flops_per_s;
  const double elementwise =
      layer_activation_bytes(shape, c.microbatch, c.t, false) / (cluster.memory_gb_per_s * 1e9);
  const double logits = logits_forward_flops(shape, c.microbatch) / c.t / flops_per_s;
  const double boundary = 2.0 * c.microbatch * shape.seq * shape.hidden;
  const Link tp = link(cluster, tensor_parallel_in_node(cluster, c));
  const double tp_allreduce = allreduce_seconds(boundary, c.t, tp.gbps, tp.latency_us);
  const double state =
      state_bytes_per_parameter(c.d, c.zero, cluster.optimizer_bytes_per_parameter);
  // Selective recomputation runs the attention core's forward again in I
  // (and the GELU, elementwise: not charged).
  const double core =
      c.selective ? attention_core_flops(shape, c.microbatch) / c.t / flops_per_s : 0;

  sim::CostModel model;
  const Link pp = link(cluster, pipeline_in_node(cluster, c));
  model.comm_latency = pp.latency_us * 1e-6;
  model.comm_bytes_per_time = bytes_per_second(pp.gbps);
  // baton's scatter/gather of boundaries over the tp ranks (on by default).
  model.tp = c.t;
  model.tp_link = sim::Link{tp.latency_us * 1e-6, bytes_per_second(tp.gbps)};
  model.scatter_gather = true;
  for (int s = 0; s < stages; ++s) {
    const double n = blocks[s];
    sim::StageCost cost;
    cost.forward = n * (layer + elementwise + 2 * tp_allreduce);
    cost.input_backward =
        n * ((layer + elementwise + 2 * tp_allreduce) * (c.recompute ? 2 : 1) + core);
    cost.weight_backward = n * layer;
    cost.activation_bytes =
        n * layer_activation_bytes(shape, c.microbatch, c.t, c.recompute, c.selective);
    cost.weight_stash_bytes = 0;
    cost.boundary_bytes = boundary;
    cost.parameter_bytes = n * layer_parameters(shape) / c.t * state;
    if (s == 0) cost.parameter_bytes += embedding_parameters(shape) / c.t * state;
    if (s == stages - 1) {
      cost.forward += logits;
      cost.input_backward += logits;
      cost.weight_backward += logits;
      // fp32 logits for the cross entropy (Korthikanti section 4.3: 4 s b V / t).
      cost.activation_bytes += 4.0 * shape.seq * c.microbatch * shape.vocab / c.t;
      if (!head_is_embedding(shape, c))
        cost.parameter_bytes += head_parameters(shape) / c.t * state;
    }
    model.stages.push_back(cost);
  }
  return model;
}

double dp_allreduce_seconds(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  const std::vector<int> blocks = stage_layers_of(shape.layers, c);
  const int last = stages_of(c) - 1;
  double params = 0;
  for (int s : stages_of_rank(c, 0)) {
    params += blocks[s] * layer_parameters(shape) / c.t;
    if (s == 0) params += embedding_parameters(shape) / c.t;
    if (s == last && !head_is_embedding(shape, c)) params += head_parameters(shape) / c.t;
  }
  return gradient_allreduce_seconds(2.0 * params, cluster, c);
}

double tied_exchange_seconds(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  if (!shape.tie_embeddings || c.p == 1 || v_map(c)) return 0;
  const Link pp = link(cluster, pipeline_in_node(cluster, c));
  return allreduce_seconds(2.0 * head_parameters(shape) / c.t, 2, pp.gbps, pp.latency_us);
}

double gradient_allreduce_seconds(double bytes, const Cluster& cluster, const Config& c) {
  if (cluster.allreduce_gbps > 0) {
    return allreduce_seconds(bytes, c.d, cluster.allreduce_gbps, cluster.allreduce_latency_us);
  }
  const Link dp = link(cluster, data_parallel_in_node(cluster, c));
  return allreduce_seconds(bytes, c.d, dp.gbps, dp.latency_us);
}

double exposed_seconds(double allreduce_s, const Config& c, const sim::CostModel& costs) {
  return exposed_seconds(allreduce_s, c, costs, true);
}

double exposed_seconds(double allreduce_s, const Config& c, const sim::CostModel& costs,
                       bool overlap) {
  if (!overlap) return allreduce_s;
  // baton's placement (schedule/grad_reduction.h): a stage's buckets reduce
  // right after the stage's last backward on its rank. Rank 0's lowest stage
  // ends the backward pass, so its share starts after the rank's last compute
  // and nothing hides it; the rank's other chunks finish earlier and reduce
  // while it runs the lowest stage's backwards of the last group of
  // micro-batches, min(m, p) of them (interleaved's cooldown; the simulator
  // agrees at p = 4, m = 8, v = 2).
  const std::vector<int> stages = stages_of_rank(c, 0);
  const int lowest = *std::min_element(stages.begin(), stages.end());
  double bytes = 0;
  for (int s : stages) bytes += costs.stages[s].parameter_bytes;
  const double lowest_share =
      bytes > 0 ? costs.stages[lowest].parameter_bytes / bytes : 1.0 / stages.size();
  const double window = std::min(c.microbatches, c.p) * costs.backward(lowest);
  return allreduce_s * lowest_share + std::max(0.0, allreduce_s * (1 - lowest_share) - window);
}

double dp_exposed_seconds(const ModelShape& shape, const Cluster& cluster, const Config& c,
                          const sim::CostModel& costs) {
  return exposed_seconds(dp_allreduce_seconds(shape, cluster, c), c, costs,
                         cluster.overlap_grad_reduce);
}

double working_bytes(const ModelShape& shape, const Config& c) {
  const double whole = layer_activation_bytes(shape, c.microbatch, c.t, false);
  if (c.selective) return whole - layer_activation_bytes(shape, c.microbatch, c.t, false, true);
  if (!c.recompute) return 0;
  return whole;
}

int analytic_peak_chunks(const Config& c) {
  const SearchedSchedule* traits = find_searched_schedule(c.schedule);
  BATON_ASSERT(traits, "no peak count for schedule ", c.schedule);
  return traits->peak_chunks(c.p, c.microbatches, c.virtual_stages);
}

Estimate estimate(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  const sim::CostModel costs = stage_costs(shape, cluster, c);
  return estimate(
      costs, c,
      dp_exposed_seconds(shape, cluster, c, costs) + tied_exchange_seconds(shape, cluster, c),
      working_bytes(shape, c));
}

Estimate estimate(const sim::CostModel& costs, const Config& c, double added_s,
                  double working_bytes) {
  const SearchedSchedule* traits = find_searched_schedule(c.schedule);
  const bool split = traits && traits->splits_backward;
  const double m = c.microbatches;
  // head[s]: forwards (and transfers) from stage 0 to stage s; tail: the input backwards.
  std::vector<double> head(costs.stages.size() + 1, 0), tail(costs.stages.size() + 1, 0);
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const double comm = s + 1 < costs.stages.size() ? costs.comm_time(static_cast<int>(s)) : 0;
    head[s + 1] = head[s] + costs.stages[s].forward + comm;
    tail[s + 1] = tail[s] + costs.stages[s].input_backward + comm;
  }
  double step = 0, memory = 0;
  for (int r = 0; r < c.p; ++r) {
    double f = 0, i = 0, w = 0, params = 0, largest = 0, smallest = INFINITY;
    int lowest = static_cast<int>(costs.stages.size());
    for (int s : stages_of_rank(c, r)) {
      const sim::StageCost& cost = costs.stages[s];
      f += cost.forward, i += cost.input_backward, w += cost.weight_backward;
      params += cost.parameter_bytes;
      largest = std::max(largest, cost.activation_bytes);
      smallest = std::min(smallest, cost.activation_bytes);
      lowest = std::min(lowest, s);
    }
    step = std::max(step, m * (f + i + w));
    if (c.p > 1) step = std::max(step, head[lowest] + tail[lowest] + m * (f + i + (split ? 0 : w)));
    memory = std::max(memory, params + largest);
    if (r == 0) memory = std::max(memory, params + analytic_peak_chunks(c) * smallest);
  }
  Estimate e;
  e.step_s = step + added_s;
  e.memory_bytes = memory + working_bytes;
  return e;
}

}  // namespace baton::plan
