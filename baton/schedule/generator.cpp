#include "baton/schedule/generator.h"

#include <algorithm>
#include <cstdint>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

// The registry: one row per schedule name, with what runs, checks or streams
// it reads of the schedule (nothing outside this table compares a name).
struct Entry {
  const char* name;
  Schedule (*make)(const GeneratorOptions&);
  int chunks;            // stage chunks per rank unless --virtual says otherwise
  bool takes_virtual;    // whether --virtual sets the chunks
  int compute_per_pair;  // compute actions per (stage, micro-batch): F B, or F I W
  WeightUpdates updates = WeightUpdates::kPerStep;
  bool flush = true;  // false: Schedule::carries
  ClosedForm closed_form = ClosedForm::kNone;
  bool measured_costs = false;  // zb-auto
  bool replicated = false;      // chimera
};

using U = WeightUpdates;
using C = ClosedForm;
constexpr Entry kGenerators[] = {
    {"naive", naive, 1, false, 2},
    {"gpipe", gpipe, 1, false, 2, U::kPerStep, true, C::kAllForwards},
    {"1f1b", one_f_one_b, 1, false, 2, U::kPerStep, true, C::kOneFOneB},
    {"interleaved", interleaved, 2, true, 2, U::kPerStep, true, C::kInterleaved},
    {"looped-bfs", looped_bfs, 2, true, 2},
    {"zb-h1", zb_h1, 1, false, 3},
    {"zb-h2", zb_h2, 1, false, 3},
    {"zb-v", zb_v, 2, false, 3},
    {"interleaved-zb", interleaved_zb, 2, true, 3},
    {"chimera", chimera, 1, false, 2, U::kPerStep, true, C::kNone, false, true},
    {"dualpipev", dualpipe_v, 2, false, 3},
    {"v-half", v_half, 2, false, 3},
    {"v-min", v_min, 2, false, 3},
    {"zb-auto", zb_auto, 1, false, 3, U::kPerStep, true, C::kNone, true},
    {"2bw", two_bw, 1, false, 2, U::kPerStep, false},
    {"pipedream", pipedream, 1, false, 2, U::kPerMicrobatch, false},
    {"async", async, 1, false, 2, U::kPerMicrobatchUnstashed, false},
    {"pipemare", pipemare, 1, false, 2, U::kPipeMare, false},
};

// The row of `name`; null for a name the registry does not have ("file").
const Entry* entry_of(std::string_view name) {
  for (const Entry& e : kGenerators)
    if (name == e.name) return &e;
  return nullptr;
}

// Refuses a shape whose lowered schedule could exceed kMaxActions, before the
// generator allocates anything: each (stage, micro-batch) has its compute
// actions and at most four SEND/RECV.
void check_size(const Entry& e, const GeneratorOptions& options) {
  const int v = e.takes_virtual && options.virtual_stages > 0 ? options.virtual_stages : e.chunks;
  const uint64_t stages = static_cast<uint64_t>(options.ranks) * v;
  const uint64_t most = stages * options.microbatches * (e.compute_per_pair + 4);
  BATON_CHECK(most <= kMaxActions, "[schedule.generate] ", e.name, " with pp=", options.ranks,
              ", m=", options.microbatches, " and ", stages, " stages would have up to ", most,
              " actions (", stages, " stages x ", options.microbatches, " micro-batches x ",
              e.compute_per_pair + 4, "), more than the limit of ", kMaxActions);
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : kGenerators) out.emplace_back(e.name);
    return out;
  }();
  return names;
}

WeightUpdates updates_of(std::string_view name) {
  const Entry* e = entry_of(name);
  return e ? e->updates : WeightUpdates::kPerStep;
}

bool flushes(std::string_view name) {
  const Entry* e = entry_of(name);
  return !e || e->flush;
}

ClosedForm closed_form_of(std::string_view name) {
  const Entry* e = entry_of(name);
  return e ? e->closed_form : ClosedForm::kNone;
}

bool takes_measured_costs(std::string_view name) {
  const Entry* e = entry_of(name);
  return e && e->measured_costs;
}

bool replicates_stages(std::string_view name) {
  const Entry* e = entry_of(name);
  return e && e->replicated;
}

Schedule generate(const std::string& name, const GeneratorOptions& options) {
  if (const Entry* e = entry_of(name)) {
    detail::check_options(e->name, options, 1, {detail::kAnyVirtualStages});
    check_size(*e, options);
    Schedule schedule = e->make(options);
    validate(schedule);
    return schedule;
  }
  std::string known;
  for (const auto& n : schedule_names()) known += (known.empty() ? "" : ", ") + n;
  BATON_CHECK(false, "[schedule.generate] unknown schedule \"", printable(name),
              "\" (known: ", known, ")");
  return {};
}

namespace detail {

int check_options(const char* name, const GeneratorOptions& options, int default_v,
                  std::vector<int> allowed_v) {
  BATON_CHECK(options.ranks >= 1, "[schedule.", name, "] pp must be at least 1, got ",
              options.ranks);
  BATON_CHECK(options.microbatches >= 1, "[schedule.", name,
              "] micro-batches must be at least 1, got ", options.microbatches);
  BATON_CHECK(options.virtual_stages >= 0, "[schedule.", name,
              "] virtual stages must be at least 1, got ", options.virtual_stages);
  BATON_CHECK(options.ranks <= kMaxRanks, "[schedule.", name, "] pp=", options.ranks,
              " exceeds the limit of ", kMaxRanks);
  BATON_CHECK(options.microbatches <= kMaxMicrobatches, "[schedule.", name,
              "] micro-batches m=", options.microbatches, " exceeds the limit of ",
              kMaxMicrobatches);
  BATON_CHECK(options.virtual_stages <= kMaxVirtualStages, "[schedule.", name,
              "] virtual stages v=", options.virtual_stages, " exceeds the limit of ",
              kMaxVirtualStages);
  const int v = options.virtual_stages == 0 ? default_v : options.virtual_stages;
  if (allowed_v.empty()) allowed_v = {1};
  if (std::find(allowed_v.begin(), allowed_v.end(), v) == allowed_v.end() &&
      !(allowed_v.front() == kAnyVirtualStages && v >= 1)) {
    std::string allowed;
    for (int a : allowed_v) allowed += (allowed.empty() ? "" : " or ") + std::to_string(a);
    BATON_CHECK(false, "[schedule.", name, "] --virtual ", v, " is not defined for ", name,
                ", which uses ", allowed, " stage chunk(s) per rank",
                (v > 1 ? "; interleaved, looped-bfs and interleaved-zb take several" : ""));
  }
  return v;
}

Schedule empty_schedule(const char* name, const GeneratorOptions& options, int stages,
                        StageMap map) {
  Schedule s;
  s.name = name;
  s.updates = updates_of(name);
  s.ranks = options.ranks;
  s.stages = stages;
  s.microbatches = options.microbatches;
  s.map = map;
  s.actions.resize(options.ranks);
  return s;
}

}  // namespace detail
}  // namespace baton::schedule
