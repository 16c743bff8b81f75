// plan/profile_memory.h: the measured memory a profile carries reads back as
// written, a missing field is named, and each rank's prediction holds its own
// layers' state (hand sums over the uniform cut) and as many stashes as its
// schedule keeps (GPipe's m against 1F1B's p, the papers' ordering).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "baton/plan/profile_memory.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"

namespace baton::plan {
namespace {

using testing::HasSubstr;

// Five layers, layer i keeping 1000 (i + 1) bytes of graph over input and
// output of 100 bytes each, with 10 000 (i + 1) parameter bytes, the largest
// tensor half of them; Adam's two moments.
ProfiledMemory five_layers() {
  ProfiledMemory m;
  for (int i = 0; i < 5; ++i) {
    sim::LayerMemory l;
    l.graph_bytes = 1000.0 * (i + 1);
    l.input_bytes = l.output_bytes = 100;
    l.forward_extra = 10;
    l.backward_extra = 20;
    m.model.layers.push_back(l);
    m.parameter_bytes.push_back(10000.0 * (i + 1));
    m.largest_parameter_bytes.push_back(5000.0 * (i + 1));
  }
  m.model.loss.graph_bytes = 50;
  m.model.microbatch = 4;
  m.optimizer_state_per_parameter_byte = 2;
  return m;
}

schedule::Schedule lowered(const char* name, int p, int m) {
  return schedule::lower(
      schedule::generate(name, schedule::GeneratorOptions().set_ranks(p).set_microbatches(m)));
}

TEST(ProfiledMemory, ReadsBackAsWritten) {
  ProfiledMemory m = five_layers();
  m.model.stage_inputs = {m.model.layers[0], m.model.layers[1]};
  m.model.layers[2].keeps_input = true;
  m.model.layers[3].weight_stash_bytes = 77;
  m.model.layers[3].weight_stash_output_gradient_bytes = 11;
  m.model.layers[3].input_backward_extra = 33;
  m.model.layers[3].input_backward_peak_bytes = 44;
  m.model.layers[3].cast_gradient_bytes = 55;
  m.gradients_freed = true;
  m.sends_copied_up_to = 262144;
  m.receives_on_arrival_up_to = 65535;
  const ProfiledMemory back = parse_profiled_memory(profiled_memory_json(m), "p.json");
  ASSERT_EQ(back.model.layers.size(), 5u);
  EXPECT_EQ(back.model.stage_inputs.size(), 2u);
  EXPECT_TRUE(back.model.layers[2].keeps_input);
  EXPECT_FALSE(back.model.layers[2].keeps_output);
  EXPECT_EQ(back.model.layers[3].weight_stash_bytes, 77);
  EXPECT_EQ(back.model.layers[3].weight_stash_output_gradient_bytes, 11);
  EXPECT_EQ(back.model.layers[3].input_backward_extra, 33);
  EXPECT_EQ(back.model.layers[3].input_backward_peak_bytes, 44);
  EXPECT_EQ(back.model.layers[3].cast_gradient_bytes, 55);
  // A layer without I figures is written with its B's.
  EXPECT_EQ(back.model.layers[0].input_backward_extra, 20);
  EXPECT_EQ(back.model.layers[0].input_backward_peak_bytes, 0);
  EXPECT_EQ(back.model.layers[4].graph_bytes, 5000);
  EXPECT_EQ(back.model.loss.graph_bytes, 50);
  EXPECT_EQ(back.largest_parameter_bytes, m.largest_parameter_bytes);
  EXPECT_TRUE(back.gradients_freed);
  EXPECT_EQ(back.sends_copied_up_to, 262144);
  EXPECT_EQ(back.receives_on_arrival_up_to, 65535);
  EXPECT_EQ(back.optimizer_state_per_parameter_byte, 2);
  // A profile written before receives_on_arrival_up_to existed: 0 (every
  // message held all step, as the model read it then).
  nlohmann::json older = profiled_memory_json(m);
  older.erase("receives_on_arrival_up_to");
  EXPECT_EQ(parse_profiled_memory(older, "p.json").receives_on_arrival_up_to, 0);
}

TEST(ProfiledMemory, AMissingFieldIsNamed) {
  nlohmann::json json = profiled_memory_json(five_layers());
  json["layers"][3].erase("backward_extra");
  try {
    parse_profiled_memory(json, "p.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("p.json: layers[3] has no number \"backward_extra\""));
  }
  // A profile written before the I figures were measured says how to mend it.
  json = profiled_memory_json(five_layers());
  json["loss"].erase("input_backward_extra");
  try {
    parse_profiled_memory(json, "p.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the loss has no number \"input_backward_extra\" (write the "
                                    "profile again with baton train --profile-out)"));
  }
  json = profiled_memory_json(five_layers());
  json["largest_parameter_bytes"].erase(0);
  EXPECT_THROW(parse_profiled_memory(json, "p.json"), Error);
}

// The categories are the peak's (sim::MemoryPrediction): with Adam the peak
// is the optimizer's step, its two moments and temporaries the size of the
// largest parameter tensor twice on top of the state, and the receive buffers
// the transport still holds.
TEST(ProfiledMemory, EachRankHoldsItsOwnLayersState) {
  // 5 layers over 2 stages: layers 0-2 (60 000 parameter bytes, the largest
  // tensor 15 000), 3-4 (90 000, the largest 25 000).
  const std::vector<sim::MemoryPrediction> ranks =
      profiled_rank_memory(five_layers(), lowered("1f1b", 2, 4));
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].parameters, 60000);
  EXPECT_EQ(ranks[1].parameters, 90000);
  EXPECT_EQ(ranks[0].gradients, 60000);
  EXPECT_EQ(ranks[0].optimizer, 2 * 60000 + 2 * 15000);
  EXPECT_EQ(ranks[1].optimizer, 2 * 90000 + 2 * 25000);
  // Plus the four posted receives' buffers (100 bytes each, one per
  // micro-batch's tag): the transport keeps them through the optimizer's step
  // for the next step's messages (comm/buffer_cache.h).
  EXPECT_EQ(ranks[1].peak, 90000 + 90000 + 2 * 90000 + 2 * 25000 + 4 * 100);
  EXPECT_EQ(ranks[1].buffers, 4 * 100);
}

