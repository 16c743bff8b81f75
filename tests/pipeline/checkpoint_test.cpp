// Pipeline::save / Pipeline::load: a checkpoint saved on 2 ranks loads on 1
// with the same parameters and optimizer state; training continues bitwise
// as if never stopped; re-saving a step writes a new folder and keeps the
// newest two; nothing baton did not write is removed; another model (tied
// weights included), a missing or truncated file, another optimizer get a
// baton::Error naming the file and the mismatch.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/pipeline/checkpoint.h"
#include "baton/pipeline/optimizer_state.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
const auto kTimeout = std::chrono::seconds(30);

struct TempDir {
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "baton_checkpoint_XXXXXX").string();
    path = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path); }
  std::string path;
};

nn::ModelSpec model(int hidden = 16) {
  return nn::mlp(/*layers=*/4, hidden, /*in=*/8, /*classes=*/4);
}

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(100 + step);
  return {torch::randn({8, 8}, gen), torch::randint(0, 4, {8}, gen, torch::kLong)};
}

double train_step(Pipeline& pipe, torch::optim::Optimizer& optimizer, int step) {
  auto [x, y] = batch(step);
  optimizer.zero_grad();
  const double loss = pipe.step(x, y);
  optimizer.step();
  return loss;
}

std::map<std::string, torch::Tensor> snapshot(Pipeline& pipe, torch::optim::Optimizer& optimizer) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, p] : pipe.named_parameters()) {
    out[name] = p.detach().clone();
    for (auto& [key, value] : checkpoint::optimizer_state_of(optimizer, p))
      out[name + "." + key] = value.clone();
  }
  return out;
}

void expect_equal(const std::map<std::string, torch::Tensor>& a,
                  const std::map<std::string, torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, value] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(torch::equal(value, b.at(name))) << name;
  }
}

TEST(Checkpoint, SavedOnTwoRanksLoadsOnOneWithTheSameParametersAndAdamState) {
  at::set_num_threads(1);
  TempDir dir;
  std::map<std::string, torch::Tensor> saved;
  std::mutex mutex;
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(model(), {}, PipelineOptions().microbatches(2).communicator(comm));
    torch::optim::Adam adam(pipe.parameters(), torch::optim::AdamOptions(0.01));
    for (int step = 0; step < 2; ++step) train_step(pipe, adam, step);
    pipe.save(dir.path, &adam, {{"note", "two ranks"}});
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [name, value] : snapshot(pipe, adam)) saved[name] = value;
  });
  Pipeline one(model(), {}, PipelineOptions().microbatches(2).seed(7));
  torch::optim::Adam adam(one.parameters(), torch::optim::AdamOptions(0.5));
  const nlohmann::json extra = one.load(dir.path, &adam);
  EXPECT_EQ(extra.value("note", ""), "two ranks");
  EXPECT_EQ(one.steps(), 2);
  EXPECT_EQ(adam.param_groups()[0].options().get_lr(), 0.01);
  expect_equal(snapshot(one, adam), saved);
}

// torch::nn::Linear, not baton's: LibTorch 1.13's SGD updates p.data(), which
// leaves the weight's version counter alone, so baton::nn::Linear's cached
// W^T would go stale in the uninterrupted run (a separate bug).
torch::nn::Sequential sequential() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                               torch::nn::Linear(16, 16), torch::nn::Tanh(),
                               torch::nn::Linear(16, 4));
}

torch::Tensor cross_entropy(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

TEST(Checkpoint, ResumedSgdWithMomentumTakesBitwiseTheStepsOfAnUninterruptedRun) {
  at::set_num_threads(1);
  TempDir dir;
  auto sgd_options = torch::optim::SGDOptions(0.1).momentum(0.9);
  Pipeline straight(sequential(), cross_entropy, PipelineOptions().microbatches(2));
  torch::optim::SGD sgd(straight.parameters(), sgd_options);
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    losses.push_back(train_step(straight, sgd, step));
    if (step == 1) straight.save(dir.path, &sgd);
  }
  torch::manual_seed(5);  // other initial weights: the checkpoint must replace them
  Pipeline resumed(
      torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 16),
                            torch::nn::Tanh(), torch::nn::Linear(16, 4)),
      cross_entropy, PipelineOptions().microbatches(2).schedule("gpipe"));
  torch::optim::SGD sgd2(resumed.parameters(), sgd_options);
  resumed.load(dir.path, &sgd2);
  for (int step = 2; step < 4; ++step)
    EXPECT_EQ(train_step(resumed, sgd2, step), losses[step]) << step;
}

