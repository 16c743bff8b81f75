#include "baton/comm/communicator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "baton/runtime/action_tag.h"

#include "baton/comm/local_group.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;

constexpr auto kTimeout = 5s;

void expect_same(const torch::Tensor& got, const torch::Tensor& want) {
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(torch::equal(got, want)) << got << "\nvs\n" << want;
}

std::vector<torch::Tensor> sample_tensors(torch::ScalarType dtype) {
  torch::manual_seed(7);
  std::vector<std::vector<int64_t>> shapes = {{}, {5}, {2, 3, 4, 5}, {0}, {3, 0, 2}};
  std::vector<torch::Tensor> tensors;
  for (const auto& shape : shapes) {
    tensors.push_back(torch::randint(-1000, 1000, shape, torch::kLong).to(dtype) / 7);
  }
  tensors.push_back(torch::arange(12, torch::kLong).to(dtype).reshape({3, 4}).t());  // strided
  return tensors;
}

class SendRecvDtypeTest
    : public testing::TestWithParam<std::tuple<torch::ScalarType, TransportKind>> {};

TEST_P(SendRecvDtypeTest, TensorsOfEveryShapeArriveEqualWithoutStatingShapes) {
  const auto tensors = sample_tensors(std::get<0>(GetParam()));
  run_local_group(
      2, kTimeout,
      [&](Communicator& comm) {
        for (int i = 0; i < static_cast<int>(tensors.size()); ++i) {
          const Tag tag{0, i, Direction::kForward};
          if (comm.rank() == 0) {
            comm.isend(tensors[static_cast<size_t>(i)], 1, tag).wait("send");
          } else {
            expect_same(comm.irecv(0, tag).wait("recv"), tensors[static_cast<size_t>(i)]);
          }
        }
      },
      std::get<1>(GetParam()));
}

std::string transport_name(const testing::TestParamInfo<TransportKind>& info) {
  return std::string(to_string(info.param));
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, SendRecvDtypeTest,
    testing::Combine(testing::Values(torch::kFloat32, torch::kFloat64, torch::kInt64),
                     testing::Values(TransportKind::kShm, TransportKind::kGloo)),
    [](const auto& info) {
      return std::string(c10::toString(std::get<0>(info.param))) + "_" +
             std::string(to_string(std::get<1>(info.param)));
    });

class CommunicatorTest : public testing::TestWithParam<TransportKind> {};

torch::Tensor tagged_tensor(int sender, const Tag& tag) {
  // Shape and values both depend on the tag, so a mix-up shows either way.
  const int64_t length = 1 + tag.microbatch + 3 * tag.stage;
  const double value =
      sender * 10000 + tag.stage * 1000 + tag.microbatch * 10 + static_cast<int>(tag.dir);
  return torch::full({length}, value, torch::kFloat64);
}

TEST_P(CommunicatorTest, ManyTagsInterleavedAndPostedOutOfOrderArriveAtTheirOwnReceive) {
  std::vector<Tag> tags;
  for (int stage = 0; stage < 3; ++stage) {
    for (int mb = 0; mb < 6; ++mb) {
      tags.push_back(Tag{stage, mb, Direction::kForward});
      tags.push_back(Tag{stage, mb, Direction::kBackward});
    }
  }
  run_local_group(
      3, kTimeout,
      [&](Communicator& comm) {
        // Ranks 0 and 2 both send every tag to rank 1, which also sends every
        // tag back to both of them; receives are posted and waited in orders
        // that differ from the send order and from each other.
        std::mt19937 rng(static_cast<unsigned>(comm.rank()));
        std::vector<int> peers = comm.rank() == 1 ? std::vector<int>{0, 2} : std::vector<int>{1};
        std::vector<std::pair<int, size_t>> recvs;
        for (int peer : peers) {
          for (size_t t = 0; t < tags.size(); ++t) recvs.emplace_back(peer, t);
        }
        std::shuffle(recvs.begin(), recvs.end(), rng);
        std::vector<RecvHandle> handles;
        for (const auto& [peer, t] : recvs) handles.push_back(comm.irecv(peer, tags[t]));
        std::vector<SendHandle> sends;
        for (int peer : peers) {
          for (const Tag& tag : tags)
            sends.push_back(comm.isend(tagged_tensor(comm.rank(), tag), peer, tag));
        }
        std::vector<size_t> order(recvs.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t i : order) {
          const auto& [peer, t] = recvs[i];
          expect_same(handles[i].wait("recv " + to_string(tags[t])), tagged_tensor(peer, tags[t]));
        }
        for (auto& send : sends) send.wait("send");
      },
      GetParam());
}