// With SGD (no state) the peak is the activations': rank 0's stage (layers
// 0-2) keeps 6000 bytes of graph a micro-batch and its output (100) until the B.
TEST(ProfiledMemory, GPipeKeepsEveryMicrobatchWhere1F1BKeepsP) {
  ProfiledMemory sgd = five_layers();
  sgd.optimizer_state_per_parameter_byte = 0;
  const auto gpipe = profiled_rank_memory(sgd, lowered("gpipe", 2, 8));
  const auto one_f_one_b = profiled_rank_memory(sgd, lowered("1f1b", 2, 8));
  EXPECT_GE(gpipe[0].activations, 8 * 6100.0);
  EXPECT_GE(one_f_one_b[0].activations, 2 * 6100.0);
  EXPECT_LT(one_f_one_b[0].activations, 3 * 6100.0);
  EXPECT_EQ(gpipe[0].optimizer, 0);
}

// A given cut and recomputation are the ones walked (the launcher's
// --max-memory-gb check passes the plan's): cut 1,4 puts layer 0 alone on
// rank 0; recomputing every micro-batch keeps each micro-batch's output (100)
// from F to B, and the B rebuilds the rest of one stash for a moment: layer
// 0's graph (1000; its output is sent, so the stash is 1100).
TEST(ProfiledMemory, AGivenCutAndRecomputationAreWalked) {
  ProfiledMemory sgd = five_layers();
  sgd.optimizer_state_per_parameter_byte = 0;
  const schedule::Schedule gpipe = lowered("gpipe", 2, 8);
  const auto cut = profiled_rank_memory(sgd, gpipe, partition::Partition({1, 4}));
  EXPECT_EQ(cut[0].parameters, 10000);
  EXPECT_EQ(cut[1].parameters, 140000);
  const auto recomputed =
      profiled_rank_memory(sgd, gpipe, partition::Partition({1, 4}), std::vector<bool>(8, true));
  EXPECT_EQ(recomputed[0].parameters, 10000);
  EXPECT_DOUBLE_EQ(recomputed[0].activations, 8 * 100 + 1000);
  EXPECT_LT(recomputed[0].peak, cut[0].peak);
  EXPECT_THAT(
      [&] {
        profiled_rank_memory(sgd, gpipe, partition::Partition({1, 3}));
      },
      testing::ThrowsMessage<Error>(HasSubstr("the cut 1,3 is not 5 layers in 2 stages")));
}

// One replica of dp 2 (the runtime's shards, runtime/zero.h): without ZeRO
// it holds what one pipeline does; under ZeRO-1 its Adam state is its half
// of the parameters', and the peak is the step's end, where the gradient
// shards (half) are cut beside the whole gradients: rank 0 holds 60 000 of
// parameters, 60 000 + 30 000 of gradients and 60 000 of state (its
// messages, a few hundred bytes, beside them); rank 1's gradients also hold
// the 4 input gradients it sent (100 bytes each) to the step's end. Under
// ZeRO-3 its parameters rest as the half shard and are gathered whole
// beside it at the peak.
TEST(ProfiledMemory, AReplicaHoldsItsShardsUnderZero) {
  const schedule::Schedule one_f_one_b = lowered("1f1b", 2, 4);
  const auto whole = profiled_rank_memory(five_layers(), one_f_one_b);
  const auto dp = profiled_rank_memory(five_layers(), one_f_one_b, std::nullopt, {}, {2, 0});
  const auto zero1 = profiled_rank_memory(five_layers(), one_f_one_b, std::nullopt, {}, {2, 1});
  const auto zero3 = profiled_rank_memory(five_layers(), one_f_one_b, std::nullopt, {}, {2, 3});
  const double parameters[] = {60000, 90000};
  for (int r = 0; r < 2; ++r) {
    const double p = parameters[r];
    EXPECT_EQ(dp[r].peak, whole[r].peak) << r;
    EXPECT_EQ(zero1[r].parameters, p) << r;
    EXPECT_EQ(zero1[r].gradients, p + p / 2 + (r == 1 ? 4 * 100 : 0)) << r;
    EXPECT_EQ(zero1[r].optimizer, 2 * p / 2) << r;
    EXPECT_GE(zero1[r].peak, p + 1.5 * p + p) << r;
    EXPECT_LE(zero1[r].peak, p + 1.5 * p + p + 1000) << r;
    EXPECT_LT(zero1[r].peak, whole[r].peak) << r;
    EXPECT_EQ(zero3[r].parameters, p + p / 2) << r;
    EXPECT_DOUBLE_EQ(zero3[r].peak, zero1[r].peak + p / 2) << r;
  }
}

TEST(ProfiledMemory, MoreStagesThanLayersAreRefused) {
  EXPECT_THAT([] { profiled_rank_memory(five_layers(), lowered("interleaved", 4, 8)); },
              testing::ThrowsMessage<Error>(HasSubstr("8 stages but the profiled model has 5")));
}

}  // namespace
}  // namespace baton::plan
