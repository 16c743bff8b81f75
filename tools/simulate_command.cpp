// baton simulate: generate (or load) a schedule, lower and validate it,
// simulate it against uniform per-rank costs, and print, draw and trace it.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/plan/profile.h"
#include "baton/schedule/csv_format.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/runnable.h"
#include "baton/schedule/text_format.h"
#include "baton/sim/simulator.h"
#include "baton/topology/topology.h"
#include "baton/trace/writers.h"
#include "tools/cli.h"
#include "tools/output_paths.h"
#include "tools/simulate_stats.h"

namespace baton::cli {
namespace {

struct SimulateFlags {
  std::string schedule = "1f1b";
  std::string schedule_file;
  int pp = 4;
  int microbatches = 8;
  int virtual_stages = 0;
  double tf = 1, tb = 2, tw = 1, comm = 0;
  int memory_limit = 0;  // zb-auto's, in micro-batches between F and I (0: p)
  // The dp x pp x tp grid. Cost-model time units count as ms here.
  int dp = 1, tp = 1;
  int zero = 0;  // ZeRO stage over dp (schedule/sharding.h)
  double param_mb = 0, bucket_mb = schedule::kDefaultBucketMiB;
  double dp_latency_us = 10, dp_gbps = 25;
  double tp_latency_us = 5, tp_gbps = 150, tp_mb = 0, tp_layers = 1, tp_comm = 0;
  // The pipeline link's bandwidth and the bytes of a stage boundary (0: only --comm).
  double pp_gbps = 0, boundary_mb = 0;
  bool tp_scatter_gather = true;
  bool grid = false, json = false, print = false;
  double clip_norm = 0;  // > 0: end every rank with a CLIP_NORM
  std::string svg, trace, export_csv;
  std::string csv_format = "compute_only";
  std::string profile;  // baton train --profile-out's file: each rank's memory
};

// What the flags ask a generator for (zb-auto also searches with the costs).
schedule::GeneratorOptions generator_options(const SimulateFlags& f) {
  return schedule::GeneratorOptions{}
      .set_ranks(f.pp)
      .set_microbatches(f.microbatches)
      .set_virtual_stages(f.virtual_stages)
      .set_zb_auto({f.tf, f.tb - f.tw, f.tw, f.comm, f.memory_limit});
}

schedule::ScheduleSource source(const SimulateFlags& f) {
  if (!f.schedule_file.empty()) return schedule::ScheduleSource::from_file(f.schedule_file);
  return schedule::ScheduleSource::generated(f.schedule, generator_options(f));
}

// Flags that a schedule file replaces: it sets the schedule and its shape.
constexpr const char* kShapeFlags[] = {"--schedule", "--pp", "--microbatches", "--virtual"};

// What CLI11 leaves to us: each option at most once (flags such as --json may
// repeat), and no shape flags beside --schedule-file.
void check_flags(const CLI::App& cmd, const SimulateFlags& f) {
  check_given_once(cmd);
  BATON_CHECK(cmd.count("--csv-format") == 0 || cmd.count("--export-csv") == 1,
              "[simulate] --csv-format needs --export-csv, the file it is the format of");
  schedule::parse_csv_format(f.csv_format);
  BATON_CHECK(cmd.count("--memory-limit") == 0 || schedule::takes_measured_costs(f.schedule),
              "[simulate] --memory-limit is zb-auto's; --schedule ", printable(f.schedule),
              " sets its own memory");
  BATON_CHECK(cmd.count("--profile") == 0 || f.tp == 1,
              "[simulate] --profile predicts whole layers' memory (tp = 1); a rank's tp share "
              "is not in a one-device profile");
  if (cmd.count("--schedule-file") == 0) return;
  BATON_CHECK(!f.schedule_file.empty(), "[simulate] --schedule-file needs a file name");
  for (const char* flag : kShapeFlags) {
    BATON_CHECK(cmd.count(flag) == 0, "[simulate] ", flag,
                " cannot be combined with --schedule-file, which sets the schedule, pp, "
                "micro-batches and stages itself");
  }
}

constexpr double kMiB = 1024.0 * 1024.0;

// Uniform per-rank costs (uniform_cost_model), plus the grid's: each stage's
// parameters (a rank's --param-mb over its v chunks) in --bucket-mb buckets,
// the dp link, and each F, B and I's tensor-parallel all-reduces.
sim::CostModel grid_costs(const schedule::Schedule& s, const CLI::App& cmd,
                          const SimulateFlags& f) {
  sim::CostModel costs = sim::uniform_cost_model(s, f.tf, f.tb, f.tw, f.comm);
  const double v = s.map == schedule::StageMap::Bidirectional ? 1.0 : s.stages_per_rank();
  const double stage_bytes = f.param_mb * kMiB / v;
  const std::vector<double> buckets =
      schedule::even_gradient_buckets(stage_bytes, f.bucket_mb * kMiB);
  const sim::Link tp_link{f.tp_latency_us / 1e3, f.tp_gbps * 1e6};
  const double tp_comm =
      f.tp > 1 ? (f.tp_comm + sim::tp_comm_time(f.tp, f.tp_layers, f.tp_mb * kMiB, tp_link)) / v
               : 0;
  for (sim::StageCost& stage : costs.stages) {
    if (cmd.count("--param-mb")) stage.parameter_bytes = stage_bytes;
    stage.bucket_bytes = buckets;
    stage.tp_comm = tp_comm;
  }
  costs.dp = f.dp;
  costs.dp_link = sim::Link{f.dp_latency_us / 1e3, f.dp_gbps * 1e6};
  costs.comm_bytes_per_time = f.pp_gbps * 1e6;
  if (cmd.count("--boundary-mb")) {
    for (sim::StageCost& stage : costs.stages) stage.boundary_bytes = f.boundary_mb * kMiB;
  }
  costs.tp = f.tp;
  costs.tp_link = tp_link;
  costs.scatter_gather = f.tp_scatter_gather;
  return costs;
}

// Each rank's predicted peak by category from --profile's measured layers,
// and its walk action by action in `traces`.
std::vector<sim::MemoryPrediction> profiled_memory(const SimulateFlags& f,
                                                   const schedule::Schedule& s,
                                                   std::vector<sim::MemoryTrace>& traces) {
  const plan::Profile profile = plan::read_profile(f.profile);
  BATON_CHECK(profile.memory.has_value(), "[simulate] --profile ", f.profile,
              " records no measured memory (written before --profile-out did); write it again "
              "with baton train --profile-out");
  return plan::profiled_rank_memory(*profile.memory, s, std::nullopt, {},
                                    plan::Replicas{f.dp, f.zero}, &traces);
}

// Each rank's memory over the simulated step, for the SVG's memory lanes:
// from time 0 the most held during its first compute action, then at each
// compute action's start the most held during it and the sends and
// receives listed since the one before, and from its last event's end the
// rest of its list and the optimizer's step.
std::vector<trace::MemoryPoint> memory_points(const schedule::Schedule& s,
                                              const trace::Timeline& timeline,
                                              const std::vector<sim::MemoryTrace>& traces) {
  std::map<std::tuple<int, int, int, schedule::ActionKind>, double> starts;
  std::vector<double> last_end(s.ranks, 0);
  for (const trace::Event& e : timeline.events) {
    if (schedule::is_compute(e.kind)) starts[{e.rank, e.stage, e.microbatch, e.kind}] = e.start;
    last_end[e.rank] = std::max(last_end[e.rank], e.end);
  }
  std::vector<trace::MemoryPoint> points;
  for (int r = 0; r < s.ranks && r < static_cast<int>(traces.size()); ++r) {
    const auto& actions = s.actions[r];
    double pending = 0;
    bool first = true;
    for (size_t i = 0; i < actions.size() && i < traces[r].during.size(); ++i) {
      const schedule::Action& a = actions[i];
      pending = std::max(pending, traces[r].during[i]);
      if (!schedule::is_compute(a.kind)) continue;
      const auto at = starts.find({r, a.stage, a.microbatch, a.kind});
      if (at == starts.end()) continue;
      points.push_back({r, first ? 0.0 : at->second, pending});
      first = false;
      pending = 0;
    }
    points.push_back({r, last_end[r], std::max(pending, traces[r].optimizer_step)});
  }
  return points;
}

nlohmann::json memory_json(const std::vector<sim::MemoryPrediction>& memory) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 0; r < memory.size(); ++r) {
    const sim::MemoryPrediction& m = memory[r];
    out.push_back({{"rank", r},
                   {"predicted_peak_bytes", m.peak},
                   {"predicted",
                    {{"parameters", m.parameters},
                     {"gradients", m.gradients},
                     {"optimizer", m.optimizer},
                     {"activations", m.activations},
                     {"buffers", m.buffers},
                     {"other", m.other}}}});
  }
  return out;
}

