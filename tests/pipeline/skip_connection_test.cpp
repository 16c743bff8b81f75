// Skip connections across stages (nn/skip.h, schedule::Skip) through the
// façade, ranks as threads. A toy U-Net: two encoder layers stash their
// outputs, which the last layers pop several stages on, and every skip's
// tensor goes straight from the stashing rank to the popping rank (counted:
// the ranks between send nothing for it). Losses and parameters after 3 SGD
// steps equal one process running the same layers in order within 1e-5
// relative, for every schedule with a flush at p in {2, 4}, over shared
// memory and over Gloo, with recomputation too; eval equals one process's
// forward. The schedules without a flush (2bw, pipedream, async, pipemare)
// carry a skip's tensors with the backwards they carry, held to one process
// with 2bw's stale update and to the replay of their rules
// (tests/pipeline/async_replay.h) for the other three. Bad declarations are
// refused in one line naming the layer.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/skip.h"
#include "baton/schedule/generator.h"
#include "schedule_cases.h"
#include "tests/pipeline/async_replay.h"

namespace baton {
namespace {

using test::error_of;
using test::expect_one_line;
using test::relative;

constexpr int kWidth = 12, kClasses = 3, kBatch = 24, kSteps = 3;
constexpr double kLr = 0.1;
constexpr uint64_t kSeed = 1;  // PipelineOptions' default seed
const auto kTimeout = std::chrono::seconds(60);

// A Linear + tanh that may stash its output and pop one to add.
struct UnitImpl : torch::nn::Module {
  UnitImpl(std::string stash_name, std::string pop_name)
      : fc(register_module("fc", torch::nn::Linear(kWidth, kWidth))),
        stash_name(std::move(stash_name)),
        pop_name(std::move(pop_name)) {}
  torch::Tensor forward(torch::Tensor x) {
    if (!pop_name.empty()) x = x + 0.7 * nn::pop(pop_name);
    x = torch::tanh(fc(x));
    if (!stash_name.empty()) nn::stash(stash_name, x * 1.5);
    return x;
  }
  torch::nn::Linear fc;
  std::string stash_name, pop_name;
};
TORCH_MODULE(Unit);

nn::LayerSpec unit(const std::string& stash_name, const std::string& pop_name) {
  nn::LayerSpec spec{"unit", [=] { return torch::nn::AnyModule(Unit(stash_name, pop_name)); }};
  if (!stash_name.empty()) spec.skips.stash.push_back(stash_name);
  if (!pop_name.empty()) spec.skips.pop.push_back(pop_name);
  return spec;
}

// 8 layers: 0 stashes "enc0", 1 stashes "enc1", 6 pops "enc1", 7 (the head) pops "enc0".
nn::ModelSpec unet() {
  nn::ModelSpec spec;
  spec.name = "unet";
  spec.layers = {unit("enc0", ""), unit("enc1", ""), unit("", ""),    unit("", ""),
                 unit("", ""),     unit("", ""),     unit("", "enc1")};
  spec.layers.push_back(
      {"head", [] {
         return torch::nn::AnyModule(torch::nn::Functional(
             [](const torch::Tensor& x) { return (x + nn::pop("enc0")).narrow(1, 0, kClasses); }));
       }});
  spec.layers.back().skips.pop = {"enc0"};
  spec.loss = [](const torch::Tensor& out, const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(out, y);
  };
  return spec;
}

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(500 + step);
  return {torch::randn({kBatch, kWidth}, gen),
          torch::randint(0, kClasses, {kBatch}, gen, torch::kLong)};
}

struct RankRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> params;
  torch::Tensor eval;
  uint64_t messages = 0;             // point-to-point messages this rank sent in its last step
  std::map<int, double> skip_bytes;  // its last step's StepResult::skip_bytes
};

RankRun one_process() {
  const nn::ModelSpec spec = unet();
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(kLr));
  RankRun run;
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step);
    sgd.zero_grad();
    torch::Tensor loss = spec.loss(model->forward(x), y);  // stash/pop in one process
    loss.backward();
    run.losses.push_back(loss.item<double>());
    sgd.step();
  }
  for (const auto& item : model->named_parameters())
    run.params["layer." + item.key()] = item.value().detach().clone();
  torch::NoGradGuard no_grad;
  run.eval = model->forward(batch(0).first);
  return run;
}

