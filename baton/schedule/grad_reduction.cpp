#include "baton/schedule/grad_reduction.h"

#include <algorithm>
#include <cmath>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

std::vector<std::vector<int>> gradient_bucket_members(const std::vector<double>& parameter_bytes,
                                                      double bucket_bytes) {
  BATON_CHECK(std::isfinite(bucket_bytes) && bucket_bytes > 0,
              "[schedule.buckets] bucket size must be finite and > 0, got ", bucket_bytes);
  std::vector<std::vector<int>> buckets;
  double open = 0;
  for (int i = static_cast<int>(parameter_bytes.size()) - 1; i >= 0; --i) {
    const double bytes = parameter_bytes[static_cast<size_t>(i)];
    BATON_CHECK(std::isfinite(bytes) && bytes >= 0, "[schedule.buckets] parameter ", i, " has ",
                bytes, " bytes; sizes must be finite and >= 0");
    if (buckets.empty() || open + bytes > bucket_bytes) {
      buckets.emplace_back();
      open = 0;
    }
    buckets.back().push_back(i);
    open += bytes;
  }
  return buckets;
}

std::vector<double> gradient_buckets(const std::vector<double>& parameter_bytes,
                                     double bucket_bytes) {
  std::vector<double> sizes;
  for (const auto& members : gradient_bucket_members(parameter_bytes, bucket_bytes)) {
    double bytes = 0;
    for (int i : members) bytes += parameter_bytes[static_cast<size_t>(i)];
    sizes.push_back(bytes);
  }
  return sizes;
}

std::vector<double> even_gradient_buckets(double total_bytes, double bucket_bytes) {
  BATON_CHECK(std::isfinite(bucket_bytes) && bucket_bytes > 0,
              "[schedule.buckets] bucket size must be finite and > 0, got ", bucket_bytes);
  BATON_CHECK(std::isfinite(total_bytes) && total_bytes >= 0,
              "[schedule.buckets] parameter bytes must be finite and >= 0, got ", total_bytes);
  const double full = std::floor(total_bytes / bucket_bytes);
  BATON_CHECK(full < kMaxMicrobatches, "[schedule.buckets] ", total_bytes, " parameter bytes in ",
              bucket_bytes, "-byte buckets make more than ", kMaxMicrobatches - 1,
              " buckets; use larger buckets");
  std::vector<double> buckets(static_cast<size_t>(full), bucket_bytes);
  const double rest = total_bytes - full * bucket_bytes;
  if (rest > 0 || buckets.empty()) buckets.push_back(rest);
  return buckets;
}

Schedule add_grad_reductions(const Schedule& schedule, int dp,
                             const std::vector<int>& buckets_per_stage) {
  BATON_CHECK(dp >= 1, "[schedule.reduce_grad] dp must be >= 1, got ", dp);
  BATON_CHECK(!schedule.has_grad_reductions(), "[schedule.reduce_grad] schedule \"",
              printable(schedule.name), "\" already has REDUCE_GRAD actions");
  BATON_CHECK(static_cast<int>(buckets_per_stage.size()) == schedule.stages,
              "[schedule.reduce_grad] ", buckets_per_stage.size(), " bucket counts for ",
              schedule.stages, " stages; give one per stage");
  for (size_t s = 0; s < buckets_per_stage.size(); ++s) {
    BATON_CHECK(buckets_per_stage[s] >= 1 && buckets_per_stage[s] < kMaxMicrobatches,
                "[schedule.reduce_grad] stage ", s, " has ", buckets_per_stage[s],
                " buckets; it needs 1 to ", kMaxMicrobatches - 1);
  }
  validate(schedule);
  if (dp == 1) return schedule;
  BATON_CHECK(!schedule.carries, "[schedule.reduce_grad] schedule \"", printable(schedule.name),
              "\" has no flush between steps, so no point in a step where a stage's gradients "
              "are whole; data parallelism (dp > 1) needs a schedule with a flush");
  Schedule out = schedule;
  size_t added = 0;
  for (int r = 0; r < schedule.ranks; ++r) {
    const std::vector<Action>& list = schedule.actions[r];
    // Where each stage's last weight-producing backward is on this rank.
    std::vector<long> last(schedule.stages, -1);
    for (size_t i = 0; i < list.size(); ++i)
      if (is_weight_backward(list[i].kind)) last[list[i].stage] = static_cast<long>(i);
    for (int s = 0; s < schedule.stages; ++s)
      if (last[s] >= 0) added += buckets_per_stage[s];
    BATON_CHECK(schedule.action_count() + added <= kMaxActions,
                "[schedule.reduce_grad] schedule \"", printable(schedule.name),
                "\" would have more than ", kMaxActions, " actions with its gradient reductions");
    std::vector<Action>& into = out.actions[r];
    into.clear();
    std::vector<int> pending;  // stages whose reductions follow the current backward
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      into.push_back(a);
      if (is_weight_backward(a.kind) && last[a.stage] == static_cast<long>(i))
        pending.push_back(a.stage);
      // The SEND_B of the backward goes first: the previous stage waits for it.
      const bool send_follows = i + 1 < list.size() && list[i + 1].kind == ActionKind::SEND_B &&
                                list[i + 1].stage == a.stage &&
                                list[i + 1].microbatch == a.microbatch;
      if (send_follows) continue;
      for (int stage : pending)
        for (int k = 0; k < buckets_per_stage[stage]; ++k)
          into.push_back({ActionKind::REDUCE_GRAD, stage, k});
      pending.clear();
    }
  }
  validate(out);
  return out;
}

Schedule defer_grad_reductions(const Schedule& schedule) {
  Schedule out = schedule;
  for (auto& list : out.actions) {
    std::stable_partition(list.begin(), list.end(),
                          [](const Action& a) { return !is_reduction(a.kind); });
  }
  validate(out);
  return out;
}

}  // namespace baton::schedule
