// The NCCL communicator's protocol (ordered_transport.h) on the CPU: ranks as
// threads, headers over a real CPU communicator, payloads over a test-only
// in-process channel that keeps NCCL's rules strictly, so that everything but
// the NCCL calls runs here.
#include "baton/comm/ordered_transport.h"

#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "baton/comm/comm_state.h"
#include "baton/comm/launcher.h"
#include "baton/comm/local_group.h"
#include "baton/comm/nccl.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

using detail::ChannelOp;
using detail::Clock;
using namespace std::chrono_literals;
using testing::HasSubstr;

// A payload in flight between two threads.
class LoopbackOp : public ChannelOp {
 public:
  explicit LoopbackOp(at::Tensor tensor) : tensor(std::move(tensor)) {}
  bool settled() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) throw std::runtime_error(error_);
    return done_;
  }
  bool finish(Clock::time_point) override { return settled(); }
  void complete(std::string error) {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
    error_ = std::move(error);
  }

  const at::Tensor tensor;

 private:
  std::mutex mutex_;
  bool done_ = false;
  std::string error_;
};

// The payloads of all ranks, under NCCL's rules made strict: payloads match
// their receives by order in each direction, whatever their tags; a receive
// must have the dtype and shape of the payload it matches; and a send settles
// only once its receive is posted (NCCL's large sends wait for it on the GPU).
class LoopbackHub {
 public:
  std::shared_ptr<ChannelOp> post(int src, int dst, const at::Tensor& tensor, bool is_send) {
    auto op = std::make_shared<LoopbackOp>(tensor);
    std::lock_guard<std::mutex> lock(mutex_);
    Lane& lane = lanes_[{src, dst}];
    (is_send ? lane.sends : lane.recvs).push_back(op);
    if (!is_send) ++lane.receives_posted;
    while (!lane.sends.empty() && !lane.recvs.empty()) {
      auto send = lane.sends.front();
      auto recv = lane.recvs.front();
      lane.sends.pop_front();
      lane.recvs.pop_front();
      std::string error;
      if (send->tensor.scalar_type() != recv->tensor.scalar_type() ||
          send->tensor.sizes() != recv->tensor.sizes()) {
        error = ::baton::detail::concat("[loopback] rank ", src, " sent ",
                                        send->tensor.scalar_type(), send->tensor.sizes(),
                                        " to rank ", dst, ", whose next receive is for ",
                                        recv->tensor.scalar_type(), recv->tensor.sizes());
      } else {
        recv->tensor.copy_(send->tensor);
      }
      send->complete(error);
      recv->complete(error);
    }
    return op;
  }

  int receives_posted(int src, int dst) {
    std::lock_guard<std::mutex> lock(mutex_);
    return lanes_[{src, dst}].receives_posted;
  }

 private:
  struct Lane {
    std::deque<std::shared_ptr<LoopbackOp>> sends, recvs;
    int receives_posted = 0;
  };
  std::mutex mutex_;
  std::map<std::pair<int, int>, Lane> lanes_;
};

