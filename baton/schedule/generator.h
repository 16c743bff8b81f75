// Schedule generators: each produces a compute-only schedule (F, B, I, W per
// rank, no communication) from p ranks, m micro-batches and v stage chunks per
// rank. lower() then inserts the communication. One generator per file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// What zb-auto searches with: the time of one stage's F, I and W for one
// micro-batch, the latency between ranks, and the memory limit in
// micro-batches held between F and I on a rank (0: p, 1F1B's peak).
struct ZbAutoCosts {
  double f = 1, i = 1, w = 1, comm = 0;
  int memory_limit = 0;
};

struct GeneratorOptions {
  int ranks = 1;           // p
  int microbatches = 1;    // m
  int virtual_stages = 0;  // v; 0 = the generator's default (1, or its fixed layout)
  ZbAutoCosts zb_auto;     // read by zb-auto only

  GeneratorOptions& set_ranks(int p) {
    ranks = p;
    return *this;
  }
  GeneratorOptions& set_microbatches(int m) {
    microbatches = m;
    return *this;
  }
  GeneratorOptions& set_virtual_stages(int v) {
    virtual_stages = v;
    return *this;
  }
  GeneratorOptions& set_zb_auto(const ZbAutoCosts& c) {
    zb_auto = c;
    return *this;
  }
};

Schedule naive(const GeneratorOptions& options);           // "naive"
Schedule gpipe(const GeneratorOptions& options);           // "gpipe"
Schedule one_f_one_b(const GeneratorOptions& options);     // "1f1b"
Schedule interleaved(const GeneratorOptions& options);     // "interleaved"
Schedule looped_bfs(const GeneratorOptions& options);      // "looped-bfs"
Schedule zb_h1(const GeneratorOptions& options);           // "zb-h1"
Schedule zb_h2(const GeneratorOptions& options);           // "zb-h2"
Schedule zb_v(const GeneratorOptions& options);            // "zb-v"
Schedule interleaved_zb(const GeneratorOptions& options);  // "interleaved-zb"
Schedule chimera(const GeneratorOptions& options);         // "chimera"
Schedule dualpipe_v(const GeneratorOptions& options);      // "dualpipev"
Schedule v_half(const GeneratorOptions& options);          // "v-half"
Schedule v_min(const GeneratorOptions& options);           // "v-min"
Schedule zb_auto(const GeneratorOptions& options);         // "zb-auto"
Schedule two_bw(const GeneratorOptions& options);          // "2bw" (no flush: Schedule::carries)
Schedule pipedream(const GeneratorOptions& options);  // "pipedream" (2bw's order, weight stashing)
Schedule async(const GeneratorOptions& options);      // "async" (2bw's order, no stashing)
Schedule pipemare(const GeneratorOptions& options);   // "pipemare" (async's, PipeMare's updates)

// The step time zb-auto predicts for the order it picks (its own timing of
// the costs in options.zb_auto), for tests and the planner.
double zb_auto_predicted_step(const GeneratorOptions& options);

// Peak activation memory that v-half and v-min promise per rank, in stage
// chunks (half a stage) held from their F until their W: the paper's
// (p + 2) / 2 and (p + 4) / 3 (integer division) micro-batches' worth of a
// full stage, doubled.
int v_half_peak_chunks(int ranks);
int v_min_peak_chunks(int ranks);

// The evaluation schedule of `training` for `microbatches` micro-batches:
// forward-only (Schedule::forward_only), on the ranks and maps of the
// training schedule (micro-batch k runs where training micro-batch
// k mod training.microbatches runs: Chimera's two pipes alternate), each rank
// running its F's stage by stage, every micro-batch of a stage before the
// next stage (GPipe's forward: no rank waits for a micro-batch to cross the
// whole pipeline before starting the next). Compute-only and validated;
// lower() adds its SEND_F / RECV_F. The executor's eval runs it.
Schedule forward_only(const Schedule& training, int microbatches);

// Names accepted by generate(), in a stable order.
const std::vector<std::string>& schedule_names();

// How a schedule's per-rank order reads in closed form, for the stats
// simulator's streamed sources (sim/action_source.h): warm-up forwards, then
// one forward and one backward alternately, then the remaining backwards,
// the warm-up being every forward (gpipe), p - r - 1 on rank r (1f1b) or
// Megatron's interleaved rule (interleaved). kNone: no such form.
enum class ClosedForm { kNone, kAllForwards, kOneFOneB, kInterleaved };

// The registry's properties of a schedule name, for what runs or checks it
// (nothing else compares a schedule's name): how it updates the weights
// (kPerStep for any name but pipedream, async and pipemare, a file's
// included), whether it flushes between steps (not 2bw, pipedream, async,
// pipemare: Schedule::carries), its closed form, whether it searches with
// measured costs (zb-auto), and whether a stage runs on several ranks
// (chimera).
WeightUpdates updates_of(std::string_view name);
bool flushes(std::string_view name);
ClosedForm closed_form_of(std::string_view name);
bool takes_measured_costs(std::string_view name);
bool replicates_stages(std::string_view name);

// Runs the named generator and validates its output; throws baton::Error for
// an unknown name (listing the known ones), an undefined (p, m, v), or a shape
// past the limits of schedule/limits.h (checked before anything is built).
Schedule generate(const std::string& name, const GeneratorOptions& options);

namespace detail {
// `allowed_v` value for generators that take any v >= 1.
inline constexpr int kAnyVirtualStages = -1;
// 1F1B without a flush (Schedule::carries) named `name`: the order of 2bw,
// pipedream, async and pipemare. Throws for m < p.
Schedule no_flush_1f1b(const char* name, const GeneratorOptions& options);
// Shared argument checks: p >= 1, m >= 1, and v (unset: `default_v`) one of
// `allowed_v` (empty: {1}; {kAnyVirtualStages}: any v >= 1). Returns the v.
int check_options(const char* name, const GeneratorOptions& options, int default_v,
                  std::vector<int> allowed_v = {});
// An empty schedule of the given shape, ready for actions.
Schedule empty_schedule(const char* name, const GeneratorOptions& options, int stages,
                        StageMap map);
// The order of a rank's chunk-micro-batches in interleaved 1F1B and
// interleaved-zb (v chunks per rank on the loop map): micro-batches in groups
// of g (p; when m is not a multiple of p, PyTorch's m // p rounds of m / rounds
// each), a group's g micro-batches through chunk 0, then chunk 1, and so on;
// backwards walk the chunks in reverse. A rank's k-th forward (or backward)
// of its total() runs micro-batch microbatch(k) on chunk chunk(k, forward),
// stage chunk * p + r on rank r.
struct InterleavedOrder {
  int p, v, m, g;
  int total() const { return m * v; }
  int microbatch(int k) const { return (k / (g * v)) * g + k % g; }
  int chunk(int k, bool forward) const {
    const int c = (k % (g * v)) / g;
    return forward ? c : v - 1 - c;
  }
};
// Checks that m splits into equal groups (one line naming `name` otherwise).
InterleavedOrder interleaved_order(const char* name, const GeneratorOptions& options, int v);
}  // namespace detail

}  // namespace baton::schedule
