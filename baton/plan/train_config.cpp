#include "baton/plan/train_config.h"

#include <sstream>

#include "baton/core/error.h"

namespace baton::plan {

std::string train_config_toml(const PlanRequest& req, const Plan& plan, const std::string& header) {
  BATON_ASSERT(!req.profile, "train_config_toml of a profile's plan");
  const Config& c = plan.config;
  std::vector<int> balance = stage_layers_of(req.shape.layers, c);
  balance.front() += 1;  // the embedding layer
  balance.back() += 1;   // the final LayerNorm and LM head
  std::string counts;
  for (size_t i = 0; i < balance.size(); ++i) counts += (i ? "," : "") + std::to_string(balance[i]);

  std::ostringstream out;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
  out << "model = \"gpt\"\n"
      << "layers = " << req.shape.layers << "\n"
      << "hidden = " << req.shape.hidden << "\n"
      << "heads = " << req.shape.heads << "\n"
      << "context = " << req.shape.seq << "\n"
      << "tie_embeddings = " << (req.shape.tie_embeddings ? "true" : "false") << "\n"
      << "tp = " << c.t << "\n"
      << "pp = " << c.p << "\n"
      << "dp = " << c.d << "\n"
      << "zero = " << (c.zero1 ? 1 : 0) << "\n"
      << "schedule = \"" << c.schedule << "\"\n"
      << "virtual = " << c.virtual_stages << "\n"
      << "microbatches = " << c.microbatches << "\n"
      << "batch = " << req.batch << "\n"
      << "balance = \"" << counts << "\"\n"
      << "recompute = \"" << (c.recompute ? "always" : "never")
      << "\"\n"
      // The planner's memory is mixed precision with Adam.
      << "precision = \"bf16\"\n"
      << "optimizer = \"adam\"\n";
  return out.str();
}

}  // namespace baton::plan