TEST_P(CommunicatorTest, InTheSteadyStateASendCompletesBeforeTheReceiverCallsWait) {
  std::atomic<bool> sent{false};
  run_local_group(
      2, kTimeout,
      [&](Communicator& comm) {
        const Tag tag{1, 2, Direction::kForward};
        // The first message of a tag tells the receiver its size.
        if (comm.rank() == 0) {
          comm.isend(torch::zeros({1000}), 1, tag).wait("send");
        } else {
          comm.irecv(0, tag).wait("recv");
        }
        if (comm.rank() == 0) {
          comm.isend(torch::ones({1000}), 1, tag).wait("send");
          sent = true;
        } else {
          RecvHandle recv = comm.irecv(0, tag);
          const auto deadline = std::chrono::steady_clock::now() + 3s;
          while (!sent && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(1ms);
          EXPECT_TRUE(sent) << "the send waited for the receiver's wait()";
          expect_same(recv.wait("recv"), torch::ones({1000}));
        }
      },
      GetParam());
}

// Overlapping steps: a rank may send step k+1's message of a tag before its
// peer has taken step k's. Sizes change on the way (Gloo's resize notice) and
// cross the shared-memory inline limit (256 KiB: by cross-memory attach).
TEST_P(CommunicatorTest, MessagesOfOneTagSentBeforeAnyReceiveArriveInSendOrder) {
  const Tag tag{0, 3, Direction::kForward};
  const std::vector<int64_t> lengths{10, 10, 20000, 20000, 10, 100000, 100000};
  auto message = [](size_t k, int64_t length) {
    return torch::full({length}, static_cast<double>(k + 1), torch::kFloat64);
  };
  run_local_group(
      2, kTimeout,
      [&](Communicator& comm) {
        if (comm.rank() == 0) {
          std::vector<SendHandle> sends;
          for (size_t k = 0; k < lengths.size(); ++k)
            sends.push_back(comm.isend(message(k, lengths[k]), 1, tag));
          for (auto& send : sends) send.wait("send");
        } else {
          std::this_thread::sleep_for(100ms);  // every message is sent (or queued) by now
          // As steps do: a receive is posted once the one before has been taken.
          for (size_t k = 0; k < lengths.size(); ++k) {
            expect_same(comm.irecv(0, tag).wait("recv " + std::to_string(k)),
                        message(k, lengths[k]));
          }
        }
      },
      GetParam());
}

INSTANTIATE_TEST_SUITE_P(Transports, CommunicatorTest,
                         testing::Values(TransportKind::kShm, TransportKind::kGloo),
                         transport_name);

// (world size, transport): small sums among shm peers go through rank 0,
// the 256 KiB one and everything over gloo through Gloo's all-reduce.
class AllReduceTest : public testing::TestWithParam<std::tuple<int, TransportKind>> {};

std::vector<torch::Tensor> rank_tensors(int rank) {
  return {torch::arange(6, torch::kFloat32).reshape({2, 3}) * (rank + 1),
          torch::tensor({rank, 10 * rank, -rank}, torch::kLong),
          torch::tensor(0.5 * rank, torch::kFloat64),
          torch::empty({0}, torch::kFloat32),
          torch::arange(4, torch::kFloat32).reshape({2, 2}).t() + rank,
          torch::arange(1 << 15, torch::kFloat64) * rank};  // 256 KiB
}

TEST_P(AllReduceTest, SumEqualsTheSumComputedDirectly) {
  const int world_size = std::get<0>(GetParam());
  std::vector<torch::Tensor> expected = rank_tensors(0);
  for (int r = 1; r < world_size; ++r) {
    const auto more = rank_tensors(r);
    for (size_t i = 0; i < expected.size(); ++i) expected[i] = expected[i] + more[i];
  }
  run_local_group(
      world_size, kTimeout,
      [&](Communicator& comm) {
        for (int round = 1; round <= 3; ++round) {  // consecutive sums keep their order
          std::vector<torch::Tensor> tensors = rank_tensors(comm.rank());
          for (auto& t : tensors) t.mul_(round);
          comm.all_reduce_sum(tensors);
          ASSERT_EQ(tensors.size(), expected.size());
          for (size_t i = 0; i < tensors.size(); ++i) expect_same(tensors[i], expected[i] * round);
        }
      },
      std::get<1>(GetParam()));
}

// A barrier holds every rank until all have arrived: each rank counts itself
// in before the barrier, and after it sees every rank of that round counted
// (the shared-memory barrier's hops through rank 0, and Gloo's).
TEST_P(AllReduceTest, BarrierReleasesNoRankBeforeEveryRankArrived) {
  const int world_size = std::get<0>(GetParam());
  constexpr int kRounds = 50;
  std::atomic<int> arrived{0};
  run_local_group(
      world_size, kTimeout,
      [&](Communicator& comm) {
        std::mt19937 gen(static_cast<unsigned>(comm.rank()));
        for (int round = 1; round <= kRounds; ++round) {
          if (gen() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(gen() % 500));
          arrived.fetch_add(1);
          comm.barrier("round " + std::to_string(round));
          EXPECT_GE(arrived.load(), round * world_size) << "rank " << comm.rank();
        }
      },
      std::get<1>(GetParam()));
}

// A rank that never joins the barrier (alive, but silent): every other rank
// fails within about the timeout, naming the barrier, and none hangs.
TEST_P(AllReduceTest, BarrierThatARankNeverJoinsFailsOnEveryOtherRank) {
  const int world_size = std::get<0>(GetParam());
  std::atomic<int> failed{0};
  run_local_group(
      world_size, 1s,
      [&](Communicator& comm) {
        if (comm.rank() == world_size - 1) {
          const auto until = std::chrono::steady_clock::now() + 20s;
          while (failed < world_size - 1 && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(5ms);
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        EXPECT_THAT([&] { comm.barrier("the test's barrier"); },
                    testing::ThrowsMessage<Error>(HasSubstr("the test's barrier")));
        EXPECT_LE(std::chrono::steady_clock::now() - start, 5s);
        ++failed;
      },
      std::get<1>(GetParam()));
  EXPECT_EQ(failed, world_size - 1);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AllReduceTest,
                         testing::Combine(testing::Values(2, 3, 4),
                                          testing::Values(TransportKind::kShm,
                                                          TransportKind::kGloo)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "_ranks_" +
                                  std::string(to_string(std::get<1>(info.param)));
                         });

TEST_P(CommunicatorTest, BarrierWaitsForTheSlowestRank) {
  run_local_group(
      2, kTimeout,
      [&](Communicator& comm) {
        const auto start = std::chrono::steady_clock::now();
        if (comm.rank() == 1) std::this_thread::sleep_for(300ms);
        comm.barrier();
        EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
      },
      GetParam());
}

TEST_P(CommunicatorTest, ReceiveWhoseSenderNeverSendsTimesOutNamingTheAction) {
  std::atomic<bool> done{false};
  run_local_group(
      2, 1s,
      [&](Communicator& comm) {
        if (comm.rank() == 0) {
          while (!done) std::this_thread::sleep_for(5ms);  // alive, but silent
          return;
        }
        RecvHandle recv = comm.irecv(0, runtime::tag_for({schedule::ActionKind::RECV_F, 2, 3}));
        const auto start = std::chrono::steady_clock::now();
        EXPECT_THAT([&] { recv.wait("stage 2 micro-batch 3 RECV_F from rank 0"); },
                    testing::ThrowsMessage<Error>(testing::StrEq(
                        "[comm] rank 1 timed out after 1 s waiting for stage 2 micro-batch 3 "
                        "RECV_F from rank 0")));
        const auto waited = std::chrono::steady_clock::now() - start;
        EXPECT_GE(waited, 900ms);
        EXPECT_LE(waited, 3s);
        // The communicator is broken now, and says so at once.
        EXPECT_THAT(
            [&] {
              comm.isend(torch::ones({1}), 0, Tag{0, 0, Direction::kForward});
            },
            testing::ThrowsMessage<Error>(
                HasSubstr("[comm] rank 1 cannot communicate after an earlier failure: "
                          "[comm] rank 1 timed out after 1 s")));
        done = true;
      },
      GetParam());
}

TEST_P(CommunicatorTest, PeerThatLeavesMakesTheReceiverFailWithClosedConnection) {
  std::atomic<bool> left{false};
  auto store = make_hash_store();
  std::thread leaver([&] {
    Communicator comm = from_store(store, 0, 2, kTimeout, GetParam());
    comm.barrier();
    std::this_thread::sleep_for(200ms);  // let rank 1 post its receive
    left = true;
  });  // rank 0's communicator is destroyed here: its connections close
  Communicator comm = from_store(store, 1, 2, kTimeout, GetParam());
  comm.barrier();
  RecvHandle recv = comm.irecv(0, Tag{0, 4, Direction::kForward});
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([&] { recv.wait("stage 1 micro-batch 4 RECV_F from rank 0"); },
              testing::ThrowsMessage<Error>(testing::StrEq(
                  "[comm] rank 1: peer rank 0 closed the connection while waiting for stage 1 "
                  "micro-batch 4 RECV_F from rank 0")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  leaver.join();
  EXPECT_TRUE(left);
}

TEST_P(CommunicatorTest, GroupCreationTimesOutWhenAPeerNeverShowsUp) {
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THAT([this] { from_store(make_hash_store(), 0, 2, 1s, GetParam()); },
              testing::ThrowsMessage<Error>(HasSubstr(
                  "[comm] rank 0 timed out after 1 s waiting for the other 1 rank(s) to join")));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_P(CommunicatorTest, SendingToItselfOrOutsideTheGroupIsRejected) {
  run_local_group(
      2, kTimeout,
      [&](Communicator& comm) {
        EXPECT_THAT([&] { comm.isend(torch::ones({1}), comm.rank(), Tag{}); },
                    testing::ThrowsMessage<Error>(HasSubstr("destination must be another rank")));
        EXPECT_THAT([&] { comm.irecv(2, Tag{}); },
                    testing::ThrowsMessage<Error>(
                        HasSubstr("source must be another rank in [0, 2), got 2")));
      },
      GetParam());
}

}  // namespace
}  // namespace baton::comm
