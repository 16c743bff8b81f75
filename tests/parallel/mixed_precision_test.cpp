// Mixed precision (PipelineOptions::precision, runtime/precision.h) through
// the façade, ranks as threads: bf16 on the gpt model over 2 stages follows
// one process that trains the same Sequential under LibTorch's autocast
// (loss in fp32) step by step within 2e-2 relative, on 1f1b and on
// (dp, pp, tp) = (2, 2, 2); its boundaries cross in bf16 (half of fp32's
// bytes, measured); its parameters and gradients stay fp32; fp16 scales the
// loss (or, on LibTorch 1.13's CPU, is refused by name); bad values refused.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/models.h"
#include "baton/runtime/precision.h"

namespace baton {
namespace {

constexpr int kSteps = 6;
constexpr int kHidden = 32, kHeads = 4, kVocab = 64, kContext = 16, kBatch = 16;
constexpr double kLr = 0.05;
constexpr uint64_t kSeed = 1;  // PipelineOptions' default seed
const auto kTimeout = std::chrono::seconds(120);

nn::ModelSpec gpt() {
  return nn::gpt(/*layers=*/2, kHidden, kHeads, kVocab, kContext);
}

std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(900 + step);
  return {torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong)};
}

// One process: the same layers, forward under autocast, the loss in fp32.
std::vector<double> one_process(runtime::Precision precision) {
  const nn::ModelSpec spec = gpt();
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(kLr));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    torch::Tensor out;
    {
      runtime::AutocastScope autocast(precision, torch::kCPU);
      out = model->forward(x);
    }
    torch::Tensor loss = spec.loss(out.to(torch::kFloat), y);
    loss.backward();
    losses.push_back(loss.item<double>());
    sgd.step();
  }
  return losses;
}

struct RankRun {
  std::vector<double> losses;
  double boundary_bytes = 0;
  bool fp32_state = true;
};

RankRun pipelined(PipelineOptions options, comm::Communicator* comm) {
  if (comm != nullptr) options.communicator(*comm);
  Pipeline pipe(gpt(), nullptr, options);
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  RankRun run;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    run.losses.push_back(pipe.step(x, y));
    if (!pipe.last_step().skip_update) sgd.step();
  }
  for (const auto& [stage, bytes] : pipe.last_step().stage_boundary_bytes)
    run.boundary_bytes = std::max(run.boundary_bytes, bytes);
  for (const auto& p : pipe.parameters()) {
    run.fp32_state &= p.scalar_type() == torch::kFloat;
    run.fp32_state &= !p.grad().defined() || p.grad().scalar_type() == torch::kFloat;
  }
  return run;
}

std::vector<RankRun> on_ranks(const PipelineOptions& options, int world) {
  std::vector<RankRun> runs(world);
  comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
    runs[comm.rank()] = pipelined(options, &comm);
  });
  return runs;
}

TEST(MixedPrecision, Bf16FollowsOneProcessUnderAutocastAndHalvesTheBoundaries) {
  at::set_num_threads(1);
  const std::vector<double> reference = one_process(runtime::Precision::Bf16);
  const std::vector<double> fp32_reference = one_process(runtime::Precision::Fp32);
  const PipelineOptions base = PipelineOptions().microbatches(4).pp(2);
  const std::vector<RankRun> bf16 = on_ranks(PipelineOptions(base).precision("bf16"), 2);
  const std::vector<RankRun> fp32 = on_ranks(base, 2);
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(bf16[r].losses[step], reference[step], 2e-2 * std::abs(reference[step]))
          << "rank " << r << " step " << step;
    }
    EXPECT_TRUE(bf16[r].fp32_state) << "rank " << r << ": parameters or gradients not fp32";
  }
  // bf16 is not fp32: the two one-process runs differ (else the test proves nothing).
  EXPECT_NE(reference.back(), fp32_reference.back());
  // Rank 0 sends stage 0's output: b x s x h elements of 2 bytes, not 4.
  EXPECT_EQ(bf16[0].boundary_bytes, kBatch / 4 * kContext * kHidden * 2.0);
  EXPECT_EQ(fp32[0].boundary_bytes, 2 * bf16[0].boundary_bytes);
}

TEST(MixedPrecision, Bf16OnTheFullGridFollowsOneProcess) {
  at::set_num_threads(1);
  const std::vector<double> reference = one_process(runtime::Precision::Bf16);
  const std::vector<RankRun> runs =
      on_ranks(PipelineOptions().microbatches(2).dp(2).pp(2).tp(2).precision("bf16"), 8);
  for (int r = 0; r < 8; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference[step], 2e-2 * std::abs(reference[step]))
          << "rank " << r << " step " << step;
    }
  }
}

