#include "baton/sim/cost_model.h"

#include <cmath>

#include "baton/core/error.h"

namespace baton::sim {

double CostModel::comm_time(int stage) const {
  const double bytes = stages[stage].boundary_bytes;
  const bool scatter = scatter_gather && tp > 1 && bytes > 0;
  double t = comm_latency;
  if (comm_bytes_per_time > 0) t += (scatter ? bytes / tp : bytes) / comm_bytes_per_time;
  if (scatter) t += ring_allreduce_time(tp, bytes, tp_link);
  return t;
}

double CostModel::skip_time(int skip, int from) const {
  if (skip < 0 || static_cast<size_t>(skip) >= skip_bytes.size() || skip_bytes[skip] < 0) {
    return comm_time(from);
  }
  return comm_latency + (comm_bytes_per_time > 0 ? skip_bytes[skip] / comm_bytes_per_time : 0);
}

double ring_allreduce_time(int group_size, double bytes, const Link& link) {
  if (group_size <= 1) return 0;
  const double steps = 2.0 * (group_size - 1);
  double t = steps * link.latency;
  if (link.bytes_per_time > 0) t += steps / group_size * bytes / link.bytes_per_time;
  return t;
}

double ring_allgather_time(int group_size, double bytes, const Link& link) {
  if (group_size <= 1) return 0;
  const double steps = group_size - 1.0;
  double t = steps * link.latency;
  if (link.bytes_per_time > 0) t += steps / group_size * bytes / link.bytes_per_time;
  return t;
}

double tp_comm_time(int tp, double layers, double activation_bytes, const Link& link) {
  return 2 * layers * ring_allreduce_time(tp, activation_bytes, link);
}

CostModel uniform_cost_model(const schedule::Schedule& schedule, double tf, double tb, double tw,
                             double comm) {
  auto time = [](double t) { return std::isfinite(t) && t >= 0; };
  BATON_CHECK(time(tf) && time(tb) && time(tw),
              "[sim.costs] times must be finite and "
              "non-negative (tf=",
              tf, ", tb=", tb, ", tw=", tw, ")");
  BATON_CHECK(tw <= tb, "[sim.costs] the weight-gradient time tw=", tw,
              " is part of the backward time tb=", tb, ", so it cannot exceed it");
  BATON_CHECK(time(comm), "[sim.costs] communication time must be finite and non-negative, got ",
              comm);
  const double v = schedule.map == schedule::StageMap::Bidirectional
                       ? 1.0
                       : static_cast<double>(schedule.stages_per_rank());
  CostModel model;
  model.comm_latency = comm;
  StageCost stage;
  stage.forward = tf / v;
  stage.input_backward = (tb - tw) / v;
  stage.weight_backward = tw / v;
  stage.activation_bytes = 1.0 / v;
  stage.parameter_bytes = 1.0 / v;
  model.stages.assign(schedule.stages, stage);
  return model;
}

}  // namespace baton::sim
