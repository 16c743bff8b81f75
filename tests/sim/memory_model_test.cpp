// The activation model (sim/memory_model.h) against hand counts: a stage's
// stash from its layers' measured graphs, and a rank's peak walked through
// 1F1B and GPipe orders with sends held to the step's end, or copied out at
// the send, and receives posted at the step's start, or held from arrival.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "baton/schedule/text_format.h"
#include "baton/sim/memory_model.h"

namespace baton::sim {
namespace {

LayerMemory layer(double graph, bool keeps_in, bool keeps_out, double in, double out,
                  double backward_extra = 0) {
  LayerMemory l;
  l.graph_bytes = graph;
  l.keeps_input = keeps_in;
  l.keeps_output = keeps_out;
  l.input_bytes = in;
  l.output_bytes = out;
  l.backward_extra = backward_extra;
  return l;
}

TEST(MemoryModel, AStageCountsEachSavedBoundaryOnceAndItsOutputUntilTheBackward) {
  ModelMemory m;
  // Layer 0 saves its input (4) and output (8); layer 1 saves its input (the
  // same 8) and an intermediate of 16; layer 2 saves nothing of its own.
  m.layers = {layer(4 + 8, true, true, 4, 8), layer(8 + 16, true, false, 8, 2, 5),
              layer(0, false, false, 2, 3, 7)};
  m.loss = layer(6, false, false, 3, 1, 9);
  const StageMemory first = stage_memory(m, 0, 2, /*last=*/false);
  // 12 + 24 - 8 (the boundary both saved) - 4 (the input, held outside) + 2 (the output).
  EXPECT_DOUBLE_EQ(first.stash, 26);
  EXPECT_DOUBLE_EQ(first.input_bytes, 4);
  EXPECT_DOUBLE_EQ(first.output_bytes, 2);
  EXPECT_DOUBLE_EQ(first.backward_extra, 5);
  const StageMemory last = stage_memory(m, 2, 3, /*last=*/true);
  // Nothing of layer 2's; the loss's 6; no output held (the loss is a scalar).
  EXPECT_DOUBLE_EQ(last.stash, 6);
  EXPECT_DOUBLE_EQ(last.output_bytes, 0);
  EXPECT_DOUBLE_EQ(last.backward_extra, 9);
}

// Each layer's share of what a stage keeps: the stash of layers 0..i less
// that of 0..i-1, so that a stage's layers sum to its stash.
TEST(MemoryModel, EachLayersKeptBytesSumToTheStagesStash) {
  ModelMemory m;
  m.layers = {layer(4 + 8, true, true, 4, 8), layer(8 + 16, true, false, 8, 2, 5),
              layer(0, false, false, 2, 3, 7)};
  m.loss = layer(6, false, false, 3, 1, 9);
  const std::vector<double> kept = layer_kept_bytes(m);
  ASSERT_EQ(kept.size(), 3u);
  // Layer 0: its graph (12, its output of 8 among it, held until the B)
  // less its input (4, held outside): 8. Layer 1: the stash of 0..1 (26,
  // the test above) less 8.
  EXPECT_DOUBLE_EQ(kept[0], 8);
  EXPECT_DOUBLE_EQ(kept[1], 18);
  // The last with the loss's graph (6): the whole model's stash.
  EXPECT_DOUBLE_EQ(kept[0] + kept[1] + kept[2], stage_memory(m, 0, 3, true).stash);
  for (double k : kept) EXPECT_GE(k, 0);
}

// A stage that starts at layer i > 0 runs it on its input as received (in
// the compute dtype): its figures replace layer i's there, and only there.
TEST(MemoryModel, ALaterStagesFirstLayerTakesItsFiguresOnTheReceivedInput) {
  ModelMemory m;
  m.layers = {layer(4, false, false, 4, 8), layer(10, false, false, 8, 8, 5),
              layer(20, false, false, 8, 2, 7)};
  m.layers[1].backward_peak_bytes = 40;
  // Layer 1 on a bf16 input keeps an fp32 copy of it (16 more) and works harder.
  m.stage_inputs = m.layers;
  m.stage_inputs[1] = layer(26, false, false, 4, 8, 11);
  m.stage_inputs[1].backward_peak_bytes = 60;
  const StageMemory later = stage_memory(m, 1, 3, /*last=*/false);
  EXPECT_DOUBLE_EQ(later.stash, 26 + 20 + 2);  // + the output held until the B
  // Layer 1's backward, once layer 2 has freed its 20: 60 beside the held
  // output (2), against the 48 held at the B's start.
  EXPECT_DOUBLE_EQ(later.backward_extra + later.backward_freed, 60 + 2 - 48);
  EXPECT_DOUBLE_EQ(later.backward_freed, -20);
  // Inside a stage layer 1 is its chained self: 40 beside layer 0's graph (4).
  const StageMemory whole = stage_memory(m, 0, 3, /*last=*/false);
  EXPECT_DOUBLE_EQ(whole.stash, 4 + 10 + 20 + 2);
  EXPECT_DOUBLE_EQ(whole.backward_extra + whole.backward_freed, 4 + 40 + 2 - 36);
  // Without the received figures (fp32), layer 1 as chained.
  m.stage_inputs.clear();
  EXPECT_DOUBLE_EQ(stage_memory(m, 1, 3, false).stash, 10 + 20 + 2);
}

// A B runs its layers last to first, each freeing its graph once done: an
// earlier layer's backward peaks beside the graphs before it and its own,
// not the whole stash (the cnn's conv peaks once the pooling after it has
// let go of its indices). The stage's last layer runs on the whole stash
// with the gradient it received; the last stage's loss likewise.
TEST(MemoryModel, AnEarlierLayersBackwardPeaksOnceTheLaterGraphsAreFreed) {
  ModelMemory m;
  // Layer 0 keeps its input (4) and its output (8), which layer 1 keeps too;
  // layer 1 keeps 30 more. Layer 0's backward holds its 12, the gradient
  // coming in (8) and its temporaries (20): 40 at its peak.
  m.layers = {layer(4 + 8, true, true, 4, 8), layer(8 + 30, true, false, 8, 2, 3)};
  m.layers[0].backward_peak_bytes = 40;
  m.loss = layer(5, false, false, 2, 1, 6);
  const StageMemory s = stage_memory(m, 0, 2, /*last=*/false);
  // 12 + 38 - 8 (shared) - 4 (the input, outside) + 2 (the output held) = 40.
  EXPECT_DOUBLE_EQ(s.stash, 40);
  // Layer 0: 40 less its input (outside) beside the output held (2) is 38,
  // under the 40 held at the start; layer 1's 3 on the whole stash wins.
  EXPECT_DOUBLE_EQ(s.backward_extra, 3);
  EXPECT_DOUBLE_EQ(s.backward_freed, 0);
  // Layer 0 working harder: 60 at its peak, so 60 - 4 + 2 = 58, 18 above the
  // start, once layer 1's 30 of its own are freed.
  m.layers[0].backward_peak_bytes = 60;
  const StageMemory harder = stage_memory(m, 0, 2, /*last=*/false);
  EXPECT_DOUBLE_EQ(harder.backward_extra + harder.backward_freed, 18);
  EXPECT_DOUBLE_EQ(harder.backward_freed, -30);
  // As the last stage, the loss's graph (5) is freed too before layer 1's B.
  m.layers[1].backward_peak_bytes = 38 + 2 + 50;
  const StageMemory last = stage_memory(m, 0, 2, /*last=*/true);
  EXPECT_DOUBLE_EQ(last.stash, 12 + 38 - 8 - 4 + 5);
  // Layer 1: layer 0's 12 (less the shared 8: in layer 1's figure) and 90,
  // less the input (4): 90, against the 43 held at the start.
  EXPECT_DOUBLE_EQ(last.backward_extra + last.backward_freed, 4 + 90 - 4 - 43);
  EXPECT_DOUBLE_EQ(last.backward_freed, -5);
}

// 1F1B on two ranks, three micro-batches: stage 0 keeps 100 and sends 10,
// stage 1 keeps 50 and sends back 10; weights, gradients 1000, Adam 2000.
struct TwoStages {
  schedule::Schedule s = schedule::parse_schedule(
      "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0RECV_B2 0B2\n"
      "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 1SEND_B2\n");
  StageMemory s0, s1;
  StaticMemory fixed;
  TwoStages() {
    s0.stash = 100, s0.output_bytes = 10, s0.input_bytes = 0, s0.backward_extra = 5;
    s1.stash = 50, s1.input_bytes = 10, s1.backward_extra = 20;
    fixed.parameters = 1000, fixed.gradients = 1000, fixed.optimizer = 2000;
  }
};

TEST(MemoryModel, OneFOneBHoldsPStashesAndTheSentOutputsUntilTheStepEnds) {
  TwoStages t;
  const auto& [s, s0, s1] = std::tie(t.s, t.s0, t.s1);
  StaticMemory& fixed = t.fixed;
  const std::vector<bool> none(3, false);
  // Rank 0: 3 gradient buffers of 10 posted at the start and held to the
  // end. At B1: the stashes of micro-batches 1 and 2 (200), micro-batch 0's
  // sent output (10), the buffers (30), the B's 5.
  const MemoryPrediction r0 = predict_rank_memory(s, 0, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r0.activations, 210);
  EXPECT_DOUBLE_EQ(r0.buffers, 30);
  EXPECT_DOUBLE_EQ(r0.gradients, 1005);
  EXPECT_DOUBLE_EQ(r0.peak, 1000 + 1005 + 2000 + 210 + 30);
  // Rank 1: one stash at a time; at B2: two sent input gradients of 10 and
  // the B's 20.
  const MemoryPrediction r1 = predict_rank_memory(s, 1, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r1.activations, 50);
  EXPECT_DOUBLE_EQ(r1.gradients, 1000 + 20 + 20);
  EXPECT_DOUBLE_EQ(r1.buffers, 30);
  // Recomputed micro-batches keep only the output; the B rebuilds the rest
  // (90) for a moment. At B1: outputs of micro-batches 0-2 (30).
  const std::vector<bool> all(3, true);
  const MemoryPrediction again = predict_rank_memory(s, 0, {s0, s1}, fixed, all);
  EXPECT_DOUBLE_EQ(again.activations, 30 + 90);
  EXPECT_DOUBLE_EQ(again.peak, 1000 + 1005 + 2000 + 120 + 30);
}

// The walk action by action (a memory lane's points): rank 0 holds its
// weights, gradients and Adam state (4000) and three posted gradient
// buffers (30) from the start; each F adds its stash (100), each B its
// temporaries (5) for a moment and then frees all but the sent output (10).
// The most of the trace is the peak; the optimizer steps after the step's
// messages are released.
TEST(MemoryModel, TheTraceIsTheWalkActionByActionAndItsMostIsThePeak) {
  TwoStages t;
  MemoryTrace trace;
  const MemoryPrediction r0 =
      predict_rank_memory(t.s, 0, {t.s0, t.s1}, t.fixed, std::vector<bool>(3, false), 0, &trace);
  // F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 F2 SEND_F2 RECV_B1 B1 RECV_B2 B2
  const std::vector<double> expected = {4130, 4130, 4230, 4230, 4230, 4235,
                                        4240, 4240, 4240, 4245, 4150, 4155};
  EXPECT_EQ(trace.during, expected);
  EXPECT_DOUBLE_EQ(trace.optimizer_step, 4060);
  EXPECT_DOUBLE_EQ(*std::max_element(trace.during.begin(), trace.during.end()), r0.peak);
  // Rank 1 likewise: its most is its peak.
  MemoryTrace r1_trace;
  const MemoryPrediction r1 =
      predict_rank_memory(t.s, 1, {t.s0, t.s1}, t.fixed, std::vector<bool>(3, false), 0, &r1_trace);
  ASSERT_EQ(r1_trace.during.size(), t.s.actions[1].size());
  EXPECT_DOUBLE_EQ(std::max(*std::max_element(r1_trace.during.begin(), r1_trace.during.end()),
                            r1_trace.optimizer_step),
                   r1.peak);
}

// Over shared memory a message of at most sends_copied_up_to bytes is copied
// into the receiver's ring at the send: nothing holds it afterwards.
TEST(MemoryModel, MessagesCopiedOutAtTheSendAreNotHeld) {
  TwoStages t;
  const auto& [s, s0, s1] = std::tie(t.s, t.s0, t.s1);
  StaticMemory& fixed = t.fixed;
  fixed.sends_copied_up_to = 10;
  const std::vector<bool> none(3, false);
  // Rank 0 at B1: the two stashes (200), no sent output kept past its B.
  const MemoryPrediction r0 = predict_rank_memory(s, 0, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r0.activations, 200);
  EXPECT_DOUBLE_EQ(r0.peak, 1000 + 1005 + 2000 + 200 + 30);
  // Rank 1: at each B only that B's 20; the sent input gradients are gone.
  const MemoryPrediction r1 = predict_rank_memory(s, 1, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r1.gradients, 1000 + 20);
  // One byte larger than the limit, they are held as without it.
  fixed.sends_copied_up_to = 9;
  EXPECT_DOUBLE_EQ(predict_rank_memory(s, 1, {s0, s1}, fixed, none).gradients, 1000 + 20 + 20);
}

// A boundary of several tensors crosses as a bundle, a copy (llama's hidden
// states with their positions): the send holds the copy, not the output,
// which its B frees; a sent input gradient is the copy's, not the
// gradient's. Receives take the bundles' sizes.
TEST(MemoryModel, ABundledBoundaryIsACopyTheSendHolds) {
  TwoStages t;
  const auto& [s, s0, s1] = std::tie(t.s, t.s0, t.s1);
  s0.output_message = 12, s0.output_gradient_message = 11;
  s1.input_message = 12, s1.input_gradient_message = 11;
  const std::vector<bool> none(3, false);
  // Rank 0 at B1: the stashes of micro-batches 1 and 2 (200, no sent output
  // kept), three posted gradient bundles (33) and three sent bundles (36).
  const MemoryPrediction r0 = predict_rank_memory(s, 0, {s0, s1}, t.fixed, none);
  EXPECT_DOUBLE_EQ(r0.activations, 200);
  EXPECT_DOUBLE_EQ(r0.buffers, 33 + 36);
  EXPECT_DOUBLE_EQ(r0.peak, 1000 + 1005 + 2000 + 200 + 69);
  // Rank 1 at B2: three posted input bundles (36) and two sent gradient
  // bundles (22); no sent gradient is held as a gradient.
  const MemoryPrediction r1 = predict_rank_memory(s, 1, {s0, s1}, t.fixed, none);
  EXPECT_DOUBLE_EQ(r1.gradients, 1000 + 20);
  EXPECT_DOUBLE_EQ(r1.buffers, 36 + 22);
  EXPECT_DOUBLE_EQ(r1.peak, 1000 + 1020 + 2000 + 50 + 58);
  // Copied out at the send, a bundle lives only while it is packed: rank 0's
  // most is SEND_F2's moment (the stashes of 1 and 2, the posted 33, the copy).
  t.fixed.sends_copied_up_to = 12;
  const MemoryPrediction inline_r0 = predict_rank_memory(s, 0, {s0, s1}, t.fixed, none);
  EXPECT_DOUBLE_EQ(inline_r0.buffers, 33 + 12);
  EXPECT_DOUBLE_EQ(inline_r0.peak, 1000 + 1000 + 2000 + 200 + 45);
}

// Under bf16 each weight is cast once a step (one autocast region, its cache
// shared by the micro-batches): a stage's casts are its layers', held from
// its first F to the step's end, once however many micro-batches it runs.
TEST(MemoryModel, WeightCastsAreHeldOnceAStepFromTheStagesFirstForward) {
  ModelMemory model;
  model.layers = {layer(10, false, true, 1, 2), layer(20, true, false, 2, 3)};
  model.layers[0].weight_cast_bytes = 4;
  model.layers[1].weight_cast_bytes = 6;
  EXPECT_DOUBLE_EQ(stage_memory(model, 0, 2, false).weight_casts, 10);
  EXPECT_DOUBLE_EQ(stage_memory(model, 1, 2, true).weight_casts, 6);
  TwoStages t;
  t.s0.weight_casts = 7;
  const std::vector<bool> none(3, false);
  MemoryTrace trace;
  const MemoryPrediction r0 = predict_rank_memory(t.s, 0, {t.s0, t.s1}, t.fixed, none, 0, &trace);
  // At B1 as without casts (210 of activations), and the casts once.
  EXPECT_DOUBLE_EQ(r0.activations, 210 + 7);
  EXPECT_DOUBLE_EQ(r0.peak, 1000 + 1005 + 2000 + 217 + 30);
  // From the first F on (4130 + 7) to the step's end (4060 + 7).
  EXPECT_DOUBLE_EQ(trace.during.front(), 4137);
  EXPECT_DOUBLE_EQ(trace.optimizer_step, 4060 + 7);
}

// A message received on arrival (inline over shared memory; every message
// on a GPU) exists from its RECV until its micro-batch's B uses it up, not
// from the step's start to its end.
TEST(MemoryModel, MessagesReceivedOnArrivalAreHeldOnlyUntilTheirBackward) {
  TwoStages t;
  const auto& [s, s0, s1] = std::tie(t.s, t.s0, t.s1);
  StaticMemory& fixed = t.fixed;
  fixed.receives_on_arrival_up_to = 10;
  const std::vector<bool> none(3, false);
  // Rank 0 at B1: the stashes as before (210), one gradient buffer (10), not 30.
  const MemoryPrediction r0 = predict_rank_memory(s, 0, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r0.buffers, 10);
  EXPECT_DOUBLE_EQ(r0.activations, 210);
  EXPECT_DOUBLE_EQ(r0.peak, 1000 + 1005 + 2000 + 210 + 10);
  // Rank 1 at B2: its one input (10) beside the sent input gradients.
  const MemoryPrediction r1 = predict_rank_memory(s, 1, {s0, s1}, fixed, none);
  EXPECT_DOUBLE_EQ(r1.buffers, 10);
  EXPECT_DOUBLE_EQ(r1.peak, 1000 + 1040 + 2000 + 50 + 10);
  // One byte over the limit, they are posted at the start as without it.
  fixed.receives_on_arrival_up_to = 9;
  EXPECT_DOUBLE_EQ(predict_rank_memory(s, 0, {s0, s1}, fixed, none).buffers, 30);
}

// ZeRO cuts the gradient shards at the step's end beside the whole gradients.
TEST(MemoryModel, ZeroHoldsTheGradientShardsBesideTheWholeGradientsForAMoment) {
  const schedule::Schedule s = schedule::parse_schedule("0F0 0B0\n");
  StageMemory only;
  only.stash = 10;
  StaticMemory fixed;
  fixed.parameters = 100, fixed.gradients = 100, fixed.optimizer = 100;
  fixed.gradient_shards = 50;
  // F0's 10 held; at the end the shards' 50 beside the gradients' 100.
  const MemoryPrediction p = predict_rank_memory(s, 0, {only}, fixed, {false}, /*extra=*/20);
  EXPECT_DOUBLE_EQ(p.gradients, 150);
  EXPECT_DOUBLE_EQ(p.peak, 100 + 150 + 100);
  // The optimizer steps the shards (the whole gradients freed) with its
  // temporaries: 100 + 50 + 100 + 120 = 370, above the cut's 350.
  const MemoryPrediction step = predict_rank_memory(s, 0, {only}, fixed, {false}, 120);
  EXPECT_DOUBLE_EQ(step.gradients, 50);
  EXPECT_DOUBLE_EQ(step.peak, 100 + 50 + 220);
}

// The optimizer steps after the step released its messages: the sent input
// gradients are not beside its temporaries; the posted receives' buffers
// are, as the transport keeps them for the next step's messages.
TEST(MemoryModel, TheOptimizerStepsAfterTheStepsMessagesAreReleased) {
  const schedule::Schedule s = schedule::parse_schedule(
      "0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0RECV_B1 0B1\n"
      "1RECV_F0 1F0 1B0 1SEND_B0 1RECV_F1 1F1 1B1 1SEND_B1\n");
  StageMemory s0, s1;
  s0.output_bytes = 40;
  s1.stash = 10, s1.input_bytes = 40;
  StaticMemory fixed;
  fixed.parameters = 100, fixed.gradients = 100, fixed.optimizer = 200;
  // At B1: the buffers (80), micro-batch 0's sent gradient (40), the stash
  // (10): 530. At the step: 100 + 100 + 200 + 300 and the kept buffers (80).
  const MemoryPrediction p = predict_rank_memory(s, 1, {s0, s1}, fixed, {false, false}, 300);
  EXPECT_DOUBLE_EQ(p.peak, 780);
  EXPECT_DOUBLE_EQ(p.buffers, 80);
  EXPECT_DOUBLE_EQ(p.gradients, 100);
}

TEST(MemoryModel, ASplitBackwardsIKeepsOnlyWhatItsWNeeds) {
  const schedule::Schedule s = schedule::parse_schedule("0F0 0I0 0F1 0W0 0I1 0W1\n");
  StageMemory only;
  only.stash = 100;
  only.weight_stash = 30;
  only.forward_extra = 50;
  // F1's temporaries on micro-batch 0's W stash (30) and its own stash (100):
  // 180, above F0's 150. Keeping the whole stash until W would read 250.
  const MemoryPrediction p = predict_rank_memory(s, 0, {only}, StaticMemory{}, {false, false});
  EXPECT_DOUBLE_EQ(p.activations, 180);
  EXPECT_DOUBLE_EQ(p.peak, 180);
}

// The W keeps the output gradients its I made as well as inputs from the
// stash, which can be more than the stash: the last stage's W keeps the
// logits' gradient the loss gave it (gpt zb-h1 p = 4, rank 3).
TEST(MemoryModel, AWStashCanExceedTheStashItCameFrom) {
  const schedule::Schedule s = schedule::parse_schedule("0F0 0I0 0F1 0I1 0F2 0I2 0W0 0W1 0W2\n");
  StageMemory last;
  last.stash = 100;
  last.weight_stash = 130;
  last.input_backward_extra = 40;
  // I2: two W stashes (260), its own stash (100) and its temporaries (40).
  const MemoryPrediction p =
      predict_rank_memory(s, 0, {last}, StaticMemory{}, {false, false, false});
  EXPECT_DOUBLE_EQ(p.peak, 2 * 130 + 100 + 40);
}

// An I runs on its layers' I figures (weight gradients deferred, their
// inputs and output gradients kept as it goes), beside the W stashes the
// layers after the one in flight have left; the last layer's W keeps the
// gradient the stage received, a tensor held already, so it is not in the
// stage's W stash.
TEST(MemoryModel, AnIPeaksOnItsLayersIFiguresBesideTheLaterLayersWStashes) {
  ModelMemory m;
  m.layers = {layer(4 + 8, true, true, 4, 8), layer(8 + 30, true, false, 8, 2, 3)};
  m.layers[0].backward_peak_bytes = 40;
  m.layers[0].input_backward_peak_bytes = 50;
  m.layers[0].weight_stash_bytes = 6;
  m.layers[1].input_backward_extra = 7;
  m.layers[1].weight_stash_bytes = 9;  // with the gradient coming in (2)
  m.layers[1].weight_stash_output_gradient_bytes = 2;
  const StageMemory s = stage_memory(m, 0, 2, /*last=*/false);
  EXPECT_DOUBLE_EQ(s.stash, 40);
  EXPECT_DOUBLE_EQ(s.weight_stash, 6 + 9 - 2);
  EXPECT_DOUBLE_EQ(s.weight_stash_output_gradient, 2);
  // The B as without the I figures (AnEarlierLayersBackwardPeaks...).
  EXPECT_DOUBLE_EQ(s.backward_extra, 3);
  EXPECT_DOUBLE_EQ(s.backward_freed, 0);
  // Layer 0's I: its 50 less its input (outside, 4), beside the output held
  // (2) and layer 1's W stash less the received gradient (7): 55, 15 above
  // the 40 at the start, once layer 1's 30 of graph are freed.
  EXPECT_DOUBLE_EQ(s.input_backward_extra + s.input_backward_freed, 15);
  EXPECT_DOUBLE_EQ(s.input_backward_freed, -30);
  // As the last stage the loss's gradient is made by the I: all of layer 1's
  // W stash counts, and its I figures are the loss's (as its B, unset).
  m.loss = layer(5, false, false, 2, 1, 6);
  const StageMemory last = stage_memory(m, 0, 2, /*last=*/true);
  EXPECT_DOUBLE_EQ(last.weight_stash, 6 + 9);
  EXPECT_DOUBLE_EQ(last.weight_stash_output_gradient, 0);
  // Without I figures, nor W stashes, a layer's I is its B.
  m.layers[0].input_backward_peak_bytes.reset();
  m.layers[1].input_backward_extra.reset();
  m.layers[0].weight_stash_bytes = m.layers[1].weight_stash_bytes = 0;
  m.layers[1].weight_stash_output_gradient_bytes = 0;
  const StageMemory plain = stage_memory(m, 0, 2, /*last=*/false);
  EXPECT_DOUBLE_EQ(plain.input_backward_extra, plain.backward_extra);
  EXPECT_DOUBLE_EQ(plain.input_backward_freed, plain.backward_freed);
}

// A received gradient the W keeps (the stage's last Linear stashes it) is
// held from its arrival until the W, not freed by the I.
TEST(MemoryModel, AReceivedGradientTheWKeepsIsHeldUntilTheW) {
  const schedule::Schedule s = schedule::parse_schedule(
      "0F0 0SEND_F0 0RECV_B0 0I0 0W0\n"
      "1RECV_F0 1F0 1I0 1SEND_B0 1W0\n");
  StageMemory s0, s1;
  s0.stash = 100, s0.output_bytes = 10, s0.input_backward_extra = 5, s0.weight_stash = 30;
  s0.weight_stash_output_gradient = 10;
  s1.stash = 50, s1.input_bytes = 10;
  StaticMemory fixed;
  fixed.receives_on_arrival_up_to = 10;
  MemoryTrace trace;
  const MemoryPrediction p = predict_rank_memory(s, 0, {s0, s1}, fixed, {false}, 0, &trace);
  // I0: the stash (100), the gradient that arrived (10) and the I's 5.
  EXPECT_DOUBLE_EQ(p.peak, 115);
  // From I0 to W0: the W stash (30), the sent output (10) and the gradient (10).
  ASSERT_EQ(trace.during.size(), 5u);
  EXPECT_DOUBLE_EQ(trace.during[4], 30 + 10 + 10);
  // A W that does not keep it: the I frees it.
  s0.weight_stash_output_gradient = 0;
  MemoryTrace freed;
  predict_rank_memory(s, 0, {s0, s1}, fixed, {false}, 0, &freed);
  EXPECT_DOUBLE_EQ(freed.during[4], 30 + 10);
}

// Under bf16 the engine runs a cast's node after every newer node: in a B
// whose micro-batch did not make the casts (a late B) the cast gradients of
// the layers done wait until the B's end.
TEST(MemoryModel, ALateBHoldsTheCastGradientsOfTheLayersDoneUntilItsEnd) {
  ModelMemory m;
  m.layers = {layer(4 + 8, true, true, 4, 8), layer(8 + 30, true, false, 8, 2, 3)};
  m.layers[0].backward_peak_bytes = 40;
  m.layers[0].cast_gradient_bytes = 10;
  m.layers[1].cast_gradient_bytes = 20;
  const StageMemory s = stage_memory(m, 0, 2, /*last=*/false);
  // The B as before (AnEarlierLayersBackwardPeaks...): layer 1's 3.
  EXPECT_DOUBLE_EQ(s.backward_extra + s.backward_freed, 3);
  // Late: layer 0's 40 less its input (4), beside the output held (2) and
  // layer 1's cast gradients (20): 58, 18 above the 40 at the start.
  EXPECT_DOUBLE_EQ(s.late_backward_extra + s.late_backward_freed, 18);
  EXPECT_DOUBLE_EQ(s.late_backward_freed, -30);
  EXPECT_DOUBLE_EQ(s.late_input_backward_extra + s.late_input_backward_freed, 18);
  EXPECT_DOUBLE_EQ(s.cast_gradients, 30);
  // Larger casts on layer 0: the B's end, all graphs freed (40 less the output
  // held, 2) and all cast gradients (70) held: 32 above the start.
  m.layers[0].cast_gradient_bytes = 50;
  const StageMemory heavy = stage_memory(m, 0, 2, /*last=*/false);
  EXPECT_DOUBLE_EQ(heavy.late_backward_extra + heavy.late_backward_freed, 32);
  EXPECT_DOUBLE_EQ(heavy.late_backward_freed, -38);

  // The walk: F0 makes the casts (5), so B0 is on time and B1 late.
  StageMemory only;
  only.stash = 100, only.weight_casts = 5, only.cast_gradients = 5, only.backward_extra = 3;
  only.late_backward_extra = 150;
  const auto peak = [&](const char* text, std::vector<bool> recomputed) {
    return predict_rank_memory(schedule::parse_schedule(text), 0, {only}, StaticMemory{},
                               recomputed)
        .peak;
  };
  // B0: 205 + 3; B1 after B0 freed its 100: 105 + 150.
  EXPECT_DOUBLE_EQ(peak("0F0 0F1 0B0 0B1\n", {false, false}), 255);
  // B1 first: 205 + 150.
  EXPECT_DOUBLE_EQ(peak("0F0 0F1 0B1 0B0\n", {false, false}), 355);
  // F0 recomputed (without a graph, caching no casts): F1 makes them, so B0
  // is late, on F1's stash and the casts.
  EXPECT_DOUBLE_EQ(peak("0F0 0F1 0B0 0B1\n", {true, false}), 5 + 100 + 100 + 150);
  // Both recomputed: B0's F makes the casts (on time, 5 + 100 + 3), B1 is late.
  EXPECT_DOUBLE_EQ(peak("0F0 0F1 0B0 0B1\n", {true, true}), 5 + 100 + 150);
  // Without cast gradients to wait for, no B is late.
  only.cast_gradients = 0;
  EXPECT_DOUBLE_EQ(peak("0F0 0F1 0B1 0B0\n", {false, false}), 208);
}

TEST(MemoryModel, GradientsFreedBetweenStepsComeBackAtTheFirstBackward) {
  const schedule::Schedule s = schedule::parse_schedule("0F0 0F1 0B0 0B1\n");
  StageMemory only;
  only.stash = 300;
  only.forward_extra = 500;
  StaticMemory fixed;
  fixed.parameters = 100, fixed.gradients = 100;
  fixed.gradients_freed = true;
  // The peak is F1's temporaries on two stashes, before any gradient exists
  // (the B's 100 + 100 + 600 is less).
  const MemoryPrediction p = predict_rank_memory(s, 0, {only}, fixed, {false, false});
  EXPECT_DOUBLE_EQ(p.peak, 100 + 600 + 500);
  EXPECT_DOUBLE_EQ(p.gradients, 0);
  fixed.gradients_freed = false;
  EXPECT_DOUBLE_EQ(predict_rank_memory(s, 0, {only}, fixed, {false, false}).peak, 1300);
}

// Without a flush (PipeDream-2BW), a B listed before its F is the previous
// step's micro-batch's: its stash is held from the step's start. The weight
// versions (runtime/weight_versions.h) hold, all through, a second copy of
// the parameters on a rank that carries backwards (the previous step's
// weights, which they read, kept after them for the next step's copy) and
// three gradient buffers on every rank (the masters', the current step's and
// the previous step's; the masters' freed between steps where zero_grad sets
// it to none). At the optimizer step the micro-batch carried into the next
// step keeps its stash. Measured: resnet 2bw p = 4 rank 1 read 0.949 with the
// second version dropped after the last carried B and one gradient buffer.
TEST(MemoryModel, A2BWRankHoldsTheCarriedStashesASecondWeightVersionAndThreeGradientBuffers) {
  schedule::Schedule s = schedule::parse_schedule("0F0 0B1 0F1 0B0\n");
  s.carries = true;
  s.updates = schedule::WeightUpdates::kPerStep;
  StageMemory only;
  only.stash = 100;
  only.backward_extra = 5;
  StaticMemory fixed;
  fixed.parameters = 1000, fixed.gradients = 1000, fixed.optimizer = 2000;
  // At the carried B1: micro-batch 1's stash (from the step before) and 0's
  // (200), two weight versions (2000), three gradient buffers and the B's 5.
  const MemoryPrediction p = predict_rank_memory(s, 0, {only}, fixed, {false, false});
  EXPECT_DOUBLE_EQ(p.parameters, 2000);
  EXPECT_DOUBLE_EQ(p.gradients, 3005);
  EXPECT_DOUBLE_EQ(p.activations, 200);
  EXPECT_DOUBLE_EQ(p.peak, 2000 + 3005 + 2000 + 200);
  // The optimizer's temporaries (2000) beside micro-batch 1's stash (100),
  // carried into the next step, both versions and the three buffers.
  const MemoryPrediction step = predict_rank_memory(s, 0, {only}, fixed, {false, false}, 2000);
  EXPECT_DOUBLE_EQ(step.parameters, 2000);
  EXPECT_DOUBLE_EQ(step.gradients, 3000);
  EXPECT_DOUBLE_EQ(step.activations, 100);
  EXPECT_DOUBLE_EQ(step.peak, 2000 + 3000 + 4000 + 100);
  // zero_grad frees the masters' gradient: two buffers during the step (the
  // carried B1 1000 lower), the third back for the optimizer's step.
  StaticMemory freed = fixed;
  freed.gradients_freed = true;
  MemoryTrace trace;
  const MemoryPrediction without =
      predict_rank_memory(s, 0, {only}, freed, {false, false}, 0, &trace);
  ASSERT_EQ(trace.during.size(), 4u);
  EXPECT_DOUBLE_EQ(trace.during[1], 2000 + 2005 + 2000 + 200);
  EXPECT_DOUBLE_EQ(trace.optimizer_step, 2000 + 3000 + 2000 + 100);
  EXPECT_DOUBLE_EQ(without.peak, trace.optimizer_step);
  // A rank that carries nothing (the last stage's) keeps one version, and
  // the three buffers.
  schedule::Schedule last = schedule::parse_schedule("0F0 0B0 0F1 0B1\n");
  last.carries = true;
  last.updates = schedule::WeightUpdates::kPerStep;
  const MemoryPrediction flat = predict_rank_memory(last, 0, {only}, fixed, {false, false});
  EXPECT_DOUBLE_EQ(flat.parameters, 1000);
  EXPECT_DOUBLE_EQ(flat.peak, 1000 + 3005 + 2000 + 100);
  // Updates that read the weights as they are (async) keep one version and
  // one gradient buffer, never freed.
  s.updates = schedule::WeightUpdates::kPerMicrobatchUnstashed;
  EXPECT_DOUBLE_EQ(predict_rank_memory(s, 0, {only}, fixed, {false, false}).peak,
                   1000 + 1005 + 2000 + 200);
  EXPECT_DOUBLE_EQ(predict_rank_memory(s, 0, {only}, freed, {false, false}).peak,
                   1000 + 1005 + 2000 + 200);
}

// A replica's state under ZeRO (runtime/zero.h), by hand: 1000 bytes of
// weights over dp 4, Adam's two moments a stepped byte.
TEST(MemoryModel, AReplicasStateByZeroStage) {
  const StaticMemory none = replica_static(1000, 1000, 0, 4, 2);
  EXPECT_DOUBLE_EQ(none.parameters, 1000);
  EXPECT_DOUBLE_EQ(none.gradients, 1000);
  EXPECT_DOUBLE_EQ(none.optimizer, 2000);
  EXPECT_DOUBLE_EQ(none.gradient_shards, 0);
  for (int zero : {1, 2}) {
    const StaticMemory z = replica_static(1000, 250, zero, 4, 2);
    EXPECT_DOUBLE_EQ(z.parameters, 1000);  // the shards are views of the weights
    EXPECT_DOUBLE_EQ(z.gradients, 1000);   // whole during the step
    EXPECT_DOUBLE_EQ(z.optimizer, 500);
    EXPECT_DOUBLE_EQ(z.gradient_shards, 250);
  }
  // ZeRO-3: the shard at rest beside the gathered weights.
  const StaticMemory three = replica_static(1000, 250, 3, 4, 2);
  EXPECT_DOUBLE_EQ(three.parameters, 1250);
  EXPECT_DOUBLE_EQ(three.optimizer, 500);
  // dp 1 shards nothing.
  EXPECT_DOUBLE_EQ(replica_static(1000, 1000, 3, 1, 2).parameters, 1000);
  EXPECT_DOUBLE_EQ(replica_static(1000, 1000, 3, 1, 2).gradient_shards, 0);
}

}  // namespace
}  // namespace baton::sim