// A recomputed micro-batch's first F runs without a graph inside the step's
// autocast region. Had it cached the weight casts, LibTorch 1.13 would have
// handed the recomputed forwards casts without history, and the
// convolutions' weights no gradients (the losses drifted from never's by the
// second step). Recomputation changes no value: the losses equal never's.
TEST(MixedPrecision, Bf16RecomputationTrainsTheConvolutionsAsWithout) {
  at::set_num_threads(1);
  const auto losses = [](const char* recompute) {
    std::vector<std::vector<double>> out(2);
    comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
      Pipeline pipe(nn::fashion_cnn(), nullptr,
                    PipelineOptions()
                        .microbatches(4)
                        .pp(2)
                        .precision("bf16")
                        .recompute(recompute)
                        .communicator(comm));
      torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
      torch::Generator gen = at::detail::createCPUGenerator(7);
      for (int step = 0; step < 3; ++step) {
        const torch::Tensor x = torch::rand({8, 1, 28, 28}, gen);
        const torch::Tensor y = torch::randint(0, 10, {8}, gen, torch::kLong);
        sgd.zero_grad();
        out[comm.rank()].push_back(pipe.step(x, y));
        sgd.step();
      }
    });
    return out;
  };
  const auto never = losses("never");
  const auto always = losses("always");
  for (int r = 0; r < 2; ++r) EXPECT_EQ(always[r], never[r]) << "rank " << r;
  // The weights learn: the losses move.
  EXPECT_NE(never[1].front(), never[1].back());
}

TEST(MixedPrecision, Fp16ScalesTheLossOrIsRefusedWhereTheCpuCannot) {
  at::set_num_threads(1);
  const PipelineOptions options = PipelineOptions().microbatches(4).precision("fp16");
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  const std::vector<double> reference = one_process(runtime::Precision::Fp16);
  const std::vector<RankRun> runs = on_ranks(PipelineOptions(options).pp(2), 2);
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference[step], 2e-2 * std::abs(reference[step]))
          << "rank " << r << " step " << step;
    }
  }
#else
  try {
    Pipeline pipe(gpt(), nullptr, options);
    FAIL() << "fp16 on LibTorch 1.13's CPU was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fp16 on the CPU needs LibTorch 2.4 or later"),
              std::string::npos)
        << e.what();
  }
#endif
}

// A user's LayerNorm on the bf16 output of a Linear: LibTorch 1.13's CPU
// kernel refuses the mix, and the executor says so in one line naming the
// action, the layer and the version; LibTorch 2.x autocasts it and trains.
TEST(MixedPrecision, AnOpWithoutALowPrecisionKernelIsOneLineNamingTheActionAndVersion) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(8, 16),
                              torch::nn::LayerNorm(torch::nn::LayerNormOptions({16})),
                              torch::nn::Linear(16, 4));
  const runtime::LossFn loss = [](const torch::Tensor& out, const torch::Tensor& y) {
    return torch::nn::functional::cross_entropy(out, y);
  };
  Pipeline pipe(model, loss, PipelineOptions().microbatches(2).precision("bf16"));
  const torch::Tensor x = torch::randn({8, 8});
  const torch::Tensor y = torch::randint(0, 4, {8}, torch::kLong);
#if TORCH_VERSION_MAJOR >= 2
  EXPECT_TRUE(std::isfinite(pipe.step(x, y)));
#else
  try {
    pipe.step(x, y);
    FAIL() << "a bf16 LayerNorm on LibTorch 1.13's CPU ran";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    // Regression (issue 30, item 18): the layer is named, index and type.
    EXPECT_NE(what.find("[runtime] stage 0 micro-batch 0 F, layer 1 (\"1\", "
                        "torch::nn::LayerNormImpl) in bf16 failed under LibTorch 1.13"),
              std::string::npos)
        << what;
  }
#endif
}

TEST(MixedPrecision, TheLossScalerHalvesOnOverflowAndDoublesAfterCleanSteps) {
  runtime::LossScaler scaler(1024, 3);
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 2048);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 1024);
  scaler.update(true);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1024);  // the count restarted at the overflow
}

TEST(MixedPrecision, RefusesUnknownPrecisionsAndSchedulesWithoutAFlush) {
  for (const char* bad : {"fp8", "bfloat16", "", "FP32"}) {
    try {
      Pipeline pipe(gpt(), nullptr, PipelineOptions().precision(bad));
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("(expected fp32, bf16 or fp16)"), std::string::npos)
          << e.what();
    }
  }
  try {
    Pipeline pipe(gpt(), nullptr, PipelineOptions().schedule("2bw").pp(1).precision("bf16"));
    ADD_FAILURE() << "2bw in bf16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs in fp32 only"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace baton
