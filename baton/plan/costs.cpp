#include "baton/plan/costs.h"

#include <algorithm>

#include "baton/core/error.h"

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

}  // namespace

std::vector<int> stages_of_rank(const Config& c, int r) {
  if (c.schedule == "zb-v") return {r, 2 * c.p - 1 - r};
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
  BATON_ASSERT(shape.layers % stages == 0, "layers ", shape.layers, " not split into ", stages);
  const double n = shape.layers / stages;
  const double flops_per_s =
      cluster.peak_tflops * 1e12 * gemm_efficiency(cluster, shape, c.microbatch, c.t);
  const double layer = layer_forward_flops(shape, c.microbatch) / c.t / flops_per_s;
  const double logits = logits_forward_flops(shape, c.microbatch) / c.t / flops_per_s;
  const double boundary = 2.0 * c.microbatch * shape.seq * shape.hidden;
  const Link tp = link(cluster, tensor_parallel_in_node(cluster, c));
  const double tp_allreduce = allreduce_seconds(boundary, c.t, tp.gbps, tp.latency_us);
  const double state = state_bytes_per_parameter(c.d, c.zero1);

  sim::CostModel model;
  const Link pp = link(cluster, pipeline_in_node(cluster, c));
  model.comm_latency = pp.latency_us * 1e-6;
  model.comm_bytes_per_time = bytes_per_second(pp.gbps);
  // baton's scatter/gather of boundaries over the tp ranks (on by default).
  model.tp = c.t;
  model.tp_link = sim::Link{tp.latency_us * 1e-6, bytes_per_second(tp.gbps)};
  model.scatter_gather = true;
  for (int s = 0; s < stages; ++s) {
    sim::StageCost cost;
    cost.forward = n * (layer + 2 * tp_allreduce);
    cost.input_backward = n * (layer + 2 * tp_allreduce) * (c.recompute ? 2 : 1);
    cost.weight_backward = n * layer;
    cost.activation_bytes = n * layer_activation_bytes(shape, c.microbatch, c.t, c.recompute);
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
      if (stages > 1) cost.parameter_bytes += double(shape.vocab) * shape.hidden / c.t * state;
    }
    model.stages.push_back(cost);
  }
  return model;
}

double dp_allreduce_seconds(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  double params = 0;
  for (int s : stages_of_rank(c, 0)) {
    params += shape.layers / stages_of(c) * layer_parameters(shape) / c.t;
    if (s == 0) params += embedding_parameters(shape) / c.t;
  }
  return gradient_allreduce_seconds(2.0 * params, cluster, c);
}

double gradient_allreduce_seconds(double bytes, const Cluster& cluster, const Config& c) {
  const Link dp = link(cluster, data_parallel_in_node(cluster, c));
  return allreduce_seconds(bytes, c.d, dp.gbps, dp.latency_us);
}

double exposed_seconds(double allreduce_s, const Config& c, const sim::CostModel& costs) {
  double last_backward = 0;
  for (int s : stages_of_rank(c, 0)) last_backward += costs.backward(s);
  return std::max(0.0, allreduce_s - last_backward);
}

double dp_exposed_seconds(const ModelShape& shape, const Cluster& cluster, const Config& c,
                          const sim::CostModel& costs) {
  return exposed_seconds(dp_allreduce_seconds(shape, cluster, c), c, costs);
}

double working_bytes(const ModelShape& shape, const Config& c) {
  if (!c.recompute) return 0;
  return layer_activation_bytes(shape, c.microbatch, c.t, false);
}

int analytic_peak_chunks(const Config& c) {
  const int p = c.p, m = c.microbatches, v = c.virtual_stages;
  if (c.schedule == "gpipe") return m;
  if (c.schedule == "zb-v") return std::min(2 * p, 2 * m);
  if (c.schedule == "interleaved") {
    const int total = m * v;
    if (m == p) return total;
    const int g = m / std::max(1, m / p);
    return std::min(total, (p - 1) * 2 + (v - 1) * g + 1);
  }
  return std::min(p, m);  // 1f1b, zb-h1
}

Estimate estimate(const ModelShape& shape, const Cluster& cluster, const Config& c) {
  const sim::CostModel costs = stage_costs(shape, cluster, c);
  return estimate(costs, c, dp_exposed_seconds(shape, cluster, c, costs), working_bytes(shape, c));
}

Estimate estimate(const sim::CostModel& costs, const Config& c, double dp_exposed_s,
                  double working_bytes) {
  double f = 0, i = 0, w = 0;
  for (int r = 0; r < c.p; ++r) {
    double fr = 0, ir = 0, wr = 0;
    for (int s : stages_of_rank(c, r)) {
      fr += costs.stages[s].forward;
      ir += costs.stages[s].input_backward;
      wr += costs.stages[s].weight_backward;
    }
    if (fr + ir + wr > f + i + w) f = fr, i = ir, w = wr;
  }
  const double m = c.microbatches, p = c.p, all = f + i + w;
  double step = 0;
  if (c.schedule == "interleaved")
    step = (m + (p - 1) / c.virtual_stages) * all;
  else if (c.schedule == "zb-h1")
    step = m * all + (p - 1) * std::max(0.0, f + i - w);
  else if (c.schedule == "zb-v")
    step = m * all + (p - 1) * std::max(0.0, f + i - 2 * w);
  else
    step = (m + p - 1) * all;
  if (c.p > 1) step += 2 * (p - 1) * c.virtual_stages * costs.comm_time(0);
  step += dp_exposed_s;

  Estimate e;
  e.step_s = step;
  double params = 0;
  for (int s : stages_of_rank(c, 0)) params += costs.stages[s].parameter_bytes;
  e.memory_bytes =
      params + analytic_peak_chunks(c) * costs.stages[0].activation_bytes + working_bytes;
  return e;
}

}  // namespace baton::plan