class LoopbackChannel : public detail::OrderedChannel {
 public:
  LoopbackChannel(std::shared_ptr<LoopbackHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  std::shared_ptr<ChannelOp> send(const at::Tensor& tensor, int dst) override {
    return hub_->post(rank_, dst, tensor, /*is_send=*/true);
  }
  std::shared_ptr<ChannelOp> recv(const at::Tensor& tensor, int src) override {
    return hub_->post(src, rank_, tensor, /*is_send=*/false);
  }

 private:
  std::shared_ptr<LoopbackHub> hub_;
  const int rank_;
};

// Runs body on `world_size` threads, each with a communicator that speaks the
// NCCL protocol: headers over a CPU communicator of kind `headers`, payloads
// over one loopback hub.
void run_ordered(int world_size, TransportKind headers,
                 const std::function<void(Communicator&, LoopbackHub&)>& body,
                 std::chrono::milliseconds timeout = 20s) {
  auto hub = std::make_shared<LoopbackHub>();
  run_local_group(
      world_size, timeout,
      [&](Communicator& cpu) {
        Communicator comm = detail::connect_ordered(
            cpu, cpu.state()->backend, std::make_shared<LoopbackChannel>(hub, cpu.rank()), at::kCPU,
            "loopback");
        body(comm, *hub);
      },
      headers);
}

Tag tag_of(int microbatch) {
  return Tag{0, microbatch, Direction::kForward};
}

class OrderedTransportTest : public testing::TestWithParam<TransportKind> {};

TEST_P(OrderedTransportTest, EveryPeerIsReachedOverThePayloadChannel) {
  run_ordered(3, GetParam(), [](Communicator& comm, LoopbackHub&) {
    EXPECT_EQ(comm.backend_name(), "loopback");
    for (int peer = 0; peer < 3; ++peer) {
      if (peer == comm.rank()) continue;
      EXPECT_EQ(comm.transport_name(peer), "loopback");
    }
    comm.barrier();
  });
}

TEST_P(OrderedTransportTest, AShapeOrDtypeChangeOnOneTagArrivesAsSent) {
  const std::vector<torch::Tensor> steps = {
      torch::arange(4, torch::kFloat32),      torch::arange(4, torch::kFloat32) + 1,
      torch::arange(7, torch::kFloat64),      torch::tensor(3.5),
      torch::arange(3, torch::kInt32),        torch::empty({0, 5}),
      torch::arange(300000, torch::kFloat32), torch::arange(24, torch::kInt64).view({2, 3, 4})};
  run_ordered(2, GetParam(), [&](Communicator& comm, LoopbackHub&) {
    for (const auto& tensor : steps) {
      if (comm.rank() == 0) {
        comm.isend(tensor, 1, tag_of(3)).wait("send");
      } else {
        const torch::Tensor got = comm.irecv(0, tag_of(3)).wait("recv");
        EXPECT_EQ(got.scalar_type(), tensor.scalar_type());
        EXPECT_EQ(got.sizes(), tensor.sizes());
        EXPECT_TRUE(torch::equal(got, tensor));
      }
    }
  });
}

TEST_P(OrderedTransportTest, ReceivesWaitedInReverseTakeTheirOwnTagsMessagesInOrder) {
  // Eight tags, two messages each, all sent before the receiver waits: the
  // payload channel sees them in send order, the waits take them by tag (the
  // tags in reverse, each tag's two in the order sent).
  const auto message = [](int microbatch, int copy) {
    return torch::full({microbatch + 1, 2}, 10 * microbatch + copy, torch::kFloat32);
  };
  run_ordered(2, GetParam(), [&](Communicator& comm, LoopbackHub&) {
    if (comm.rank() == 0) {
      std::vector<SendHandle> sends;
      for (int copy = 0; copy < 2; ++copy) {
        for (int m = 0; m < 8; ++m) sends.push_back(comm.isend(message(m, copy), 1, tag_of(m)));
      }
      for (auto& send : sends) send.wait("send");
      return;
    }
    std::vector<RecvHandle> recvs;
    for (int copy = 0; copy < 2; ++copy) {
      for (int m = 0; m < 8; ++m) recvs.push_back(comm.irecv(0, tag_of(m)));
    }
    for (int m = 7; m >= 0; --m) {
      for (int copy = 0; copy < 2; ++copy) {
        EXPECT_TRUE(torch::equal(recvs[8 * copy + m].wait("recv"), message(m, copy)))
            << "micro-batch " << m << " copy " << copy;
      }
    }
  });
}

TEST_P(OrderedTransportTest, ASendNobodyReceivesTimesOutNamingItsAction) {
  std::promise<void> done;
  std::shared_future<void> finished = done.get_future().share();
  run_ordered(
      2, GetParam(),
      [&](Communicator& comm, LoopbackHub&) {
        if (comm.rank() == 1) {
          finished.wait();  // alive but silent
          return;
        }
        SendHandle send = comm.isend(torch::ones({1000}), 1, tag_of(0));
        EXPECT_THAT([&] { send.wait("stage 0 micro-batch 0 SEND_F to rank 1"); },
                    testing::ThrowsMessage<Error>(HasSubstr(
                        "[comm] rank 0 timed out after 2 s waiting for stage 0 micro-batch 0 "
                        "SEND_F to rank 1")));
        done.set_value();
      },
      2s);
}

INSTANTIATE_TEST_SUITE_P(Headers, OrderedTransportTest,
                         testing::Values(TransportKind::kShm, TransportKind::kGloo),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// Receives are posted eagerly: the audit's deadlock, where every rank sends a
// large tensor before it waits for anything, and receives only after its send
// is done. A protocol that reads headers only inside a receive's wait never
// finishes a send here. Headers over shared memory, which can be polled.
class EagerReceiveTest : public testing::TestWithParam<int> {};

TEST_P(EagerReceiveTest, RanksThatAllSendLargeTensorsBeforeReceivingAllFinish) {
  const int world = GetParam();
  const auto payload = [](int rank) { return torch::full({1 << 20}, rank, torch::kFloat32); };
  run_ordered(world, TransportKind::kShm, [&](Communicator& comm, LoopbackHub&) {
    const int next = (comm.rank() + 1) % world, previous = (comm.rank() + world - 1) % world;
    comm.isend(payload(comm.rank()), next, tag_of(comm.rank())).wait("send 4 MiB");
    const torch::Tensor got = comm.irecv(previous, tag_of(previous)).wait("recv 4 MiB");
    EXPECT_TRUE(torch::equal(got, payload(previous)));
  });
}

INSTANTIATE_TEST_SUITE_P(Ring, EagerReceiveTest, testing::Values(2, 3, 4),
                         [](const auto& info) { return std::to_string(info.param) + "Ranks"; });

TEST(EagerReceive, EveryCallPostsTheReceivesOfHeadersThatHaveArrived) {
  std::promise<void> first_sent, second_sent;
  std::shared_future<void> first = first_sent.get_future().share();
  std::shared_future<void> second = second_sent.get_future().share();
  run_ordered(2, TransportKind::kShm, [&](Communicator& comm, LoopbackHub& hub) {
    if (comm.rank() == 0) {
      SendHandle a = comm.isend(torch::ones({64}), 1, tag_of(0));
      first_sent.set_value();
      SendHandle b = comm.isend(torch::ones({32}), 1, tag_of(1));
      second_sent.set_value();
      const torch::Tensor back = comm.irecv(1, tag_of(2)).wait("recv back");
      EXPECT_TRUE(torch::equal(back, torch::zeros({8})));
      a.wait("send a");
      b.wait("send b");
      return;
    }
    first.wait();
    // An irecv for another tag posts the receive of the header already here.
    RecvHandle b = comm.irecv(0, tag_of(1));
    EXPECT_GE(hub.receives_posted(0, 1), 1);
    second.wait();
    // So does an isend.
    SendHandle back = comm.isend(torch::zeros({8}), 0, tag_of(2));
    EXPECT_EQ(hub.receives_posted(0, 1), 2);
    EXPECT_TRUE(torch::equal(comm.irecv(0, tag_of(0)).wait("recv a"), torch::ones({64})));
    EXPECT_TRUE(torch::equal(b.wait("recv b"), torch::ones({32})));
    back.wait("send back");
  });
}

// The same audit case on two GPUs over NCCL itself, with 64 MiB each way.
TEST(EagerReceive, TwoGpusThatBothSendLargeTensorsBeforeReceivingBothFinish_CUDA) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const int port = find_free_port();
  const auto payload = [](int rank) { return torch::full({16 << 20}, rank, torch::kFloat32); };
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      Communicator nccl = connect_nccl(
          ConnectOptions().set_rank(r).set_world_size(2).set_master_port(port).set_timeout(60s), r);
      EXPECT_EQ(nccl.transport_name(1 - r), "nccl");
      const Tag mine = tag_of(r), theirs = tag_of(1 - r);
      nccl.isend(payload(r).cuda(), 1 - r, mine).wait("send 64 MiB");
      const torch::Tensor got = nccl.irecv(1 - r, theirs).wait("recv 64 MiB");
      EXPECT_TRUE(got.is_cuda());
      EXPECT_TRUE(torch::equal(got.cpu(), payload(1 - r)));
    });
  }
  for (auto& rank : ranks) rank.join();
}

}  // namespace
}  // namespace baton::comm