RankRun pipelined(PipelineOptions options, comm::Communicator& comm) {
  options.communicator(comm);
  Pipeline pipe(unet(), nullptr, options);
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  RankRun run;
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = batch(step);
    sgd.zero_grad();
    const uint64_t before = comm.p2p_messages_sent();
    run.losses.push_back(pipe.step(x, y));
    run.messages = comm.p2p_messages_sent() - before;
    sgd.step();
  }
  run.skip_bytes = pipe.last_step().skip_bytes;
  for (const auto& [name, value] : pipe.named_parameters()) run.params[name] = value.detach();
  run.eval = pipe.eval(batch(0).first);
  return run;
}

// Skips need a flush; zb-auto's profiled search is the multi-tensor sweep's.
std::vector<test::ScheduleCase> cases() {
  return test::schedule_cases(
      8, [](const schedule::Schedule& s) { return !s.carries && s.name != "zb-auto"; });
}

void expect_like_one_process(const std::vector<RankRun>& runs, const RankRun& reference,
                             const std::string& what) {
  size_t seen = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << what << " rank " << r << " step " << step;
    }
    for (const auto& [name, value] : runs[r].params) {
      ASSERT_TRUE(reference.params.count(name)) << name;
      EXPECT_LE(relative(value, reference.params.at(name)), 1e-5)
          << what << " " << name << " on rank " << r;
      ++seen;
    }
    // The rank holding the last stage returns the whole output (chimera's
    // two such ranks return the micro-batches each finished: not compared).
    if (runs[r].eval.defined() && runs[r].eval.sizes() == reference.eval.sizes()) {
      EXPECT_LE(relative(runs[r].eval, reference.eval), 1e-5) << what << " eval on rank " << r;
    }
  }
  EXPECT_GE(seen, reference.params.size()) << what;
}

class SkipConnections : public testing::TestWithParam<test::ScheduleCase> {};

TEST_P(SkipConnections, TrainLikeOneProcess) {
  at::set_num_threads(1);
  const test::ScheduleCase& c = GetParam();
  const PipelineOptions options =
      PipelineOptions().schedule(c.schedule).pp(c.p).microbatches(2 * c.p);
  std::vector<RankRun> runs(c.p);
  comm::run_local_group(
      c.p, kTimeout,
      [&](comm::Communicator& comm) { runs[comm.rank()] = pipelined(options, comm); }, c.transport);
  static const RankRun reference = one_process();
  expect_like_one_process(runs, reference, c.schedule);
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, SkipConnections, testing::ValuesIn(cases()),
                         test::case_name);

TEST(SkipConnectionsRecompute, TrainLikeOneProcess) {
  at::set_num_threads(1);
  const RankRun reference = one_process();
  for (const std::string schedule : {"1f1b", "zb-h1", "interleaved"}) {
    for (const std::string recompute : {"always", "except_last"}) {
      const PipelineOptions options =
          PipelineOptions().schedule(schedule).pp(2).microbatches(4).recompute(recompute);
      std::vector<RankRun> runs(2);
      comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
        runs[comm.rank()] = pipelined(options, comm);
      });
      expect_like_one_process(runs, reference, schedule + " " + recompute);
    }
  }
}

// --- Schedules without a flush --------------------------------------------

namespace replay = test::async_replay;

// async_replay's batch: its rows, 4 micro-batches of them.
std::pair<torch::Tensor, torch::Tensor> replay_batch(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(600 + step);
  return {torch::randn({replay::kBatch, kWidth}, gen),
          torch::randint(0, kClasses, {replay::kBatch}, gen, torch::kLong)};
}