TEST(Checkpoint, ResavingAStepWritesANewFolderAndKeepsTheNewestTwo) {
  TempDir dir;
  Pipeline pipe(model(), {}, PipelineOptions().microbatches(2));
  torch::optim::Adam adam(pipe.parameters());
  train_step(pipe, adam, 0);
  pipe.save(dir.path, &adam);
  EXPECT_EQ(checkpoint::check(dir.path)["folder"], "step_00000001");
  pipe.save(dir.path, &adam);
  EXPECT_EQ(checkpoint::check(dir.path)["folder"], "step_00000001-1");
  EXPECT_EQ(checkpoint::check(dir.path)["kept"],
            nlohmann::json({"step_00000001-1", "step_00000001"}));
  pipe.save(dir.path, &adam);
  EXPECT_EQ(checkpoint::check(dir.path)["folder"], "step_00000001-2");
  EXPECT_FALSE(fs::exists(fs::path(dir.path) / "step_00000001"));
  // Each kept step folder is a checkpoint of its own.
  EXPECT_NO_THROW(pipe.load((fs::path(dir.path) / "step_00000001-1").string(), &adam));
  EXPECT_NO_THROW(pipe.load(dir.path, &adam));
}

TEST(Checkpoint, SavingRemovesOnlyTheStepFoldersItsManifestListsBeyondKeepLast) {
  TempDir dir;
  Pipeline pipe(model(), {}, PipelineOptions().microbatches(2));
  torch::optim::Adam adam(pipe.parameters());
  SaveOptions keep_one;
  keep_one.keep_last = 1;
  train_step(pipe, adam, 0);
  pipe.save(dir.path, &adam, nlohmann::json::object(), keep_one);
  // A user's folder named like a step, and a file, beside baton's.
  fs::create_directory(fs::path(dir.path) / "step_00000009");
  std::ofstream(fs::path(dir.path) / "step_00000009" / "photo.jpg") << "mine";
  std::ofstream(fs::path(dir.path) / "notes.txt") << "mine";
  SaveOptions protect_first = keep_one;
  protect_first.protect.push_back((fs::path(dir.path) / "step_00000001").string());
  train_step(pipe, adam, 1);
  pipe.save(dir.path, &adam, nlohmann::json::object(), protect_first);  // step 2
  EXPECT_TRUE(fs::exists(fs::path(dir.path) / "step_00000001"));        // protected
  train_step(pipe, adam, 2);
  pipe.save(dir.path, &adam, nlohmann::json::object(), keep_one);  // step 3
  EXPECT_FALSE(fs::exists(fs::path(dir.path) / "step_00000001"));
  EXPECT_FALSE(fs::exists(fs::path(dir.path) / "step_00000002"));
  EXPECT_TRUE(fs::exists(fs::path(dir.path) / "step_00000003"));
  EXPECT_TRUE(fs::exists(fs::path(dir.path) / "step_00000009" / "photo.jpg"));
  EXPECT_TRUE(fs::exists(fs::path(dir.path) / "notes.txt"));
}

TEST(Checkpoint, SaveRefusesAFolderThatHoldsNoBatonCheckpointAndChangesNothing) {
  TempDir dir;
  std::ofstream(fs::path(dir.path) / "manifest.json") << "{\"mine\": 1}";
  fs::create_directory(fs::path(dir.path) / "step_photos");
  Pipeline pipe(model(), {}, PipelineOptions().microbatches(2));
  try {
    pipe.save(dir.path);
    FAIL() << "saved into a folder that is not baton's";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not a baton checkpoint's, so baton will not write there"));
  }
  std::ifstream in(fs::path(dir.path) / "manifest.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "{\"mine\": 1}");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 2);
}

