#include "baton/train/plan_config.h"

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/train/options.h"

namespace baton::train {

TrainConfig plan_config(const plan::PlanRequest& req, const plan::Plan& plan) {
  BATON_ASSERT(!req.profile, "plan_config of a profile's plan");
  const plan::Config& p = plan.config;
  std::vector<int> balance = plan::stage_layers_of(req.shape.layers, p);
  balance.front() += 1;  // the embedding layer
  balance.back() += 1;   // the final LayerNorm and LM head
  TrainConfig c;
  c.model = "gpt";
  c.layers = req.shape.layers;
  c.hidden = req.shape.hidden;
  c.heads = req.shape.heads;
  c.context = req.shape.seq;
  c.tie_embeddings = req.shape.tie_embeddings;
  c.tp = p.t;
  c.pp = p.p;
  c.dp = p.d;
  c.zero = p.zero;
  c.schedule = p.schedule;
  c.virtual_stages = p.virtual_stages;
  c.microbatches = p.microbatches;
  c.batch = req.batch;
  c.balance.clear();
  for (size_t i = 0; i < balance.size(); ++i)
    c.balance += (i ? "," : "") + std::to_string(balance[i]);
  c.recompute = p.recompute   ? Recompute::Always
                : p.selective ? Recompute::Selective
                              : Recompute::Never;
  c.precision = Precision::Bf16;
  c.optimizer = Optimizer::Adam;
  return c;
}

std::string plan_config_toml(const plan::PlanRequest& req, const plan::Plan& plan,
                             const std::string& header) {
  return config_toml(plan_config(req, plan),
                     {"model", "layers", "hidden", "heads", "context", "tie_embeddings", "tp", "pp",
                      "dp", "zero", "schedule", "virtual", "microbatches", "batch", "balance",
                      "recompute", "precision", "optimizer"},
                     header);
}

}  // namespace baton::train