// 2bw: W(t+1) = W(t) - lr grad(W(t-1)), and the drained last gradient.
replay::Record one_process_stale() {
  const nn::ModelSpec spec = unet();
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  replay::Record rec;
  test::StaleSgd stale(model->parameters(), replay::kLr);
  for (int step = 0; step < replay::kSteps; ++step) {
    const auto [x, y] = replay_batch(step);
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = spec.loss(model->forward(x), y);
    loss.backward();
    rec.losses.push_back(loss.item<double>());
    stale.step();
  }
  stale.drain();
  for (const auto& item : model->named_parameters())
    rec.final_params["layer." + item.key()] = item.value().detach().clone();
  return rec;
}

// pipedream, async and pipemare: the U-Net written out per Linear
// (Replayed::linear_of: the forward's weights' value, the backward's
// gradients), its stashes and pops by hand.
replay::Record replay_unet(const std::vector<int>& stage_of_layer, int pp,
                           const replay::Rules& rules) {
  replay::Replayed run(nn::build_sequential(unet(), kSeed), stage_of_layer, pp);
  return run.train(rules, [&](int t, int k, int j) {
    const auto [x, y] = replay_batch(t);
    std::map<std::string, torch::Tensor> stashed;
    torch::Tensor h = x.chunk(replay::kMicrobatches)[k];
    const size_t units = stage_of_layer.size() - 1;
    for (size_t i = 0; i < units; ++i) {
      auto* unit = run.model->ptr(i)->as<UnitImpl>();
      if (!unit->pop_name.empty()) h = h + 0.7 * stashed.at(unit->pop_name);
      const replay::Params& f = replay::forward_weights(run.history, pp, stage_of_layer[i], j);
      h = torch::tanh(replay::Replayed::linear_of(*unit->fc, std::to_string(i) + ".fc", h, f));
      if (!unit->stash_name.empty()) stashed[unit->stash_name] = h * 1.5;
    }
    return std::make_pair((h + stashed.at("enc0")).narrow(1, 0, kClasses),
                          y.chunk(replay::kMicrobatches)[k]);
  });
}

using CarriedCase = std::tuple<std::string, int, comm::TransportKind>;

class SkipConnectionsWithoutAFlush : public testing::TestWithParam<CarriedCase> {};

TEST_P(SkipConnectionsWithoutAFlush, TrainLikeOneProcessUnderTheirRules) {
  at::set_num_threads(1);
  const auto& [schedule, pp, transport] = GetParam();
  const bool pipemare = schedule == "pipemare";
  std::vector<replay::Record> ranks(pp);
  std::vector<int> stage_of_layer(unet().num_layers(), -1);
  comm::run_local_group(
      pp, kTimeout,
      [&](comm::Communicator& comm) {
        PipelineOptions options = PipelineOptions()
                                      .schedule(schedule)
                                      .pp(pp)
                                      .microbatches(replay::kMicrobatches)
                                      .communicator(comm);
        if (pipemare) options.pipemare(runtime::PipeMareOptions().warmup_steps(2));
        Pipeline pipe(unet(), nullptr, options);
        for (const auto& [stage, layers] : pipe.stage_layers())
          for (int layer : layers) stage_of_layer[layer] = stage;
        EXPECT_FALSE(pipe.schedule().skips.empty());
        torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(replay::kLr));
        const bool inside = pipe.updates_inside_step();
        if (inside) pipe.set_optimizer(&sgd);
        replay::Record& rec = ranks[comm.rank()];
        for (int t = 0; t < replay::kSteps; ++t) {
          const auto [x, y] = replay_batch(t);
          sgd.zero_grad();
          rec.losses.push_back(pipe.step(x, y));
          if (!inside) sgd.step();
        }
        pipe.flush();
        if (!inside) sgd.step();
        for (const auto& [name, value] : pipe.named_parameters())
          rec.final_params[name] = value.detach().clone();
      },
      transport);
  for (int stage : stage_of_layer) ASSERT_GE(stage, 0);
  replay::Record want;
  if (schedule == "2bw") {
    want = one_process_stale();
  } else {
    const replay::Rules rules = schedule == "pipedream" ? replay::Rules{true}
                                : pipemare
                                    ? replay::Rules{false, true, 0.5, 2 * replay::kMicrobatches}
                                    : replay::Rules{};
    want = replay_unet(stage_of_layer, pp, rules);
    // The replay tells the rules apart: pipedream's stashing against the latest weights.
    const replay::Rules other = schedule == "pipedream" ? replay::Rules{} : replay::Rules{true};
    EXPECT_GT(
        replay::distance(want.final_params, replay_unet(stage_of_layer, pp, other).final_params),
        2e-5);
  }
  replay::expect_matches(ranks, want);
}