void print_memory(const std::vector<sim::MemoryPrediction>& memory) {
  std::cout << "rank  peak MiB  parameters  gradients  optimizer  activations  buffers\n"
            << std::fixed << std::setprecision(2);
  for (size_t r = 0; r < memory.size(); ++r) {
    const sim::MemoryPrediction& m = memory[r];
    std::cout << std::setw(4) << r << "  " << std::setw(8) << m.peak / kMiB << "  " << std::setw(10)
              << m.parameters / kMiB << "  " << std::setw(9) << m.gradients / kMiB << "  "
              << std::setw(9) << m.optimizer / kMiB << "  " << std::setw(11) << m.activations / kMiB
              << "  " << std::setw(7) << m.buffers / kMiB << "\n";
  }
  std::cout << std::defaultfloat;
}

int run(const CLI::App& cmd, const SimulateFlags& f) {
  check_flags(cmd, f);
  check_stdout_open("[simulate]");
  std::vector<NamedPath> outputs;
  if (!f.svg.empty() || cmd.count("--svg")) outputs.push_back({"--svg", f.svg});
  if (!f.trace.empty() || cmd.count("--trace")) outputs.push_back({"--trace", f.trace});
  if (!f.export_csv.empty() || cmd.count("--export-csv"))
    outputs.push_back({"--export-csv", f.export_csv});
  check_output_paths("[simulate]", outputs, {{"--schedule-file", f.schedule_file}});

  // The grid's sizes are checked before a large schedule is built.
  if (!cmd.count("--schedule-file")) topology::Topology(f.dp, f.pp, f.tp);
  // The stats-only path knows neither REDUCE_GRAD, REDUCE_TIED (Chimera's
  // replicated stages) nor tp charges: dp = tp = 1 and no replicated stages only.
  if (f.json && outputs.empty() && !f.grid && !f.print && f.schedule_file.empty() && f.dp == 1 &&
      !schedule::replicates_stages(f.schedule) && f.tp == 1 && cmd.count("--param-mb") == 0 &&
      cmd.count("--boundary-mb") == 0 && f.pp_gbps == 0 && f.clip_norm == 0 && f.profile.empty()) {
    const StatsOnly fast =
        simulate_stats_only(f.schedule, generator_options(f), {f.tf, f.tb, f.tw, f.comm});
    // The grid's fields as the full path writes them for dp = tp = 1 and no parameter bytes.
    SimulatedGrid grid;
    grid.buckets_per_stage =
        static_cast<int>(schedule::even_gradient_buckets(0, f.bucket_mb * kMiB).size());
    const nlohmann::json out = simulate_json(fast.shape, fast.stats, grid);
    std::cout << out.dump() << "\n";
    flush_stdout("[simulate]");
    return 0;
  }
  schedule::Schedule s = schedule::lowered_schedule(source(f));
  topology::Topology(f.dp, s.ranks, f.tp);
  sim::CostModel costs = grid_costs(s, cmd, f);
  // A file's own reductions stay (schedule/runnable.h). Replicated stages
  // (Chimera) sum their copies' gradients: a stage's whole parameters, over
  // the pipeline link.
  const int buckets = costs.stages.empty() ? 1 : costs.stages[0].bucket_count();
  s = schedule::add_reductions(s, schedule::ReductionOptions{}
                                      .set_dp(f.dp)
                                      .set_zero(f.zero)
                                      .set_buckets_per_stage(std::vector<int>(s.stages, buckets))
                                      .set_clip(f.clip_norm > 0));
  for (const auto& list : s.actions) {
    for (const schedule::Action& a : list) {
      if (a.kind == schedule::ActionKind::REDUCE_TIED)
        costs.stages[a.stage].tied_bytes = costs.stages[a.stage].parameter_bytes;
    }
  }
  sim::Result result = sim::simulate(s, costs);
  const sim::Stats& st = result.stats;
  std::vector<sim::MemoryTrace> traces;
  const std::vector<sim::MemoryPrediction> memory =
      f.profile.empty() ? std::vector<sim::MemoryPrediction>() : profiled_memory(f, s, traces);
  // With --profile the SVG draws each rank's memory under the timeline.
  if (!memory.empty()) result.timeline.memory = memory_points(s, result.timeline, traces);
  for (const NamedPath& out : outputs) {
    if (out.flag == "--export-csv") {
      write_output("[simulate]", out,
                   schedule::format_csv(s, schedule::parse_csv_format(f.csv_format)));
    } else {
      write_output("[simulate]", out,
                   out.flag == "--svg" ? trace::to_svg(result.timeline)
                                       : trace::to_chrome_trace(result.timeline));
    }
  }
  if (f.json) {
    const SimulatedShape shape{
        s.name, s.ranks, s.microbatches, s.stages, s.stages_per_rank(), s.map, s.action_count()};
    SimulatedGrid grid{f.dp, f.tp, costs.stages.empty() ? 0 : costs.stages[0].bucket_count(),
                       costs.stages.empty() ? 0.0 : costs.stages[0].tp_comm};
    nlohmann::json out = simulate_json(shape, st, grid);
    if (!memory.empty()) out["memory"] = memory_json(memory);
    std::cout << out.dump() << "\n";
    flush_stdout("[simulate]");
    return 0;
  }
  std::cout << "schedule " << s.name << "  pp=" << s.ranks << "  microbatches=" << s.microbatches
            << "  stages=" << s.stages << "  map=" << schedule::to_string(s.map) << "\n";
  if (f.dp > 1 || f.tp > 1 || s.has_grad_reductions()) {
    std::cout << "grid dp=" << f.dp << " x pp=" << s.ranks << " x tp=" << f.tp << " ("
              << static_cast<long>(f.dp) * s.ranks * f.tp << " ranks)  buckets per stage "
              << (costs.stages.empty() ? 0 : costs.stages[0].bucket_count())
              << "  tp comm per action " << (costs.stages.empty() ? 0.0 : costs.stages[0].tp_comm)
              << "\n";
    std::cout << "rank  reduce-grad  exposed\n";
    for (int r = 0; r < s.ranks; ++r) {
      std::cout << std::setw(4) << r << "  " << std::setw(11) << st.reduce_grad[r] << "  "
                << std::setw(7) << st.exposed_reduction[r] << "\n";
    }
  }
  std::cout << "makespan " << st.makespan << "  steady step " << st.steady_step << "  bubble "
            << std::fixed << std::setprecision(2) << 100.0 * st.bubble_fraction << "%"
            << std::defaultfloat << "\n";
  std::cout << "rank  busy  idle-in-span  peak-inflight  peak-activations\n";
  for (int r = 0; r < s.ranks; ++r) {
    std::cout << std::setw(4) << r << "  " << std::setw(4) << st.busy[r] << "  " << std::setw(12)
              << st.idle_within_span[r] << "  " << std::setw(13) << st.peak_inflight[r] << "  "
              << std::setw(16) << st.peak_activation_bytes[r] << "\n";
  }
  if (s.has_sharding()) {
    std::cout << "rank  parameters  peak-parameters (ZeRO-" << f.zero << ")\n";
    for (int r = 0; r < s.ranks; ++r) {
      std::cout << std::setw(4) << r << "  " << std::setw(10) << st.parameter_bytes[r] << "  "
                << std::setw(15) << st.peak_parameter_bytes[r] << "\n";
    }
  }
  if (!memory.empty()) print_memory(memory);
  if (f.print) std::cout << schedule::format_schedule(s);
  if (f.grid) std::cout << trace::to_grid(result.timeline);
  for (const NamedPath& out : outputs) std::cout << "wrote " << out.path << "\n";
  flush_stdout("[simulate]");
  return 0;
}

