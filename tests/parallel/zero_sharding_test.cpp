// ZeRO-2 and ZeRO-3 (PipelineOptions::zero(2|3): REDUCE_SCATTER, UNSHARD and
// RESHARD in the schedule) on a tied gpt with global-norm clipping, ranks as
// threads: over 3 SGD steps every rank's losses equal one process's (whose LM
// head uses the embedding's very tensor, clipped by LibTorch's
// clip_grad_norm_) within 1e-5, on the grids (dp, pp, tp) = (2,2,1),
// (2,2,2), (4,1,1), (2,4,1) for 1f1b, interleaved, zb-h1, zb-v and dualpipev,
// and at (2,2,1) for every other synchronous schedule. Without clipping,
// ZeRO-1, 2 and 3 take bitwise ZeRO-0's steps at dp 2 (ZeRO-0's all-reduce
// under LibTorch 1.13; Gloo's reduce-scatter under 2.x, whose two-term sums
// are ZeRO-0's too; the clip's norm adds the shards' squares in another
// order, so with it they agree within 1e-5 only), in bf16 too. At rest on
// dp 4 x pp 2, a rank's gradients under ZeRO-2 and its weights under ZeRO-3
// are 1/dp of ZeRO-0's, within 5%.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/models.h"
#include "baton/nn/transformer.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

constexpr int kSteps = 3, kBlocks = 6;
constexpr int kHidden = 16, kHeads = 4, kVocab = 32, kContext = 8, kBatch = 32;
constexpr int kHeadLayer = kBlocks + 1;
constexpr double kLr = 0.05, kMaxNorm = 0.1;
constexpr uint64_t kSeed = 1;  // PipelineOptions' default seed
const auto kTimeout = std::chrono::seconds(120);

nn::ModelSpec tied_gpt() {
  return nn::gpt(kBlocks, kHidden, kHeads, kVocab, kContext, /*tie_embeddings=*/true);
}

std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(900 + step);
  return {torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong)};
}

// One process, one shared tied parameter, clipped to kMaxNorm.
std::vector<double> one_process_losses() {
  const nn::ModelSpec spec = tied_gpt();
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  auto embedding = model[0]->as<nn::TokenEmbeddingImpl>();
  auto head = model[kHeadLayer]->as<nn::LmHeadImpl>();
  embedding->token->weight = head->head->weight;
  std::vector<torch::Tensor> parameters;
  for (auto& item : model->named_parameters())
    if (item.key() != "0.token.weight") parameters.push_back(item.value());
  torch::optim::SGD sgd(parameters, torch::optim::SGDOptions(kLr));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    torch::Tensor loss = spec.loss(model->forward(x), y);
    loss.backward();
    losses.push_back(loss.item<double>());
    torch::nn::utils::clip_grad_norm_(parameters, kMaxNorm);
    sgd.step();
  }
  return losses;
}

struct ZeroRun {
  std::vector<double> losses;
  double parameter_bytes = 0, gradient_bytes = 0;  // held at rest after the last step
};

// Bytes of the storages of `tensors` (each once) and of their gradients'.
std::pair<double, double> held_bytes(const std::vector<torch::Tensor>& tensors) {
  std::set<const void*> seen;
  double parameters = 0, gradients = 0;
  auto add = [&](const torch::Tensor& t, double& into) {
    if (t.defined() && seen.insert(t.storage().unsafeGetStorageImpl()).second)
      into += static_cast<double>(t.storage().nbytes());
  };
  for (const auto& t : tensors) add(t, parameters);
  for (const auto& t : tensors) add(t.grad(), gradients);
  return {parameters, gradients};
}

std::vector<ZeroRun> train(const PipelineOptions& options, int world) {
  std::vector<ZeroRun> runs(world);
  comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
    PipelineOptions o = options;
    o.communicator(comm);
    Pipeline pipe(tied_gpt(), nullptr, o);
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    ZeroRun& run = runs[comm.rank()];
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = tokens(step);
      sgd.zero_grad();
      run.losses.push_back(pipe.step(x, y));
      sgd.step();
    }
    std::tie(run.parameter_bytes, run.gradient_bytes) = held_bytes(pipe.held_parameters());
  });
  return runs;
}

struct Case {
  int dp, pp, tp;
  const char* schedule;
  int zero;
};

std::string name_of(const Case& c) {
  std::string s = c.schedule;
  for (char& ch : s)
    if (ch == '-') ch = '_';
  return "dp" + std::to_string(c.dp) + "_pp" + std::to_string(c.pp) + "_tp" + std::to_string(c.tp) +
         "_" + s + "_zero" + std::to_string(c.zero);
}

class ZeroSharding : public testing::TestWithParam<Case> {};

