// baton plan: search (t, p, d), micro-batch size, schedule, recomputation and
// ZeRO-1 for a GPT model on a cluster, simulate the promising ones and print
// them best first (a table, --json, --svg). Torch-free.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/plan/plot.h"
#include "baton/plan/schedules.h"
#include "baton/plan/search.h"
#include "baton/train/plan_config.h"
#include "tools/cli.h"
#include "tools/output_paths.h"

namespace baton::cli {
namespace {

struct PlanFlags {
  std::string model = "gpt";
  plan::PlanRequest request;
  int top = 10;
  bool json = false;
  std::string svg;
  std::string profile;
  std::string schedules;
  std::string recompute = "auto";
  std::string zero = "auto";
  std::string emit_config;
  std::string overlap_grad_reduce = "on";
  std::string precision;  // with --profile: the run's, which must be the profile's
};

// --recompute's modes: one, or every one for auto.
std::vector<Recompute> recompute_modes_of(const std::string& value) {
  if (value == "auto") return {Recompute::Never, Recompute::Selective, Recompute::Always};
  return {parse_recompute(value)};
}

// --zero's stages: one, or every one for auto.
std::vector<int> zero_stages_of(const std::string& value) {
  if (value == "auto") return {0, 1, 2, 3};
  return {std::stoi(value)};
}

// The model's name and size for headers: the flags', or the profile's.
std::string model_title(const PlanFlags& f) {
  const auto& q = f.request;
  if (q.profile) {
    std::string title = "profile " + f.profile + ":";
    for (const auto& [key, value] : q.profile->model.items())
      title += " " + key + "=" + (value.is_string() ? value.get<std::string>() : value.dump());
    return title + " (micro-batch " + std::to_string(q.profile->microbatch) + ")";
  }
  return "gpt l=" + std::to_string(q.shape.layers) + " h=" + std::to_string(q.shape.hidden) +
         " a=" + std::to_string(q.shape.heads) + " s=" + std::to_string(q.shape.seq) +
         " V=" + std::to_string(q.shape.vocab);
}

// With --profile the model comes from the file: a model flag may repeat the
// file's value but not contradict it, and the efficiency flags have nothing
// to scale. Without it, the model flags are required.
void resolve_model(const CLI::App& cmd, PlanFlags& f) {
  const char* model_flags[] = {"--layers", "--hidden", "--heads", "--seq", "--vocab"};
  if (f.profile.empty()) {
    BATON_CHECK(f.precision.empty(), "[plan] --precision ", f.precision,
                " says what a --profile was measured in; without one the planner models a "
                "mixed-precision (bf16) run");
    BATON_CHECK(f.model == "gpt", "[plan] --model ", printable(f.model),
                " is not known; the planner models gpt (or give --profile)");
    for (const char* flag : model_flags)
      BATON_CHECK(cmd.count(flag) >= 1, "[plan] ", flag, " is required (or give --profile FILE)");
    BATON_CHECK(cmd.count("--peak-tflops") >= 1,
                "[plan] --peak-tflops is required (or give --profile FILE)");
    return;
  }
  f.request.profile = plan::read_profile(f.profile);
  const nlohmann::json& model = f.request.profile->model;
  auto conflict = [&](const std::string& flag, const std::string& given) {
    const std::string key = flag.substr(2);
    const nlohmann::json* value = model.contains(key) ? &model[key] : nullptr;
    const std::string file = !value               ? ""
                             : value->is_string() ? value->get<std::string>()
                                                  : value->dump();
    BATON_CHECK(value && file == given, "[plan] ", flag, " ", given, " conflicts with --profile ",
                f.profile, (value ? ", which has " + key + " " + file : ", which has no " + key),
                "; the model is the profile's, drop ", flag);
  };
  if (cmd.count("--model")) conflict("--model", f.model);
  const int* values[] = {&f.request.shape.layers, &f.request.shape.hidden, &f.request.shape.heads,
                         &f.request.shape.seq, &f.request.shape.vocab};
  for (int i = 0; i < 5; ++i)
    if (cmd.count(model_flags[i])) conflict(model_flags[i], std::to_string(*values[i]));
  // A profile times the layers in one precision: costing a run in another
  // from it would be off by the ratio of their kernels.
  const std::string& measured = f.request.profile->precision;
  const std::string run = f.precision.empty() ? "fp32" : f.precision;
  BATON_CHECK(run == measured, "[plan] --profile ", f.profile, " was measured in ", measured,
              " but the run is ", run, f.precision.empty() ? " (--precision's default)" : "",
              "; profile it again with baton train --profile-out ... --precision ", run,
              ", or pass --precision ", measured);
  for (const char* flag : {"--peak-tflops", "--efficiency", "--efficiency-half-size",
                           "--tie-embeddings", "--memory-gb-per-s"})
    BATON_CHECK(cmd.count(flag) == 0, "[plan] ", flag, " has no use with --profile ", f.profile,
                ": the layer times are measured; drop ", flag);
}

nlohmann::json to_json(const plan::Plan& p, int layers) {
  const plan::Config& c = p.config;
  return {{"t", c.t},
          {"p", c.p},
          {"d", c.d},
          {"microbatch", c.microbatch},
          {"microbatches", c.microbatches},
          {"schedule", c.schedule},
          {"virtual", c.virtual_stages},
          {"recompute", c.recompute},
          {"selective", c.selective},
          {"zero", c.zero},
          {"stage_layers",
           layers > 0 ? nlohmann::json(plan::stage_layers_of(layers, c)) : nlohmann::json(nullptr)},
          {"memory_gb", p.memory_bytes / 1e9},
          {"bubble_fraction", p.bubble_fraction},
          {"step_s", p.step_s},
          {"model_tflops_per_gpu", p.model_tflops_per_gpu},
          {"mfu", p.mfu},
          {"hardware_tflops_per_gpu", p.hardware_tflops_per_gpu},
          {"hfu", p.hfu},
          // An alias of the model figure (before issue 21 it counted the
          // recomputed forward too, as hardware_tflops_per_gpu does).
          {"tflops_per_gpu", p.model_tflops_per_gpu},
          {"sequences_per_s", p.sequences_per_s}};
}

std::string fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

// The plan table: each column as wide as its widest cell (at least its usual
// width), so that no two numbers run together whatever their size.
struct Column {
  const char* header;
  size_t min_width;  // a right-aligned column's with the spaces before its cells
  bool left;         // left-aligned, after two spaces (not in min_width)
};
constexpr Column kColumns[] = {
    {"t", 4, false},         {"p", 5, false},        {"d", 6, false},      {"b", 6, false},
    {"m", 7, false},         {"schedule", 13, true}, {"v", 3, false},      {"recomp", 8, false},
    {"zero", 6, false},      {"mem_GB", 8, false},   {"bubble", 8, false}, {"step_s", 10, false},
    {"model_TF", 10, false}, {"MFU", 7, false},      {"hw_TF", 8, false},  {"HFU", 7, false},
    {"seq/s", 8, false}};
constexpr size_t kColumnCount = sizeof kColumns / sizeof kColumns[0];

std::array<std::string, kColumnCount> table_row(const plan::Plan& p) {
  const plan::Config& c = p.config;
  return {std::to_string(c.t),
          std::to_string(c.p),
          std::to_string(c.d),
          std::to_string(c.microbatch),
          std::to_string(c.microbatches),
          c.schedule,
          std::to_string(c.virtual_stages),
          c.recompute   ? "yes"
          : c.selective ? "sel"
                        : "no",
          std::to_string(c.zero),
          fixed(p.memory_bytes / 1e9, 1),
          fixed(p.bubble_fraction, 3),
          fixed(p.step_s, 3),
          fixed(p.model_tflops_per_gpu, 1),
          fixed(p.mfu, 3),
          fixed(p.hardware_tflops_per_gpu, 1),
          fixed(p.hfu, 3),
          fixed(p.sequences_per_s, 1)};
}

void print_row(const std::array<std::string, kColumnCount>& cells,
               const std::array<size_t, kColumnCount>& widths) {
  std::string line;
  for (size_t i = 0; i < kColumnCount; ++i) {
    const size_t pad = widths[i] - cells[i].size();
    line += kColumns[i].left ? "  " + cells[i] + std::string(pad, ' ')
                             : std::string(pad, ' ') + cells[i];
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  std::cout << line << "\n";
}

// "312", "19.5": as the user would write it (std::to_string gives "312.000000").
std::string format_tflops(double tflops) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", tflops);
  return text;
}

void print_table(const plan::PlanResult& r, const PlanFlags& f) {
  const auto& req = f.request;
  std::cout << model_title(f) << " on " << req.cluster.gpus << " GPUs ("
            << req.cluster.gpus_per_node << " per node, " << req.cluster.memory_gb << " GB"
            << (req.profile ? "" : ", " + format_tflops(req.cluster.peak_tflops) + " TFLOPs")
            << "), batch " << req.batch << "\n";
  std::vector<std::array<std::string, kColumnCount>> rows;
  for (size_t i = 0; i < r.plans.size() && static_cast<int>(i) < f.top; ++i)
    rows.push_back(table_row(r.plans[i]));
  std::array<std::string, kColumnCount> header;
  std::array<size_t, kColumnCount> widths;
  for (size_t i = 0; i < kColumnCount; ++i) {
    header[i] = kColumns[i].header;
    // Two spaces before a right-aligned cell; a left-aligned one has them already.
    const size_t gap = kColumns[i].left ? 0 : 2;
    widths[i] = std::max(kColumns[i].min_width, header[i].size() + gap);
    for (const auto& row : rows) widths[i] = std::max(widths[i], row[i].size() + gap);
  }
  print_row(header, widths);
  for (const auto& row : rows) print_row(row, widths);
  std::cout << r.plans.size() << " feasible plans (" << r.simulated << " simulations) of "
            << r.candidates << " candidates; rejected:";
  for (const auto& [reason, n] : r.rejected) std::cout << " " << reason << "=" << n;
  std::cout << "\n";
}

int run(const CLI::App& cmd, PlanFlags& f) {
  check_given_once(cmd);
  resolve_model(cmd, f);
  if (cmd.count("--schedules")) f.request.schedules = plan::parse_schedule_list(f.schedules);
  f.request.recompute = recompute_modes_of(f.recompute);
  f.request.zero = zero_stages_of(f.zero);
  f.request.top = f.top;
  f.request.cluster.overlap_grad_reduce = f.overlap_grad_reduce == "on";
  BATON_CHECK(!f.request.profile || f.request.recompute.size() > 1 ||
                  f.request.recompute.front() == Recompute::Never,
              "[plan] --recompute ", f.recompute, " has no use with --profile ", f.profile,
              ": the profile has no recomputation costs");
  BATON_CHECK(f.emit_config.empty() || !f.request.profile,
              "[plan] --emit-config needs the gpt "
              "model's flags, not --profile ",
              f.profile, " (its model is not a gpt's shape)");
  check_stdout_open("[plan]");
  std::vector<NamedPath> outputs;
  if (!f.svg.empty() || cmd.count("--svg")) outputs.push_back({"--svg", f.svg});
  if (!f.emit_config.empty() || cmd.count("--emit-config"))
    outputs.push_back({"--emit-config", f.emit_config});
  check_output_paths("[plan]", outputs, {{"--profile", f.profile}});
  const plan::PlanResult result = plan::plan(f.request);
  for (const NamedPath& out : outputs) {
    if (out.flag == "--emit-config") {
      const plan::Plan& best = result.plans.front();
      write_output(
          "[plan]", out,
          train::plan_config_toml(
              f.request, best,
              "baton plan: " + model_title(f) + " on " + std::to_string(f.request.cluster.gpus) +
                  " GPUs, batch " + std::to_string(f.request.batch) +
                  "\nthe best plan: " + plan::describe(best.config) + ", step " +
                  fixed(best.step_s, 4) + " s, " + fixed(best.memory_bytes / 1e9, 2) +
                  " GB per GPU\n" + "run: baton train --config FILE --nproc " +
                  std::to_string(f.request.cluster.gpus) +
                  " --steps N (docs/planner.md#from-plan-to-run)"));
      continue;
    }
    write_output("[plan]", out,
                 plan::plot_svg(result, f.request.cluster.memory_gb,
                                "baton plan: " + model_title(f) + " on " +
                                    std::to_string(f.request.cluster.gpus) + " GPUs"));
  }
  if (f.json) {
    nlohmann::json plans = nlohmann::json::array();
    const int layers = f.request.profile ? 0 : f.request.shape.layers;
    for (const plan::Plan& p : result.plans) plans.push_back(to_json(p, layers));
    nlohmann::json out = {{"plans", plans},
                          {"rejected", result.rejected},
                          {"candidates", result.candidates},
                          {"simulated", result.simulated}};
    std::cout << out.dump() << "\n";
  } else {
    print_table(result, f);
    for (const NamedPath& out : outputs) std::cout << "wrote " << out.path << "\n";
  }
  flush_stdout("[plan]");
  return 0;
}

const CLI::Validator kPositive = finite_number(true, "NUMBER");

}  // namespace

Action add_plan(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  plan::PlanRequest& q = f->request;
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Search (t, p, d), micro-batch size, schedule and recomputation for a model on a "
      "cluster, by the cost model and the simulator");
  take_repeated_options(cmd);  // reported by run(), by name
  const auto count = CLI::Range(1, 1 << 30);
  cmd->add_option("--model", f->model, "Model family (gpt)")->capture_default_str();
  cmd->add_option("--layers", q.shape.layers, "Transformer layers l")->check(count);
  cmd->add_option("--hidden", q.shape.hidden, "Hidden size h")->check(count);
  cmd->add_option("--heads", q.shape.heads, "Attention heads a")->check(count);
  cmd->add_option("--seq", q.shape.seq, "Sequence length s")->check(count);
  cmd->add_option("--vocab", q.shape.vocab, "Vocabulary size V")->check(count);
  cmd->add_option("--gpus", q.cluster.gpus, "GPUs N")->required()->check(count);
  cmd->add_option("--gpus-per-node", q.cluster.gpus_per_node, "GPUs per node G")
      ->required()
      ->check(count);
  cmd->add_option("--gpu-memory-gb", q.cluster.memory_gb, "Memory per GPU in GB (1e9 bytes)")
      ->required()
      ->check(kPositive);
  cmd->add_option("--peak-tflops", q.cluster.peak_tflops, "Peak dense fp16 TFLOPs per GPU")
      ->check(kPositive);
  cmd->add_option("--precision", f->precision,
                  "With --profile: the precision of the run planned, which must be the one the "
                  "profile was measured in (fp32, bf16 or fp16; default fp32)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--profile", f->profile,
                  "Measured layer costs from baton train --profile-out in place of the gpt "
                  "formulas (the model is the file's; t = 1)");
  cmd->add_option("--intra-node-gbps", q.cluster.intra_node_gbps,
                  "Link inside a node, Gb/s per GPU (NVLink-class default)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--inter-node-gbps", q.cluster.inter_node_gbps,
                  "Link between nodes, Gb/s per GPU (InfiniBand HDR-class default)")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--intra-node-latency-us", q.cluster.intra_node_latency_us,
                  "Latency inside a node, microseconds")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--inter-node-latency-us", q.cluster.inter_node_latency_us,
                  "Latency between nodes, microseconds")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--allreduce-gbps", q.cluster.allreduce_gbps,
                  "The dp all-reduce's measured bus bandwidth, Gb/s, in place of the link's "
                  "(baton train --dp 2 --compare-sim prints it as GB/s)")
      ->check(kPositive);
  cmd->add_option("--allreduce-latency-us", q.cluster.allreduce_latency_us,
                  "With --allreduce-gbps: the whole all-reduce's latency, microseconds "
                  "(2 (d - 1) ring steps; default 0)")
      ->needs("--allreduce-gbps")
      ->check(kPositive);
  cmd->add_option("--efficiency", q.cluster.efficiency, "Fraction of peak that large GEMMs reach")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 1.0));
  cmd->add_option("--efficiency-half-size", q.cluster.efficiency_half_size,
                  "Per-GPU GEMM size b*s*h/t at which half of --efficiency is reached")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--batch", q.batch, "Global batch B in sequences")->required()->check(count);
  cmd->add_option("--microbatch", q.microbatch,
                  "Search only this micro-batch size b (b must divide B / d)")
      ->check(count);
  cmd->add_option("--tp", q.tp, "Search only this tensor-parallel size t")->check(count);
  cmd->add_option("--pp", q.pp, "Search only this pipeline-parallel size p")->check(count);
  cmd->add_option("--dp", q.dp, "Search only this data-parallel size d")->check(count);
  std::string searched;
  for (const std::string& name : plan::searched_schedule_names())
    searched += (searched.empty() ? "" : ",") + name;
  cmd->add_option("--schedules", f->schedules,
                  "Comma-separated schedules to search (default: " + searched + ")");
  cmd->add_option("--recompute", f->recompute,
                  "Activation recomputation: never, selective (attention's core), always, or "
                  "auto (all three searched)")
      ->capture_default_str()
      ->check(CLI::IsMember({"never", "selective", "always", "auto"}));
  cmd->add_option("--zero", f->zero,
                  "ZeRO stage: 0, 1, 2, 3 (1-3 need d > 1), or auto (all four searched)")
      ->capture_default_str()
      ->check(CLI::IsMember({"0", "1", "2", "3", "auto"}));
  cmd->add_option("--max-memory-fraction", q.max_memory_fraction,
                  "Fraction of --gpu-memory-gb a plan may use, in (0, 1]")
      ->capture_default_str()
      ->check(fraction());
  cmd->add_option("--memory-gb-per-s", q.cluster.memory_gb_per_s,
                  "GPU memory bandwidth, GB/s: the layers' element-wise work moves their "
                  "activation bytes at this rate")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--overlap-grad-reduce", f->overlap_grad_reduce,
                  "on: each stage's dp all-reduce overlaps the compute after its last backward "
                  "(baton's placement); off: all of it follows the backward")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--optimizer-bytes-per-parameter", q.cluster.optimizer_bytes_per_parameter,
                  "Optimizer state per parameter beyond the fp16 weights and gradients (Adam: "
                  "12; Megatron-LM's fp16 optimizer: 16); ZeRO-1 shards it")
      ->capture_default_str()
      ->check(finite_number(false, "BYTES"));
  cmd->add_flag("--tie-embeddings", q.shape.tie_embeddings,
                "The LM head is the token embedding (a copy on the last stage, its gradient "
                "exchanged once per step), as baton train --tie-embeddings");
  cmd->add_option("--simulate-limit", q.simulate_limit,
                  "Simulate at most this many configurations (past it the ranking is not exact)")
      ->capture_default_str()
      ->check(CLI::Range(1L, 1L << 30));
  cmd->add_option("--top", f->top, "Rows of the table")->capture_default_str()->check(count);
  cmd->add_flag("--json", f->json,
                "Print {\"plans\": [...], \"rejected\": {...}} instead of a table");
  cmd->add_option("--svg", f->svg, "Write throughput against memory per GPU as an SVG");
  cmd->add_option("--emit-config", f->emit_config,
                  "Write the best plan as a baton train TOML config (docs/planner.md)");
  return [f, cmd] {
    try {
      return run(*cmd, *f);
    } catch (const WriteError& e) {
      std::cerr << "baton: error: " << e.what() << "\n";
      return 1;
    }
  };
}

}  // namespace baton::cli
