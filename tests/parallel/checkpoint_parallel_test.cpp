// Checkpoints under tensor parallelism and ZeRO-1 (ranks as threads), with
// Adam on the gpt model: a save at (dp, pp, tp) = (1, 2, 2) resumes at the
// same layout bitwise and at (1, 1, 1) within 1e-6 relative of the run that
// never stopped, and a (1, 1, 1) save resumes at (1, 1, 2); the files hold
// whole layers, the same names, shapes and dtypes whatever the tp. A ZeRO-1
// save (dp = 2) resumes under ZeRO-0 and the reverse bitwise (ZeRO-1 takes
// ZeRO-0's steps bit for bit), and its optimizer files equal ZeRO-0's bit
// for bit; a (2, 1, 2) ZeRO-1 save resumes on one process.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/pipeline/checkpoint.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 4, kSaveAfter = 2;
constexpr int kHidden = 16, kHeads = 4, kVocab = 32, kContext = 8, kBatch = 8;
const auto kTimeout = std::chrono::seconds(60);

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "baton_parallel_checkpoint_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string sub(const std::string& name) const { return (fs::path(path) / name).string(); }
  std::string path;
};

struct Layout {
  int dp = 1, pp = 1, tp = 1, zero = 0;
};

std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(700 + step);
  return {torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong)};
}

// Trains `layout` with Adam from `from` to kSteps: it first loads `resume`
// when given, and saves into `save` after step kSaveAfter when given (and
// then stops). Returns the losses of its steps (rank 0's; every rank returns
// the same).
std::vector<double> train(const Layout& l, int from, const std::string& resume = "",
                          const std::string& save = "") {
  const int world = l.dp * l.pp * l.tp;
  std::vector<double> losses;
  std::mutex mutex;
  auto body = [&](comm::Communicator* comm) {
    PipelineOptions options =
        PipelineOptions().microbatches(2).dp(l.dp).pp(l.pp).tp(l.tp).zero(l.zero);
    if (comm != nullptr) options.communicator(*comm);
    Pipeline pipe(nn::gpt(/*layers=*/2, kHidden, kHeads, kVocab, kContext), nullptr, options);
    torch::optim::Adam adam(pipe.parameters(),
                            torch::optim::AdamOptions(0.5));  // lr: the checkpoint's
    if (!resume.empty()) {
      pipe.load(resume, &adam);
      EXPECT_EQ(pipe.steps(), from);
    } else {
      adam.param_groups()[0].options().set_lr(0.01);
    }
    std::vector<double> mine;
    for (int step = from; step < kSteps; ++step) {
      auto [x, y] = tokens(step);
      adam.zero_grad();
      mine.push_back(pipe.step(x, y));
      adam.step();
      if (!save.empty() && step + 1 == kSaveAfter) {
        pipe.save(save, &adam);
        break;
      }
    }
    if (comm == nullptr || comm->rank() == 0) {
      std::lock_guard<std::mutex> lock(mutex);
      losses = mine;
    }
  };
  if (world == 1) {
    body(nullptr);
  } else {
    comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) { body(&comm); });
  }
  return losses;
}

void expect_within(const std::vector<double>& got, const std::vector<double>& want,
                   double tolerance, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tolerance * std::abs(want[i]))
        << what << ": step " << kSaveAfter + i + 1;
  }
}

std::vector<double> tail(const std::vector<double>& losses) {
  return std::vector<double>(losses.begin() + kSaveAfter, losses.end());
}

// {file path: {tensor name: {"shape", "dtype"}}} of a checkpoint's manifest.
std::map<std::string, nlohmann::json> file_tensors(const std::string& dir) {
  std::map<std::string, nlohmann::json> out;
  const nlohmann::json manifest = checkpoint::check(dir);
  for (const auto& f : manifest["files"]) out[f["path"]] = f["tensors"];
  return out;
}

// Every tensor of every file of checkpoint `dir` whose kind is `kind`, keyed "<path>:<name>".
std::map<std::string, torch::Tensor> file_contents(const std::string& dir,
                                                   const std::string& kind) {
  std::map<std::string, torch::Tensor> out;
  const nlohmann::json manifest = checkpoint::check(dir);
  for (const auto& f : manifest["files"]) {
    if (f["kind"].get<std::string>() != kind) continue;
    uint32_t crc = 0;
    checkpoint::parse_crc32(f["crc32"], &crc);
    const std::string path = f["path"];
    for (auto& [name, tensor] : checkpoint::read_tensors((fs::path(dir) / path).string(), crc)) {
      out[path + ":" + name] = tensor;
    }
  }
  return out;
}

