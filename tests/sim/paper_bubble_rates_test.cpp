// Every generator against the bubble rates the Zero Bubble paper publishes
// (Qi et al., ICLR 2024, the bubble-rate table; the rows and costs of the
// authors' script `iclr_bubble_rates` in sail-sg/zero-bubble-pipeline-
// parallelism): profiled F, B (= I), W and communication costs of four GPT
// sizes, with the paper's metric for each schedule:
//   bubble = (T - m (F + B + W)) / T,
// T the makespan for 1F1B and ZB-H1, and for ZB-H2 the longest span of one
// rank (its first action's start to its last's end: the paper's
// post-validation lets steps overlap). Our simulator charges communication as
// the paper does, a latency from a producer's end to its consumer's start.
//
// Interleaved 1F1B: the paper's script times Megatron's order but drops, for
// every micro-batch of a group except the first, the dependency across the
// wrap (stage c p + p - 1 on rank p - 1 to stage (c + 1) p on rank 0, in
// both directions). Its published interleaved rates are therefore lower than
// any schedule obeying the data dependencies can reach; the tests below
// re-time Megatron's order with the script's method both ways and show that
// baton equals the full-dependency timing and that the dropped dependency
// accounts for the whole gap (71 against 68 in the issue's example).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/sim/simulator.h"