TEST(Checkpoint, ASaveThatCannotWriteRemovesItsFilesAndLeavesThePreviousOneLoadable) {
  TempDir dir;
  Pipeline pipe(model(), {}, PipelineOptions().microbatches(2));
  torch::optim::Adam adam(pipe.parameters());
  train_step(pipe, adam, 0);
  pipe.save(dir.path, &adam);
  train_step(pipe, adam, 1);
  // A file size limit, as a full disk: writes past 200 bytes fail with EFBIG.
  struct rlimit old_limit {};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  struct rlimit small = old_limit;
  small.rlim_cur = 200;
  void (*old_handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &small);
  std::string error;
  try {
    pipe.save(dir.path, &adam);
  } catch (const Error& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(error, HasSubstr("cannot write"));
  EXPECT_EQ(checkpoint::check(dir.path)["step"], 1);
  EXPECT_FALSE(fs::exists(fs::path(dir.path) / "step_00000002"));
  const fs::path partial = fs::path(dir.path) / "step_00000002.partial";
  EXPECT_TRUE(!fs::exists(partial) || fs::is_empty(partial)) << "the failed save left files";
  pipe.save(dir.path, &adam);  // the next save clears what the failed one left
  EXPECT_FALSE(fs::exists(partial));
  EXPECT_EQ(checkpoint::check(dir.path)["step"], 2);
}

TEST(Checkpoint, AModelWithOtherTiedWeightsDoesNotLoad) {
  TempDir dir;
  nn::ModelSpec untied =
      nn::make_model("gpt", nn::ModelOptions().layers(1).hidden(16).heads(2).context(4).vocab(32));
  nn::ModelSpec tied = nn::make_model(
      "gpt",
      nn::ModelOptions().layers(1).hidden(16).heads(2).context(4).vocab(32).tie_embeddings(true));
  ASSERT_FALSE(tied.tied.empty());
  Pipeline(untied, {}, PipelineOptions().microbatches(1)).save(dir.path);
  Pipeline pipe(tied, {}, PipelineOptions().microbatches(1));
  try {
    pipe.load(dir.path);
    FAIL() << "an untied checkpoint loaded into a tied model";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds a model whose tied weights are [] but this model ties"));
  }
}

std::string load_error(const std::string& dir, const nn::ModelSpec& spec, bool sgd = false) {
  Pipeline pipe(spec, {}, PipelineOptions().microbatches(2));
  torch::optim::Adam adam(pipe.parameters());
  torch::optim::SGD sgd_optimizer(pipe.parameters(), torch::optim::SGDOptions(0.1));
  try {
    pipe.load(dir, sgd ? static_cast<torch::optim::Optimizer*>(&sgd_optimizer) : &adam);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Checkpoint, RefusesAnotherModelAMissingOrTruncatedFileAndAnotherOptimizer) {
  TempDir dir;
  {
    Pipeline pipe(model(), {}, PipelineOptions().microbatches(2));
    torch::optim::Adam adam(pipe.parameters());
    train_step(pipe, adam, 0);
    pipe.save(dir.path, &adam);
  }
  const std::string folder = (fs::path(dir.path) / "step_00000001").string();
  EXPECT_THAT(
      load_error(dir.path, model(32)),
      HasSubstr("file " + folder +
                "/layer_00000.pt: layer 0 \"0.weight\" is {\"dtype\":\"float32\","
                "\"shape\":[16,8]} in the checkpoint but {\"dtype\":\"float32\",\"shape\":[32,8]} "
                "in the model"));
  EXPECT_THAT(
      load_error(dir.path, nn::mlp(6, 16, 8, 4)),
      HasSubstr("holds model \"mlp\" with 4 layers but this is model \"mlp\" with 6 layers"));
  EXPECT_THAT(load_error(dir.path, model(), /*sgd=*/true),
              HasSubstr("holds the state of a adam optimizer, not of sgd"));

  const std::string layer = folder + "/layer_00002.pt";
  {  // One flipped byte, size unchanged: the CRC-32 names it before LibTorch parses it.
    std::fstream file(layer, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(40);
    char byte = 0;
    file.read(&byte, 1);
    file.seekp(40);
    byte = static_cast<char>(byte ^ 0x01);
    file.write(&byte, 1);
  }
  EXPECT_THAT(load_error(dir.path, model()),
              HasSubstr("file " + layer + " (" + std::to_string(fs::file_size(layer)) +
                        " bytes) is corrupt: its CRC-32 is"));
  fs::resize_file(layer, 100);
  EXPECT_THAT(load_error(dir.path, model()), HasSubstr("file " + layer + " has 100 bytes but"));
  fs::remove(layer);
  EXPECT_THAT(load_error(dir.path, model()), HasSubstr("file " + layer + " is missing"));
  fs::remove(fs::path(dir.path) / "manifest.json");
  EXPECT_THAT(load_error(dir.path, model()), HasSubstr("manifest.json is missing"));
}

}  // namespace
}  // namespace baton