INSTANTIATE_TEST_SUITE_P(Carried, SkipConnectionsWithoutAFlush,
                         testing::Combine(testing::Values("2bw", "pipedream", "async", "pipemare"),
                                          testing::Values(2, 4),
                                          testing::Values(comm::TransportKind::kShm,
                                                          comm::TransportKind::kGloo)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_p" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  std::string(comm::to_string(std::get<2>(info.param)));
                         });

// 1f1b on 4 ranks, two layers a stage: "enc0" goes from stage 0 to 3 and
// "enc1" from 0 to 3 as well, straight from rank 0 to rank 3. Per step and
// micro-batch, rank 0 sends its boundary and both skips (3 messages), ranks 1
// and 2 only their boundaries forward and back (2), rank 3 its gradient back
// and both skips' gradients (3), plus its loss to each other rank.
TEST(SkipConnectionsMessages, GoStraightToTheRankThatPops) {
  at::set_num_threads(1);
  constexpr int m = 4;
  std::vector<RankRun> runs(4);
  comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
    runs[comm.rank()] = pipelined(PipelineOptions().pp(4).microbatches(m), comm);
  });
  EXPECT_EQ(runs[0].messages, uint64_t{3 * m});
  EXPECT_EQ(runs[1].messages, uint64_t{2 * m});
  EXPECT_EQ(runs[2].messages, uint64_t{2 * m});
  EXPECT_EQ(runs[3].messages, uint64_t{3 * m + 3});
  // What the simulator charges each skip (sim::CostModel::skip_bytes): rank 0
  // sent both, a micro-batch of kBatch / m rows of kWidth floats each.
  const double bytes = kBatch / m * kWidth * 4.0;
  EXPECT_EQ(runs[0].skip_bytes, (std::map<int, double>{{0, bytes}, {1, bytes}}));
  for (int r = 1; r < 4; ++r) EXPECT_TRUE(runs[r].skip_bytes.empty()) << "rank " << r;
}

TEST(SkipConnectionsBadInput, AreRefusedNamingTheLayer) {
  nn::ModelSpec never_popped = unet();
  never_popped.layers[6].skips.pop.clear();
  expect_one_line(error_of([&] { nn::skip_edges(never_popped); }),
                  "layer 1 (\"unit\") stashes \"enc1\", which no later layer pops");
  nn::ModelSpec no_stash = unet();
  no_stash.layers[1].skips.stash.clear();
  expect_one_line(error_of([&] { nn::skip_edges(no_stash); }),
                  "layer 6 (\"unit\") pops \"enc1\", which no earlier layer stashes");
  nn::ModelSpec twice = unet();
  twice.layers[1].skips.stash = {"enc0"};
  twice.layers[6].skips.pop = {"enc0"};
  expect_one_line(error_of([&] { nn::skip_edges(twice); }),
                  "layer 1 (\"unit\") stashes \"enc0\", which layer 0 (\"unit\") stashes already");
  // The same through the façade, at construction.
  expect_one_line(error_of([&] { Pipeline pipe(never_popped, nullptr, PipelineOptions()); }),
                  "stashes \"enc1\", which no later layer pops");
  // Layers that stash and pop what they did not declare: on one stage that
  // is just a local tensor, but across stages nothing would carry it.
  nn::ModelSpec undeclared = unet();
  undeclared.layers[7].skips.pop.clear();
  undeclared.layers[0].skips.stash.clear();
  expect_one_line(
      error_of([&] {
        comm::run_local_group(2, std::chrono::seconds(10), [&](comm::Communicator& comm) {
          Pipeline pipe(undeclared, nullptr, PipelineOptions().pp(2).communicator(comm));
          pipe.step(batch(0).first, batch(0).second);
        });
      }),
      "left \"enc0\" unpopped");
}

}  // namespace
}  // namespace baton