namespace baton {
namespace {

struct Row {
  int p, m;
  double f, b, w, c;
  int layers;
  double r1f1b, rh1, rh2, r1p, r2p;  // published bubble rates
};

// p, m, F, B, W, comm (microseconds), layers; 1F1B, ZB-H1, ZB-H2, ZB-1p, ZB-2p.
const std::vector<Row> kRows = {
    {8, 24, 18522, 18086, 9337, 601, 24, 0.2431, 0.1585, 0.1083, 0.1585, 0.0433},
    {8, 32, 18513, 18086, 9331, 626, 24, 0.1985, 0.1242, 0.0837, 0.1242, 0.0039},
    {8, 64, 18546, 18097, 9321, 762, 24, 0.1240, 0.0674, 0.0444, 0.0674, 0.0026},
    {8, 24, 29718, 29444, 19927, 527, 32, 0.2347, 0.1323, 0.0698, 0.1323, 0.0029},
    {8, 32, 29802, 29428, 19530, 577, 32, 0.1898, 0.1045, 0.0559, 0.1045, 0.0022},
    {8, 64, 29935, 29621, 19388, 535, 32, 0.1091, 0.0554, 0.0294, 0.0554, 0.0010},
    {16, 48, 11347, 11248, 8132, 377, 48, 0.2552, 0.1397, 0.0672, 0.1397, 0.0066},
    {16, 64, 11307, 11254, 8101, 379, 48, 0.2082, 0.1088, 0.0516, 0.1088, 0.0054},
    {16, 128, 11325, 11308, 8109, 378, 48, 0.1251, 0.0576, 0.0266, 0.0576, 0.0028},
    {32, 96, 10419, 10207, 7715, 408, 64, 0.2646, 0.1421, 0.0641, 0.1421, 0.0038},
    {32, 128, 10408, 10204, 7703, 408, 64, 0.2168, 0.1106, 0.0490, 0.1106, 0.0029},
    {32, 256, 10402, 10248, 7698, 460, 64, 0.1352, 0.0594, 0.0257, 0.0594, 0.0018},
};

// The table prints four decimals.
constexpr double kRounding = 0.5e-4;

double work(const Row& r) {
  return r.m * (r.f + r.b + r.w);
}

sim::Stats simulate(const schedule::Schedule& s, const Row& r, bool split_backward = true) {
  // tb is the full backward (I + W); a schedule without W runs B = I + W.
  return sim::simulate(schedule::lower(s),
                       sim::uniform_cost_model(s, r.f, r.b + r.w, split_backward ? r.w : 0, r.c))
      .stats;
}

schedule::Schedule make(const std::string& name, const Row& r, int v = 0) {
  return schedule::generate(
      name,
      schedule::GeneratorOptions().set_ranks(r.p).set_microbatches(r.m).set_virtual_stages(v));
}

double makespan_rate(const sim::Stats& s, const Row& r) {
  return (s.makespan - work(r)) / s.makespan;
}

double span_rate(const sim::Stats& s, const Row& r) {
  double span = 0;
  for (size_t k = 0; k < s.busy.size(); ++k)
    span = std::max(span, s.busy[k] + s.idle_within_span[k]);
  return (span - work(r)) / span;
}

std::string name(const Row& r) {
  return "p=" + std::to_string(r.p) + " m=" + std::to_string(r.m) +
         " F=" + std::to_string(int(r.f));
}

TEST(PaperBubbleRates, OneFOneBMatchesEveryRow) {
  for (const Row& r : kRows) {
    EXPECT_NEAR(makespan_rate(simulate(make("1f1b", r), r, /*split_backward=*/false), r), r.r1f1b,
                kRounding)
        << name(r);
  }
}

// The paper's handcrafted ZB-H1 (warmup_c = 1) and ZB-H2 (warmup_c = 2)
// orders, as its script builds them: rank r runs (p - r - 1) warmup_c
// forwards, then per micro-batch F (while any is left), I, and W once the
// rank is past (p - 1) warmup_c; the remaining W's close.
schedule::Schedule paper_handcrafted(int p, int m, int warmup_c) {
  std::string text = "# baton schedule: name=paper-h" + std::to_string(warmup_c) +
                     " pp=" + std::to_string(p) + " stages=" + std::to_string(p) +
                     " microbatches=" + std::to_string(m) + " map=loop\n";
  for (int r = 0; r < p; ++r) {
    const int warmup = (p - r - 1) * warmup_c;
    int f = 0, i = 0, w = 0;
    auto add = [&](char kind, int& next) {
      text += std::to_string(r) + kind + std::to_string(next++) + " ";
    };
    for (int k = 0; k < warmup; ++k) add('F', f);
    for (int k = 0; k < m; ++k) {
      if (warmup + k < m) add('F', f);
      add('I', i);
      if (warmup + k >= (p - 1) * warmup_c) add('W', w);
    }
    while (w < m) add('W', w);
    text += "\n";
  }
  return schedule::parse_schedule(text);
}

TEST(PaperBubbleRates, ThePapersZbH1OrderMatchesEveryRowAndOursIsNoWorse) {
  for (const Row& r : kRows) {
    EXPECT_NEAR(makespan_rate(simulate(paper_handcrafted(r.p, r.m, 1), r), r), r.rh1, kRounding)
        << name(r);
    // zb-h1 places each W greedily where the rank would idle; with
    // communication charged that beats the fixed order by up to 0.08 points.
    EXPECT_LE(makespan_rate(simulate(make("zb-h1", r), r), r), r.rh1 + kRounding) << name(r);
  }
}

TEST(PaperBubbleRates, ZbH2AndThePapersOrderMatchEveryRowWithTheSpanMetric) {
  for (const Row& r : kRows) {
    EXPECT_NEAR(span_rate(simulate(paper_handcrafted(r.p, r.m, 2), r), r), r.rh2, kRounding)
        << name(r);
    EXPECT_NEAR(span_rate(simulate(make("zb-h2", r), r), r), r.rh2, kRounding) << name(r);
  }
}

// The paper's ZB-1p and ZB-2p come from its automatic scheduler under a
// memory limit of p and 2p micro-batches' activations. zb-auto is a cheaper
// search (docs/architecture.md): under p it must do at least as well as the
// published 1p (which equals ZB-H1 in every row); under 2p at least as well
// as ZB-H2 on the span metric. The published 2p (0.1-0.7%) is out of its
// reach: zb-auto lands on ZB-H2's 2.6-11% (a shortfall the closing note of
// issue 10 records).
TEST(PaperBubbleRates, ZbAutoReachesThePublishedOnePAndZbH2AtTwoP) {
  for (const Row& r : kRows) {
    for (const int limit : {r.p, 2 * r.p}) {
      schedule::GeneratorOptions o;
      o.set_ranks(r.p).set_microbatches(r.m);
      o.zb_auto = schedule::ZbAutoCosts{r.f, r.b, r.w, r.c, limit};
      const sim::Stats stats = simulate(schedule::zb_auto(o), r);
      if (limit == r.p) {
        EXPECT_LE(makespan_rate(stats, r), r.r1p + kRounding) << name(r) << " limit p";
      } else {
        EXPECT_LE(span_rate(stats, r), r.rh2 + kRounding) << name(r) << " limit 2p";
      }
    }
  }
}

// --- interleaved: Megatron's order, timed the way the paper's script does --

// Megatron-core's interleaved order for rank `rank` (its warm-up count and
// its chunk and micro-batch of the k-th forward or backward), as (is_forward,
// micro-batch, chunk) in execution order.
std::vector<std::tuple<bool, int, int>> megatron_order(int p, int m, int v, int rank) {
  const int total = m * v;
  const int warmup = std::min(total, (p - rank - 1) * 2 + (v - 1) * p);
  auto chunk = [&](int k, bool forward) {
    const int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatch = [&](int k) { return (k / (p * v)) * p + k % p; };
  std::vector<std::tuple<bool, int, int>> out;
  for (int k = 0; k < warmup; ++k) out.emplace_back(true, microbatch(k), chunk(k, true));
  for (int k = 0; k < total - warmup; ++k) {
    out.emplace_back(true, microbatch(k + warmup), chunk(k + warmup, true));
    out.emplace_back(false, microbatch(k), chunk(k, false));
  }
  for (int k = total - warmup; k < total; ++k)
    out.emplace_back(false, microbatch(k), chunk(k, false));
  return out;
}

// The script's timing: column by column, forwards in rank order then
// backwards in reverse rank order; each action starts when its rank is free
// and its producer's output has arrived (comm after the producer's end).
// `wrap_for_every_microbatch` false reproduces the script, which checks the
// wrap dependency only for the first micro-batch of each group.
double script_makespan(int p, int m, int v, double f, double b, double comm,
                       bool wrap_for_every_microbatch) {
  std::vector<std::vector<std::tuple<bool, int, int>>> order;
  for (int r = 0; r < p; ++r) order.push_back(megatron_order(p, m, v, r));
  std::map<std::tuple<bool, int, int, int>, double> end;  // (forward, rank, micro-batch, chunk)
  std::vector<double> free(p, 0);
  for (size_t i = 0; i < order[0].size(); ++i) {
    std::vector<int> ranks;
    for (int r = 0; r < p; ++r)
      if (std::get<0>(order[r][i])) ranks.push_back(r);
    for (int r = p - 1; r >= 0; --r)
      if (!std::get<0>(order[r][i])) ranks.push_back(r);
    for (const int r : ranks) {
      const auto [forward, mb, chunk] = order[r][i];
      double start = free[r];
      const bool at_wrap = forward ? r == 0 : r == p - 1;
      const bool first_chunk =
          forward ? chunk == 0 : chunk == v - 1;  // fed by the data or the loss
      if (!at_wrap) {
        start = std::max(start, end.at({forward, forward ? r - 1 : r + 1, mb, chunk}) + comm);
      } else if (!first_chunk && (wrap_for_every_microbatch || mb % p == 0)) {
        start = std::max(
            start,
            end.at({forward, forward ? p - 1 : 0, mb, forward ? chunk - 1 : chunk + 1}) + comm);
      }
      free[r] = start + (forward ? f : b);
      end[{forward, r, mb, chunk}] = free[r];
    }
  }
  return *std::max_element(free.begin(), free.end());
}

double baton_interleaved(int p, int m, int v, double f, double bw, double comm) {
  const schedule::Schedule s = schedule::generate(
      "interleaved",
      schedule::GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
  // Per-rank costs: v chunks of f / v and bw / v each.
  return sim::simulate(schedule::lower(s), sim::uniform_cost_model(s, v * f, v * bw, 0, comm))
      .stats.makespan;
}

TEST(PaperInterleaved, TheIssuesExampleIs71WithEveryDependencyAnd68WithoutTheWrap) {
  // p = 4, m = 8, v = 2; F = 1, B + W = 2 per chunk (2 and 4 per rank); comm 1.
  EXPECT_DOUBLE_EQ(baton_interleaved(4, 8, 2, 1, 2, 1), 71);
  EXPECT_DOUBLE_EQ(script_makespan(4, 8, 2, 1, 2, 1, /*wrap_for_every_microbatch=*/true), 71);
  EXPECT_DOUBLE_EQ(script_makespan(4, 8, 2, 1, 2, 1, /*wrap_for_every_microbatch=*/false), 68);
  // Without communication the dropped dependency never binds: both 57.
  EXPECT_DOUBLE_EQ(baton_interleaved(4, 8, 2, 1, 2, 0), 57);
  EXPECT_DOUBLE_EQ(script_makespan(4, 8, 2, 1, 2, 0, false), 57);
}

TEST(PaperInterleaved, EveryRowEqualsTheScriptsTimingWithEveryDependency) {
  // The script gives interleaved v = layers / p chunks of one layer each.
  for (const Row& r : kRows) {
    const int v = r.layers / r.p;
    const double f = r.f / v, bw = (r.b + r.w) / v;
    const double ours = baton_interleaved(r.p, r.m, v, f, bw, r.c);
    EXPECT_NEAR(ours, script_makespan(r.p, r.m, v, f, bw, r.c, true), 1e-6 * ours) << name(r);
    // The script's own (dropped-wrap) timing is never longer, and its gap
    // to ours is the few percent the issue reports.
    const double script = script_makespan(r.p, r.m, v, f, bw, r.c, false);
    EXPECT_LE(script, ours) << name(r);
    EXPECT_LT((ours - work(r)) / ours - (script - work(r)) / script, 0.01) << name(r);
  }
}

}  // namespace
}  // namespace baton
