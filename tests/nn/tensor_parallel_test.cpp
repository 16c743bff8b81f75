// Megatron's tensor-parallel MLP (column-parallel Linear, GELU, row-parallel
// Linear) and gpt block on t = 1, 2 and 4 ranks as threads against the same layers on one
// device: the output, the input gradient, and every rank's weight and bias
// gradients (its slice of the full ones) within 1e-5; an all-reduce each way
// through f and g, none for t = 1; a t that does not divide the features is
// refused naming both.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "baton/comm/local_group.h"
#include "baton/comm/rank_layout.h"
#include "baton/core/error.h"
#include "baton/nn/tensor_parallel.h"

namespace baton::nn {
namespace {

const auto kTimeout = std::chrono::seconds(30);

struct Reference {
  torch::nn::Linear first{nullptr}, second{nullptr};
  torch::Tensor x, y, grad_x;
};

// hidden 8 -> 32 (the 4h of a Transformer MLP) -> 8, on 6 tokens of a batch of 2.
Reference reference() {
  torch::manual_seed(3);
  Reference r;
  r.first = torch::nn::Linear(8, 32);
  r.second = torch::nn::Linear(32, 8);
  r.x = torch::randn({2, 3, 8}).requires_grad_(true);
  r.y = r.second(torch::gelu(r.first(r.x)));
  r.y.pow(2).sum().backward();
  r.grad_x = r.x.grad().clone();
  return r;
}

double relative(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(1e-12, b.norm().item<double>());
}

class TensorParallelMlp : public testing::TestWithParam<int> {};

TEST_P(TensorParallelMlp, EqualsOneDeviceInOutputAndEveryGradient) {
  const int t = GetParam();
  const Reference ref = reference();
  comm::run_local_group(t, kTimeout, [&](comm::Communicator& group) {
    const int k = group.rank();
    ColumnParallelLinear first(ref.first->weight, ref.first->bias, comm::borrow(group));
    RowParallelLinear second(ref.second->weight, ref.second->bias, comm::borrow(group));
    torch::Tensor x = ref.x.detach().clone().requires_grad_(true);
    torch::Tensor y = second(torch::gelu(first(x)));
    EXPECT_LT(relative(y, ref.y), 1e-5) << "tp rank " << k;
    y.pow(2).sum().backward();
    EXPECT_LT(relative(x.grad(), ref.grad_x), 1e-5) << "input gradient, tp rank " << k;
    const int64_t rows = 32 / t;
    EXPECT_LT(relative(first->weight.grad(), ref.first->weight.grad().narrow(0, k * rows, rows)),
              1e-5);
    EXPECT_LT(relative(first->bias.grad(), ref.first->bias.grad().narrow(0, k * rows, rows)), 1e-5);
    EXPECT_LT(relative(second->weight.grad(), ref.second->weight.grad().narrow(1, k * rows, rows)),
              1e-5);
    EXPECT_LT(relative(second->bias.grad(), ref.second->bias.grad()), 1e-5);
    // Each rank holds 1/t of the split weights.
    EXPECT_EQ(first->weight.numel(), 8 * 32 / t);
    EXPECT_EQ(second->weight.numel(), 8 * 32 / t);
  });
}

INSTANTIATE_TEST_SUITE_P(T, TensorParallelMlp, testing::Values(1, 2, 4));

// A gpt block (hidden 16, 4 heads) split over t = 1, 2, 4 ranks against the
// block on one device: output, input gradient, the LayerNorms' gradients
// (whole on every rank) and each rank's slices of the split weights.
class TensorParallelTransformerBlock : public testing::TestWithParam<int> {};

TEST_P(TensorParallelTransformerBlock, EqualsOneDeviceInOutputAndEveryGradient) {
  const int t = GetParam();
  torch::manual_seed(5);
  TransformerBlock full(16, 4);
  const torch::Tensor x0 = torch::randn({2, 5, 16});
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor y = full(x);
  y.pow(2).sum().backward();
  const int64_t slice = 16 / t;
  comm::run_local_group(t, kTimeout, [&](comm::Communicator& group) {
    const int k = group.rank();
    TensorParallelBlock block(full, comm::borrow(group));
    torch::Tensor xk = x0.clone().requires_grad_(true);
    torch::Tensor yk = block(xk);
    EXPECT_LT(relative(yk, y), 1e-5) << "tp rank " << k;
    yk.pow(2).sum().backward();
    EXPECT_LT(relative(xk.grad(), x.grad()), 1e-5) << "input gradient, tp rank " << k;
    EXPECT_LT(relative(block->ln1->weight.grad(), full->ln1->weight.grad()), 1e-5);
    EXPECT_LT(relative(block->ln2->bias.grad(), full->ln2->bias.grad()), 1e-5);
    // This rank's q, k and v rows of the fused projection.
    for (int part = 0; part < 3; ++part) {
      EXPECT_LT(relative(block->qkv->weight.grad().narrow(0, part * slice, slice),
                         full->qkv->weight.grad().narrow(0, part * 16 + k * slice, slice)),
                1e-5)
          << "qkv part " << part << " tp rank " << k;
    }
    EXPECT_LT(
        relative(block->proj->weight.grad(), full->proj->weight.grad().narrow(1, k * slice, slice)),
        1e-5);
    EXPECT_LT(relative(block->fc1->weight.grad(),
                       full->fc1->weight.grad().narrow(0, 4 * k * slice, 4 * slice)),
              1e-5);
    EXPECT_LT(relative(block->fc2->weight.grad(),
                       full->fc2->weight.grad().narrow(1, 4 * k * slice, 4 * slice)),
              1e-5);
    EXPECT_LT(relative(block->fc2->bias.grad(), full->fc2->bias.grad()), 1e-5);
  });
}

INSTANTIATE_TEST_SUITE_P(T, TensorParallelTransformerBlock, testing::Values(1, 2, 4));

// A llama block (hidden 16, 4 heads, SwiGLU of 64 units) split over t = 1, 2,
// 4 ranks against the block on one device, with a padding mask: output, input
// gradient, the RMSNorms' gradients and each rank's slices of the split
// weights; positions and mask pass through.
class TensorParallelLlamaBlockTest : public testing::TestWithParam<int> {};

TEST_P(TensorParallelLlamaBlockTest, EqualsOneDeviceInOutputAndEveryGradient) {
  const int t = GetParam();
  torch::manual_seed(6);
  LlamaBlock full(16, 4, 64);
  const torch::Tensor x0 = torch::randn({2, 5, 16});
  const torch::Tensor positions = torch::arange(5).expand({2, 5}).contiguous();
  const torch::Tensor mask = torch::rand({2, 5}) > 0.3;
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor y = full(Tensors{x, positions, mask})[0];
  y.pow(2).sum().backward();
  comm::run_local_group(t, kTimeout, [&](comm::Communicator& group) {
    const int k = group.rank();
    TensorParallelLlamaBlock block(full, comm::borrow(group));
    torch::Tensor xk = x0.clone().requires_grad_(true);
    const Tensors out = block(Tensors{xk, positions, mask});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(torch::equal(out[1], positions));
    EXPECT_TRUE(torch::equal(out[2], mask));
    EXPECT_LT(relative(out[0], y), 1e-5) << "tp rank " << k;
    out[0].pow(2).sum().backward();
    EXPECT_LT(relative(xk.grad(), x.grad()), 1e-5) << "input gradient, tp rank " << k;
    EXPECT_LT(relative(block->attention_norm->weight.grad(), full->attention_norm->weight.grad()),
              1e-5);
    EXPECT_LT(relative(block->ffn_norm->weight.grad(), full->ffn_norm->weight.grad()), 1e-5);
    auto rows = [&](const torch::Tensor& g) { return g.chunk(t, 0)[k]; };
    auto columns = [&](const torch::Tensor& g) { return g.chunk(t, 1)[k]; };
    EXPECT_LT(relative(block->wq->weight.grad(), rows(full->wq->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->wk->weight.grad(), rows(full->wk->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->wv->weight.grad(), rows(full->wv->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->wo->weight.grad(), columns(full->wo->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->gate->weight.grad(), rows(full->gate->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->up->weight.grad(), rows(full->up->weight.grad())), 1e-5);
    EXPECT_LT(relative(block->down->weight.grad(), columns(full->down->weight.grad())), 1e-5);
    EXPECT_EQ(block->gate->weight.numel(), 16 * 64 / t);
  });
}

INSTANTIATE_TEST_SUITE_P(T, TensorParallelLlamaBlockTest, testing::Values(1, 2, 4));

// The mlp's pair cut across two layers: the column layer's output is the
// whole width with only its slice filled, and the row layer, given that or
// the whole (what a stage boundary's gather gives), returns the one-device
// output; gradients as above.
class TensorParallelChainPair : public testing::TestWithParam<int> {};

TEST_P(TensorParallelChainPair, EqualsOneDeviceWhetherTheRowLayerGetsTheSliceOrTheWhole) {
  const int t = GetParam();
  torch::manual_seed(8);
  Chain first, second;
  first->push_back(Linear(8, 32));
  first->push_back(torch::nn::ReLU());
  second->push_back(Linear(32, 4));
  const torch::Tensor x0 = torch::randn({3, 8});
  torch::Tensor x = x0.clone().requires_grad_(true);
  const torch::Tensor hidden = first(x);
  const torch::Tensor y = second(hidden);
  y.pow(2).sum().backward();
  comm::run_local_group(t, kTimeout, [&](comm::Communicator& group) {
    const int k = group.rank();
    for (const bool gathered : {false, true}) {
      TensorParallelChain column(first, LinearCut::kColumn, comm::borrow(group));
      TensorParallelChain row(second, LinearCut::kRow, comm::borrow(group));
      torch::Tensor xk = x0.clone().requires_grad_(true);
      torch::Tensor padded = column(xk);
      ASSERT_EQ(padded.sizes(), hidden.sizes());
      const torch::Tensor outside =
          torch::ones({32}, torch::kBool)
              .index_fill_(0, torch::arange(k * 32 / t, (k + 1) * 32 / t), false);
      EXPECT_TRUE(torch::equal(padded.index({torch::indexing::Slice(), outside}),
                               torch::zeros({3, 32 - 32 / t})));
      // A stage boundary between the two gathers every rank's slice.
      if (gathered) padded = hidden.detach().clone();
      const torch::Tensor yk = row(padded);
      EXPECT_LT(relative(yk, y), 1e-5) << "tp rank " << k << " gathered " << gathered;
      if (gathered) continue;
      yk.pow(2).sum().backward();
      EXPECT_LT(relative(xk.grad(), x.grad()), 1e-5) << "input gradient, tp rank " << k;
      EXPECT_LT(relative(column->column->weight.grad(),
                         first->named_parameters()["0.weight"].grad().chunk(t, 0)[k]),
                1e-5);
      EXPECT_LT(relative(row->row->weight.grad(),
                         second->named_parameters()["0.weight"].grad().chunk(t, 1)[k]),
                1e-5);
      // The chain's parameter names stay the one-device chain's.
      EXPECT_TRUE(column->named_parameters().contains("0.weight"));
      EXPECT_TRUE(row->named_parameters().contains("0.bias"));
    }
  });
}

INSTANTIATE_TEST_SUITE_P(T, TensorParallelChainPair, testing::Values(1, 2, 4));

// What checkpoints rely on: gathering every split parameter of a block's t
// slices gives back the one-device block's parameters bitwise (the fused QKV
// rows in their [q; k; v] order), and take_slice of those gives each rank's
// slice bitwise; the unsplit ones (LayerNorms, the row-parallel biases) are
// not listed.
class TensorParallelSplits : public testing::TestWithParam<int> {};

TEST_P(TensorParallelSplits, GatherTheOneDeviceBlockBitwiseAndSliceItBack) {
  const int t = GetParam();
  torch::manual_seed(5);
  TransformerBlock full(16, 4);
  std::map<std::string, torch::Tensor> whole;
  for (const auto& item : full->named_parameters()) whole[item.key()] = item.value();
  comm::run_local_group(t, kTimeout, [&](comm::Communicator& group) {
    TensorParallelBlock block(full, comm::borrow(group));
    const std::map<std::string, TensorSplit> splits = tensor_parallel_splits(*block);
    std::vector<std::string> names;
    for (const auto& [name, split] : splits) names.push_back(name);
    EXPECT_EQ(names, (std::vector<std::string>{"fc1.bias", "fc1.weight", "fc2.weight",
                                               "proj.weight", "qkv.bias", "qkv.weight"}));
    std::vector<std::string> split_names;
    std::vector<torch::Tensor> slices;
    std::vector<TensorSplit> how;
    for (const auto& item : block->named_parameters()) {
      if (splits.count(item.key()) == 0) {
        EXPECT_TRUE(torch::equal(item.value(), whole.at(item.key()))) << item.key();
        continue;
      }
      split_names.push_back(item.key());
      slices.push_back(item.value());
      how.push_back(splits.at(item.key()));
      EXPECT_TRUE(
          torch::equal(take_slice(whole.at(item.key()), how.back(), group.rank(), t), item.value()))
          << item.key() << " on tp rank " << group.rank();
    }
    const std::vector<torch::Tensor> gathered =
        gather_slices(slices, how, group, "the test's gather");
    ASSERT_EQ(split_names.size(), names.size());
    for (size_t i = 0; i < split_names.size(); ++i) {
      EXPECT_TRUE(torch::equal(gathered[i], whole.at(split_names[i])))
          << split_names[i] << " on tp rank " << group.rank();
    }
  });
}

INSTANTIATE_TEST_SUITE_P(T, TensorParallelSplits, testing::Values(1, 2, 4));

TEST(TensorParallelSplits, ASliceThatDoesNotDivideIsRefusedNamingTheSizes) {
  try {
    take_slice(torch::zeros({9, 4}), TensorSplit{0, 3}, 0, 2);
    FAIL() << "3 blocks of 9 rows over tp=2 were accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), testing::HasSubstr(
                              "tp=2 does not divide the 3 block(s) of dimension 0 (9) of a tensor "
                              "of shape [9, 4]"));
  }
}

TEST(TensorParallelOperators, FSumsOnlyTheGradientAndGOnlyTheValue) {
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& group) {
    const double k = group.rank() + 1;  // 1 and 2
    torch::Tensor a = torch::full({3}, k).requires_grad_(true);
    torch::Tensor fa = copy_to_tensor_parallel(a, comm::borrow(group));
    EXPECT_TRUE(torch::equal(fa, a));
    (fa * k).sum().backward();
    EXPECT_TRUE(torch::allclose(a.grad(), torch::full({3}, 3.0)));  // 1 + 2
    torch::Tensor b = torch::full({3}, k).requires_grad_(true);
    torch::Tensor gb = reduce_from_tensor_parallel(b, comm::borrow(group));
    EXPECT_TRUE(torch::allclose(gb, torch::full({3}, 3.0)));
    (gb * k).sum().backward();
    EXPECT_TRUE(torch::allclose(b.grad(), torch::full({3}, k)));
  });
}

TEST(TensorParallelErrors, ATpThatDoesNotDivideTheFeaturesIsRefused) {
  // Each refusal on every rank of a group of the tp size.
  std::vector<std::string> blocks(3), columns(4), rows(3);
  comm::run_local_group(3, kTimeout, [&](comm::Communicator& group) {
    try {
      TensorParallelBlock(TransformerBlock(16, 4), comm::borrow(group));
    } catch (const Error& e) {
      blocks[group.rank()] = e.what();
    }
    torch::nn::Linear full(8, 30);
    try {
      RowParallelLinear(full->weight, full->bias, comm::borrow(group));
    } catch (const Error& e) {
      rows[group.rank()] = e.what();
    }
  });
  comm::run_local_group(4, kTimeout, [&](comm::Communicator& group) {
    torch::nn::Linear full(8, 30);
    try {
      ColumnParallelLinear(full->weight, full->bias, comm::borrow(group));
    } catch (const Error& e) {
      columns[group.rank()] = e.what();
    }
  });
  for (const auto& m : blocks) EXPECT_THAT(m, testing::HasSubstr("tp=3 must divide the heads (4)"));
  for (const auto& m : columns)
    EXPECT_THAT(m, testing::HasSubstr("tp=4 must divide the output features (30)"));
  for (const auto& m : rows)
    EXPECT_THAT(m, testing::HasSubstr("tp=3 must divide the input features (8)"));
}

}  // namespace
}  // namespace baton::nn
