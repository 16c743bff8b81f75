#include "baton/plan/profile.h"

#include <algorithm>
#include <cmath>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/printable.h"
#include "baton/partition/balance.h"

namespace baton::plan {
namespace {

struct LayerTimes {
  double forward = 0, input_backward = 0, weight_backward = 0;
};

// A layer's times at micro-batch b: affine in b up to the profiled
// micro-batch b0 (and past it when nothing larger was timed), else along the
// line through the timings at b0 and above it, the last segment extended.
LayerTimes layer_times(const ProfiledLayer& l, double b0, double b) {
  LayerTimes out;
  if (b <= b0 || l.larger.empty()) {
    const double scale = b / b0;
    const double half_fixed = l.backward_fixed_s / 2;
    out.forward = l.forward_fixed_s + scale * (l.forward_s - l.forward_fixed_s);
    out.input_backward = half_fixed + scale * std::max(0.0, l.input_backward_s - half_fixed);
    out.weight_backward = half_fixed + scale * std::max(0.0, l.weight_backward_s - half_fixed);
    return out;
  }
  const double backward_at_b0 = l.input_backward_s + l.weight_backward_s;
  ProfiledPoint from{b0, l.forward_s, backward_at_b0};
  ProfiledPoint to = l.larger.front();
  for (size_t k = 1; k < l.larger.size() && b > to.microbatch; ++k) {
    from = to;
    to = l.larger[k];
  }
  const double t = (b - from.microbatch) / (to.microbatch - from.microbatch);
  // Noisy timings may fall along a segment; a time never drops below 0.
  out.forward = std::max(0.0, from.forward_s + t * (to.forward_s - from.forward_s));
  const double backward = std::max(0.0, from.backward_s + t * (to.backward_s - from.backward_s));
  const double input_share = backward_at_b0 > 0 ? l.input_backward_s / backward_at_b0 : 0.5;
  out.input_backward = backward * input_share;
  out.weight_backward = backward - out.input_backward;
  return out;
}

}  // namespace

Profile parse_profile(const std::string& text, const std::string& path) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    BATON_CHECK(false, "[plan] --profile ", path, " is not JSON (", e.what(),
                "); write one with baton train --profile-out");
  }
  BATON_CHECK(json.is_object() && json.contains("baton_profile"), "[plan] --profile ", path,
              " is not a baton profile (no \"baton_profile\": ", kProfileVersion,
              "); write one with baton train --profile-out");
  // Version 1's activation_bytes were each layer's input, not what it keeps:
  // refused rather than planned with a figure an order of magnitude low.
  BATON_CHECK(json["baton_profile"] == kProfileVersion, "[plan] --profile ", path,
              " is a baton profile of version ", printable(json["baton_profile"].dump(), 40),
              ", whose activation_bytes are not what each layer keeps; write it again with "
              "baton train --profile-out (version ",
              kProfileVersion, ")");
  Profile profile;
  BATON_CHECK(json.contains("model") && json["model"].is_object() &&
                  json["model"].contains("model") && json["model"]["model"].is_string(),
              "[plan] --profile ", path, " has no \"model\" object naming the model");
  profile.model = json["model"];
  const double b = profile_number(json, "microbatch", "the file", path);
  BATON_CHECK(b >= 1 && b == std::floor(b) && b < (1 << 30), "[plan] --profile ", path,
              ": \"microbatch\" is ", b, "; it must be a whole number of at least 1");
  profile.microbatch = static_cast<int>(b);
  if (json.contains("precision")) {
    const nlohmann::json& precision = json["precision"];
    BATON_CHECK(precision.is_string() && choice_named<Precision>(precision.get<std::string>()),
                "[plan] --profile ", path, ": \"precision\" is ", printable(precision.dump(), 64),
                "; expected \"fp32\", \"bf16\" or \"fp16\"");
    profile.precision = precision.get<std::string>();
  }
  if (json.contains("optimizer_s_per_parameter_byte")) {
    profile.optimizer_s_per_parameter_byte =
        profile_number(json, "optimizer_s_per_parameter_byte", "the file", path);
  }
  if (json.contains("action_overhead_s"))
    profile.action_overhead_s = profile_number(json, "action_overhead_s", "the file", path);
  if (json.contains("step_overhead_s"))
    profile.step_overhead_s = profile_number(json, "step_overhead_s", "the file", path);
  BATON_CHECK(json.contains("layers") && json["layers"].is_array() && !json["layers"].empty(),
              "[plan] --profile ", path, " has no \"layers\" array of at least one layer");
  for (size_t i = 0; i < json["layers"].size(); ++i) {
    const nlohmann::json& l = json["layers"][i];
    const std::string where = "layer " + std::to_string(i);
    BATON_CHECK(l.is_object(), "[plan] --profile ", path, ": ", where, " is not an object");
    ProfiledLayer layer;
    layer.forward_s = profile_number(l, "forward_s", where, path);
    layer.input_backward_s = profile_number(l, "input_backward_s", where, path);
    layer.weight_backward_s = profile_number(l, "weight_backward_s", where, path);
    layer.activation_bytes = profile_number(l, "activation_bytes", where, path);
    layer.parameter_bytes = profile_number(l, "parameter_bytes", where, path);
    layer.output_bytes = profile_number(l, "output_bytes", where, path);
    if (l.contains("forward_fixed_s"))
      layer.forward_fixed_s = profile_number(l, "forward_fixed_s", where, path);
    if (l.contains("backward_fixed_s"))
      layer.backward_fixed_s = profile_number(l, "backward_fixed_s", where, path);
    if (l.contains("larger")) {
      BATON_CHECK(l["larger"].is_array(), "[plan] --profile ", path, ": ", where,
                  "'s \"larger\" is not an array");
      double below = profile.microbatch;
      for (size_t k = 0; k < l["larger"].size(); ++k) {
        const nlohmann::json& point = l["larger"][k];
        const std::string at = where + "'s larger[" + std::to_string(k) + "]";
        BATON_CHECK(point.is_object(), "[plan] --profile ", path, ": ", at, " is not an object");
        ProfiledPoint timed;
        timed.microbatch = profile_number(point, "microbatch", at, path);
        timed.forward_s = profile_number(point, "forward_s", at, path);
        timed.backward_s = profile_number(point, "backward_s", at, path);
        BATON_CHECK(timed.microbatch > below, "[plan] --profile ", path, ": ", at,
                    " has \"microbatch\" ", timed.microbatch,
                    "; it must exceed the one before it (", below,
                    "; the first one the profiled micro-batch)");
        below = timed.microbatch;
        layer.larger.push_back(timed);
      }
    }
    BATON_CHECK(layer.forward_fixed_s <= layer.forward_s &&
                    layer.backward_fixed_s <= layer.input_backward_s + layer.weight_backward_s,
                "[plan] --profile ", path, ": ", where,
                "'s fixed times exceed its times at the profiled micro-batch (forward_fixed_s ",
                layer.forward_fixed_s, " > forward_s ", layer.forward_s, ", or backward_fixed_s ",
                layer.backward_fixed_s, " > input_backward_s + weight_backward_s)");
    profile.layers.push_back(layer);
  }
  if (json.contains("memory")) {
    ProfiledMemory memory = parse_profiled_memory(json["memory"], path);
    BATON_CHECK(memory.model.layers.size() == profile.layers.size(), "[plan] --profile ", path,
                ": \"memory\" has ", memory.model.layers.size(), " layers but \"layers\" has ",
                profile.layers.size());
    for (const ProfiledLayer& l : profile.layers)
      memory.parameter_bytes.push_back(l.parameter_bytes);
    profile.memory = std::move(memory);
  }
  return profile;
}