// A time flag: a finite number >= 0; a size: a finite number > 0.
const CLI::Validator kTime = finite_number(false, "TIME");
const CLI::Validator kPositive = finite_number(true, "SIZE");

}  // namespace

Action add_simulate(CLI::App& app) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd =
      app.add_subcommand("simulate", "Simulate a pipeline schedule and draw its timeline");
  take_repeated_options(cmd);  // reported by check_flags(), by name
  std::string names;
  for (const auto& n : schedule::schedule_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("--schedule", flags->schedule, "Schedule: " + names)->capture_default_str();
  cmd->add_option("--schedule-file", flags->schedule_file,
                  "Load a schedule in compact notation (one line per rank, e.g. 0F0 0F1 0B0 ...), "
                  "or a torch.distributed.pipelining schedule CSV if the name ends in .csv; "
                  "it sets the schedule, pp, micro-batches and stages");
  cmd->add_option("--pp", flags->pp, "Pipeline ranks p")
      ->capture_default_str()
      ->check(CLI::Range(1, schedule::kMaxRanks));
  cmd->add_option("--microbatches", flags->microbatches, "Micro-batches m per step")
      ->capture_default_str()
      ->check(CLI::Range(1, schedule::kMaxMicrobatches));
  cmd->add_option("--virtual", flags->virtual_stages,
                  "Stage chunks per rank v (default 1; interleaved, looped-bfs and interleaved-zb "
                  "default to 2; zb-v, chimera, dualpipev, v-half and v-min fix their own layout)")
      ->check(CLI::Range(1, schedule::kMaxVirtualStages));
  cmd->add_option("--tf", flags->tf, "Forward time of a rank's share of the model per micro-batch")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tb", flags->tb, "Full backward time (input + weight gradients)")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tw", flags->tw, "Weight-gradient part of --tb (I = tb - tw)")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--comm", flags->comm,
                  "Time from an action's end to its output's arrival on another rank")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--memory-limit", flags->memory_limit,
                  "zb-auto: most micro-batches a rank holds between F and I (default p, 1F1B's)")
      ->check(CLI::Range(1, schedule::kMaxMicrobatches));
  cmd->add_option("--dp", flags->dp,
                  "Data-parallel replicas: each stage's gradients are all-reduced (REDUCE_GRAD) "
                  "over dp ranks after its last backward, overlapping the rest of the step")
      ->capture_default_str();
  cmd->add_option("--tp", flags->tp,
                  "Tensor-parallel ranks per stage: every F, B and I pays its tp all-reduces "
                  "(--tp-comm, and 2 per --tp-layers of --tp-mb each)")
      ->capture_default_str();
  cmd->add_option("--param-mb", flags->param_mb,
                  "Parameters of a rank's share of the model, MiB (the bytes REDUCE_GRAD reduces)")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--bucket-mb", flags->bucket_mb,
                  "Gradient bucket size, MiB, as DDP's bucket_cap_mb")
      ->capture_default_str()
      ->check(kPositive);
  cmd->add_option("--zero", flags->zero,
                  "With --dp: ZeRO stage 0-3; each stage's UNSHARD (an all-gather of its "
                  "parameter bytes) opens its step, ZeRO-2/3 reduce-scatter the gradients, "
                  "ZeRO-3 frees the weights after the stage's last backward (peak-parameters)")
      ->capture_default_str()
      ->check(CLI::Range(0, 3));
  cmd->add_option("--dp-latency-us", flags->dp_latency_us,
                  "Latency of one step of the dp ring all-reduce, us (cost-model units are ms)")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--dp-gbps", flags->dp_gbps,
                  "Bandwidth of the dp links, GB/s (1e9 bytes/s); 0: infinite")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tp-latency-us", flags->tp_latency_us,
                  "Latency of one step of a tp ring all-reduce, us")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tp-gbps", flags->tp_gbps, "Bandwidth of the tp links, GB/s; 0: infinite")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tp-mb", flags->tp_mb,
                  "Activation a tp all-reduce moves (b * s * h * element size), MiB")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option(
         "--tp-layers", flags->tp_layers,
         "Transformer layers in a rank's share: 2 tp all-reduces each per F and per B or I")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--tp-comm", flags->tp_comm,
                  "Extra time a rank's share spends in tp communication per F and per B or I "
                  "(with --tp > 1), added to the all-reduces above")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option(
         "--pp-gbps", flags->pp_gbps,
         "Bandwidth of the pipeline links, GB/s, for --boundary-mb; 0: infinite (only --comm)")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option("--boundary-mb", flags->boundary_mb,
                  "Bytes of a stage's output activation (and its gradient) per micro-batch, MiB")
      ->capture_default_str()
      ->check(kTime);
  cmd->add_option(
         "--tp-scatter-gather", flags->tp_scatter_gather,
         "With --tp > 1 and --boundary-mb: send 1/tp of a boundary over the pipeline link and "
         "gather it over tp (baton train's default; true or false)")
      ->capture_default_str();
  cmd->add_option("--clip-grad-norm", flags->clip_norm,
                  "Clip to this global L2 norm, as baton train --clip-grad-norm: every rank's "
                  "step ends with a CLIP_NORM, charged as one all-reduce of a number over the "
                  "dp x pp x tp world (the norm's value changes no cost)")
      ->check(finite_number(true, "NORM"));
  cmd->add_flag("--grid", flags->grid, "Print the timeline as a text grid");
  cmd->add_flag("--print-schedule", flags->print, "Print the lowered schedule in compact notation");
  cmd->add_option("--svg", flags->svg, "Write an SVG Gantt chart");
  cmd->add_option("--trace", flags->trace, "Write a Chrome trace JSON (open in Perfetto)");
  cmd->add_option("--export-csv", flags->export_csv,
                  "Write the schedule as a torch.distributed.pipelining schedule CSV");
  cmd->add_option("--csv-format", flags->csv_format,
                  "CSV format of --export-csv: compute_only (F, B, I, W) or compute_comms (with "
                  "SEND/RECV and WAIT_SEND)")
      ->capture_default_str();
  cmd->add_option("--profile", flags->profile,
                  "A profile written by baton train --profile-out: print each rank's predicted "
                  "peak memory by category from its measured layers (cut as --balance uniform, "
                  "at the profiled micro-batch; one replica of --dp under --zero; tp = 1)");
  cmd->add_flag("--json", flags->json, "Print one JSON object instead of text");
  return [flags, cmd] {
    try {
      return run(*cmd, *flags);
    } catch (const WriteError& e) {
      std::cerr << "baton: error: " << e.what() << "\n";
      return 1;
    }
  };
}

}  // namespace baton::cli