TEST(TensorParallelCheckpoint, ResumesOnAnyTpWithWholeLayersInTheFiles) {
  at::set_num_threads(1);
  TempDir dir;
  const Layout tp2{1, 2, 2}, one{1, 1, 1}, tp2_alone{1, 1, 2};
  const std::vector<double> straight_tp2 = train(tp2, 0);
  const std::vector<double> straight_one = train(one, 0);
  train(tp2, 0, "", dir.sub("tp2"));
  train(one, 0, "", dir.sub("one"));

  EXPECT_EQ(train(tp2, kSaveAfter, dir.sub("tp2")), tail(straight_tp2))
      << "the same layout, bitwise";
  expect_within(train(one, kSaveAfter, dir.sub("tp2")), tail(straight_tp2), 1e-6,
                "tp=2 saved, tp=1 resumed");
  expect_within(train(tp2_alone, kSaveAfter, dir.sub("one")), tail(straight_one), 1e-6,
                "tp=1 saved, tp=2 resumed");

  // The files of a tp=2 save are a tp=1 save's: the same paths, tensor names, shapes and dtypes.
  const auto split = file_tensors(dir.sub("tp2")), whole = file_tensors(dir.sub("one"));
  ASSERT_EQ(split.size(), whole.size());
  for (const auto& [path, tensors] : whole) {
    ASSERT_TRUE(split.count(path)) << path;
    EXPECT_EQ(split.at(path), tensors) << path;
  }
}

TEST(Zero1Checkpoint, SavesTheOwnersStateAndResumesUnderZero0AndBackBitwise) {
  at::set_num_threads(1);
  TempDir dir;
  const Layout zero0{2, 1, 1, 0}, zero1{2, 1, 1, 1};
  const std::vector<double> straight = train(zero0, 0);
  train(zero1, 0, "", dir.sub("zero1"));
  train(zero0, 0, "", dir.sub("zero0"));

  EXPECT_EQ(train(zero0, kSaveAfter, dir.sub("zero1")), tail(straight))
      << "zero=1 saved, zero=0 resumed";
  EXPECT_EQ(train(zero1, kSaveAfter, dir.sub("zero0")), tail(straight))
      << "zero=0 saved, zero=1 resumed";
  EXPECT_EQ(train(zero1, kSaveAfter, dir.sub("zero1")), tail(straight))
      << "zero=1 saved and resumed";

  // Every parameter's optimizer state reached the files, as ZeRO-0 writes it.
  const auto sharded = file_contents(dir.sub("zero1"), "optimizer");
  const auto plain = file_contents(dir.sub("zero0"), "optimizer");
  ASSERT_EQ(sharded.size(), plain.size());
  EXPECT_GT(plain.size(), 0u);
  for (const auto& [key, value] : plain) {
    ASSERT_TRUE(sharded.count(key)) << key;
    EXPECT_TRUE(torch::equal(sharded.at(key), value)) << key;
  }
}

// ZeRO-2 and 3 checkpoints hold the same whole state: a ZeRO-3 save (its
// weights freed between steps, gathered for the save) resumes under ZeRO-0,
// 2 and 3, and a ZeRO-0 save under ZeRO-3, with the losses of the run that
// never stopped, bitwise; the optimizer files equal ZeRO-0's.
TEST(Zero3Checkpoint, ResumesAcrossZeroLevelsBitwise) {
  at::set_num_threads(1);
  TempDir dir;
  const Layout zero0{2, 1, 1, 0}, zero2{2, 1, 1, 2}, zero3{2, 1, 1, 3};
  const std::vector<double> straight = train(zero0, 0);
  train(zero3, 0, "", dir.sub("zero3"));
  train(zero0, 0, "", dir.sub("zero0"));
  EXPECT_EQ(train(zero0, kSaveAfter, dir.sub("zero3")), tail(straight))
      << "zero=3 saved, zero=0 resumed";
  EXPECT_EQ(train(zero2, kSaveAfter, dir.sub("zero3")), tail(straight))
      << "zero=3 saved, zero=2 resumed";
  EXPECT_EQ(train(zero3, kSaveAfter, dir.sub("zero0")), tail(straight))
      << "zero=0 saved, zero=3 resumed";
  EXPECT_EQ(train(zero3, kSaveAfter, dir.sub("zero3")), tail(straight))
      << "zero=3 saved and resumed";
  // Another layout: one process, and pp 2 under ZeRO-3 (float sums in another order).
  expect_within(train(Layout{}, kSaveAfter, dir.sub("zero3")), tail(straight), 1e-6,
                "(2,1,1) zero=3 saved, one process resumed");
  expect_within(train(Layout{2, 2, 1, 3}, kSaveAfter, dir.sub("zero3")), tail(straight), 1e-6,
                "(2,1,1) zero=3 saved, (2,2,1) zero=3 resumed");
  const auto sharded = file_contents(dir.sub("zero3"), "optimizer");
  const auto plain = file_contents(dir.sub("zero0"), "optimizer");
  ASSERT_EQ(sharded.size(), plain.size());
  for (const auto& [key, value] : plain) {
    ASSERT_TRUE(sharded.count(key)) << key;
    EXPECT_TRUE(torch::equal(sharded.at(key), value)) << key;
  }
}

TEST(Zero1Checkpoint, ASaveOfDataTimesTensorParallelZero1ResumesOnOneProcess) {
  at::set_num_threads(1);
  TempDir dir;
  const Layout grid{2, 1, 2, 1};
  const std::vector<double> straight = train(grid, 0);
  train(grid, 0, "", dir.path);
  expect_within(train(Layout{}, kSaveAfter, dir.path), tail(straight), 1e-6,
                "(2,1,2) zero=1 saved, one resumed");
  EXPECT_EQ(train(grid, kSaveAfter, dir.path), tail(straight)) << "the same layout, bitwise";
}

}  // namespace
}  // namespace baton
