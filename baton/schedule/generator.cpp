#include "baton/schedule/generator.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

struct Entry {
  const char* name;
  Schedule (*make)(const GeneratorOptions&);
};

constexpr Entry kGenerators[] = {
    {"naive", naive},       {"gpipe", gpipe},         {"1f1b", one_f_one_b},
    {"interleaved", interleaved}, {"looped-bfs", looped_bfs}, {"zb-h1", zb_h1},
    {"zb-h2", zb_h2},       {"zb-v", zb_v},           {"chimera", chimera},
};

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Entry& e : kGenerators) out.emplace_back(e.name);
    return out;
  }();
  return names;
}

Schedule generate(const std::string& name, const GeneratorOptions& options) {
  for (const Entry& e : kGenerators) {
    if (name == e.name) {
      Schedule schedule = e.make(options);
      validate(schedule);
      return schedule;
    }
  }
  std::string known;
  for (const auto& n : schedule_names()) known += (known.empty() ? "" : ", ") + n;
  BATON_CHECK(false, "[schedule.generate] unknown schedule \"", name, "\" (known: ", known, ")");
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
  const int v = options.virtual_stages == 0 ? default_v : options.virtual_stages;
  if (allowed_v.empty()) allowed_v = {1};
  if (std::find(allowed_v.begin(), allowed_v.end(), v) == allowed_v.end() &&
      !(allowed_v.front() == kAnyVirtualStages && v >= 1)) {
    std::string allowed;
    for (int a : allowed_v) allowed += (allowed.empty() ? "" : " or ") + std::to_string(a);
    BATON_CHECK(false, "[schedule.", name, "] --virtual ", v, " is not defined for ", name,
                ", which uses ", allowed, " stage chunk(s) per rank",
                (v > 1 ? "; interleaved and looped-bfs take several" : ""));
  }
  return v;
}

Schedule empty_schedule(const char* name, const GeneratorOptions& options, int stages,
                        StageMap map) {
  Schedule s;
  s.name = name;
  s.ranks = options.ranks;
  s.stages = stages;
  s.microbatches = options.microbatches;
  s.map = map;
  s.actions.resize(options.ranks);
  return s;
}

}  // namespace detail
}  // namespace baton::schedule
