// What the pipeline tests that sweep every schedule share: the cases
// (schedule, p, transport) a sweep runs, their names, and the comparisons and
// one-line error checks each makes.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "tests/pipeline/reference_training.h"  // relative(), StaleSgd

namespace baton::test {

struct ScheduleCase {
  std::string schedule;
  int p;
  comm::TransportKind transport;
};

inline void PrintTo(const ScheduleCase& c, std::ostream* out) {
  *out << c.schedule << " p=" << c.p << " " << comm::to_string(c.transport);
}

// "zb_h1_p4_gloo": a case's test name.
inline std::string case_name(const testing::TestParamInfo<ScheduleCase>& info) {
  std::string n = info.param.schedule + "_p" + std::to_string(info.param.p) + "_" +
                  std::string(comm::to_string(info.param.transport));
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// Every schedule that `keep` accepts, at p in {2, 4} with m = 2p where it is
// defined and has at most `max_stages` stages, over shared memory and over Gloo.
inline std::vector<ScheduleCase> schedule_cases(
    int max_stages, const std::function<bool(const schedule::Schedule&)>& keep) {
  std::vector<ScheduleCase> out;
  for (const auto& name : schedule::schedule_names()) {
    for (int p : {2, 4}) {
      try {
        const auto s = schedule::generate(
            name, schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(2 * p));
        if (s.stages > max_stages || !keep(s)) continue;
      } catch (const Error&) {
        continue;  // not defined for (p, m)
      }
      for (auto transport : {comm::TransportKind::kShm, comm::TransportKind::kGloo})
        out.push_back({name, p, transport});
    }
  }
  return out;
}

// The message of the baton::Error `body` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// `what` is one line holding `part`.
inline void expect_one_line(const std::string& what, const std::string& part) {
  EXPECT_NE(what.find(part), std::string::npos) << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
}

}  // namespace baton::test