Profile read_profile(const std::string& path) {
  return parse_profile(read_input_file("[plan] --profile", path, kMaxProfileBytes,
                                       "; name a file written by baton train --profile-out"),
                       path);
}

double profiled_state_per_parameter_byte(int d, int zero) {
  if (zero <= 0 || d <= 1) return 4.0;
  if (zero == 3) return 2.0 + 3.0 / d;
  return 2.0 + 2.0 / d;
}

sim::CostModel profiled_stage_costs(const Profile& profile, const Cluster& cluster,
                                    const Config& c) {
  const int stages = c.p * c.virtual_stages;
  const int layers = static_cast<int>(profile.layers.size());
  BATON_ASSERT(c.t == 1 && stages >= 1 && stages <= layers, "profiled costs of t=", c.t, " and ",
               stages, " stages for ", layers, " layers");
  const partition::Partition cut = partition::uniform(layers, stages);
  const double scale = static_cast<double>(c.microbatch) / profile.microbatch;
  const bool in_node = pipeline_in_node(cluster, c);
  const double gbps = in_node ? cluster.intra_node_gbps : cluster.inter_node_gbps;
  const double latency_us = in_node ? cluster.intra_node_latency_us : cluster.inter_node_latency_us;

  const double state = profiled_state_per_parameter_byte(c.d, c.zero);
  sim::CostModel model;
  model.comm_latency = latency_us * 1e-6;
  model.comm_bytes_per_time = gbps * 1e9 / 8;
  for (int s = 0; s < stages; ++s) {
    sim::StageCost cost;
    cost.forward = cost.input_backward = cost.weight_backward = 0;
    cost.activation_bytes = 0;
    for (int i = cut.first_layer(s); i < cut.end_layer(s); ++i) {
      const ProfiledLayer& l = profile.layers[i];
      const LayerTimes times = layer_times(l, profile.microbatch, c.microbatch);
      cost.forward += times.forward;
      cost.input_backward += times.input_backward;
      cost.weight_backward += times.weight_backward;
      cost.activation_bytes += scale * l.activation_bytes;
      cost.parameter_bytes += state * l.parameter_bytes;
    }
    // The stage's own F and B pay the per-action overhead once each (a
    // split backward's W is charged none: zero-bubble's W carries no loss,
    // split or hand-off).
    cost.forward += profile.action_overhead_s;
    cost.input_backward += profile.action_overhead_s;
    cost.weight_stash_bytes = 0;
    cost.boundary_bytes = scale * profile.layers[cut.end_layer(s) - 1].output_bytes;
    model.stages.push_back(cost);
  }
  return model;
}

double profiled_optimizer_seconds(const Profile& profile, const Config& c) {
  const partition::Partition cut =
      partition::uniform(static_cast<int>(profile.layers.size()), c.p * c.virtual_stages);
  double longest = 0;
  for (int r = 0; r < c.p; ++r) {
    double bytes = 0;
    for (int s : stages_of_rank(c, r)) {
      for (int i = cut.first_layer(s); i < cut.end_layer(s); ++i)
        bytes += profile.layers[i].parameter_bytes;
    }
    longest = std::max(longest, bytes * profile.optimizer_s_per_parameter_byte);
  }
  // ZeRO: each replica steps 1/d of the parameters.
  return c.zero > 0 ? longest / c.d : longest;
}

double profiled_gradient_bytes(const Profile& profile, const Config& c) {
  const partition::Partition cut =
      partition::uniform(static_cast<int>(profile.layers.size()), c.p * c.virtual_stages);
  double bytes = 0;
  for (int s : stages_of_rank(c, 0)) {
    for (int i = cut.first_layer(s); i < cut.end_layer(s); ++i)
      bytes += profile.layers[i].parameter_bytes;
  }
  return bytes;
}

}  // namespace baton::plan