TEST_P(ZeroSharding, TakesTheStepsOfOneProcessWithTiedWeightsAndClipping) {
  at::set_num_threads(1);
  const Case c = GetParam();
  static const std::vector<double> reference = one_process_losses();
  const PipelineOptions options = PipelineOptions()
                                      .schedule(c.schedule)
                                      .microbatches(8)
                                      .dp(c.dp)
                                      .pp(c.pp)
                                      .tp(c.tp)
                                      .zero(c.zero)
                                      .clip_grad_norm(kMaxNorm);
  const std::vector<ZeroRun> runs = train(options, c.dp * c.pp * c.tp);
  for (size_t r = 0; r < runs.size(); ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference[step], 1e-5 * std::abs(reference[step]))
          << "rank " << r << " step " << step;
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int zero : {2, 3}) {
    for (const char* schedule : {"1f1b", "interleaved", "zb-h1", "zb-v", "dualpipev"}) {
      out.push_back({2, 2, 1, schedule, zero});
      out.push_back({2, 2, 2, schedule, zero});
      out.push_back({4, 1, 1, schedule, zero});
      out.push_back({2, 4, 1, schedule, zero});
    }
  }
  for (const char* schedule : {"gpipe", "interleaved-zb", "zb-h2", "v-half", "v-min", "chimera"})
    out.push_back({2, 2, 1, schedule, 3});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Grids, ZeroSharding, testing::ValuesIn(cases()),
                         [](const testing::TestParamInfo<Case>& info) {
                           return name_of(info.param);
                         });

// Without clipping the reductions are ZeRO-0's sums, bit for bit, and SGD
// steps each element alike whether whole or sharded.
TEST(ZeroSharding, WithoutClippingTakesBitwiseTheStepsOfZero0) {
  at::set_num_threads(1);
  const PipelineOptions base = PipelineOptions().schedule("1f1b").microbatches(8).dp(2).pp(2);
  const std::vector<ZeroRun> plain = train(PipelineOptions(base).zero(0), 4);
  for (int zero : {1, 2, 3}) {
    const std::vector<ZeroRun> sharded = train(PipelineOptions(base).zero(zero), 4);
    for (int r = 0; r < 4; ++r)
      for (int step = 0; step < kSteps; ++step)
        EXPECT_EQ(sharded[r].losses[step], plain[r].losses[step])
            << "zero " << zero << " rank " << r << " step " << step;
  }
}

// bf16 (autocast over the fp32 weights the shards are cut from): ZeRO-3
// takes ZeRO-0's steps on the same layout, within 1e-5 (bitwise where the
// sums are ZeRO-0's, LibTorch 1.13).
TEST(ZeroSharding, Bf16TakesTheStepsOfZero0) {
  at::set_num_threads(1);
  const PipelineOptions base =
      PipelineOptions().schedule("zb-v").microbatches(8).dp(2).pp(2).precision("bf16");
  const std::vector<ZeroRun> plain = train(PipelineOptions(base).zero(0), 4);
  const std::vector<ZeroRun> sharded = train(PipelineOptions(base).zero(3), 4);
  for (int r = 0; r < 4; ++r)
    for (int step = 0; step < kSteps; ++step)
      EXPECT_NEAR(sharded[r].losses[step], plain[r].losses[step],
                  1e-5 * std::abs(plain[r].losses[step]))
          << "rank " << r << " step " << step;
}

// dp 4 x pp 2: what each rank holds at rest after its last step.
TEST(ZeroSharding, HoldsOneDpthOfTheGradientsUnderZero2AndOfTheWeightsUnderZero3) {
  at::set_num_threads(1);
  constexpr int kDp = 4;
  const PipelineOptions base = PipelineOptions().schedule("1f1b").microbatches(4).dp(kDp).pp(2);
  const std::vector<ZeroRun> zero0 = train(PipelineOptions(base).zero(0), 8);
  const std::vector<ZeroRun> zero2 = train(PipelineOptions(base).zero(2), 8);
  const std::vector<ZeroRun> zero3 = train(PipelineOptions(base).zero(3), 8);
  for (int r = 0; r < 8; ++r) {
    ASSERT_GT(zero0[r].gradient_bytes, 0) << "rank " << r;
    EXPECT_NEAR(zero2[r].gradient_bytes, zero0[r].gradient_bytes / kDp,
                0.05 * zero0[r].gradient_bytes / kDp)
        << "rank " << r;
    // ZeRO-2 keeps the whole weights; ZeRO-3 only its shards.
    EXPECT_EQ(zero2[r].parameter_bytes, zero0[r].parameter_bytes) << "rank " << r;
    EXPECT_NEAR(zero3[r].parameter_bytes, zero0[r].parameter_bytes / kDp,
                0.05 * zero0[r].parameter_bytes / kDp)
        << "rank " << r;
    EXPECT_NEAR(zero3[r].gradient_bytes, zero0[r].gradient_bytes / kDp,
                0.05 * zero0[r].gradient_bytes / kDp)
        << "rank " << r;
  }
}

TEST(ZeroSharding, RefusesAStageAbove3AndZero2WithoutAFlush) {
  try {
    Pipeline(test::four_linear_mlp(), &test::cross_entropy, PipelineOptions().zero(4));
    FAIL() << "zero=4 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("zero must be 0 to 3"), std::string::npos) << e.what();
  }
  try {
    Pipeline(test::four_linear_mlp(), &test::cross_entropy,
             PipelineOptions().zero(3).schedule("2bw").pp(1).microbatches(2));
    FAIL() << "zero=3 with 2bw was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZeRO-3 needs a schedule with a flush"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace baton
