// The transports under load and change: shared memory (with and without
// cross-memory attach) and Gloo, each checked against the tensors sent.
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "baton/comm/communicator.h"
#include "baton/comm/local_group.h"

namespace baton::comm {
namespace {

using namespace std::chrono_literals;

struct Variant {
  std::string name;
  TransportKind kind;
  bool remote_copy;  // shm: large payloads by CMA, or over Gloo
};

class TransportTest : public testing::TestWithParam<Variant> {
 protected:
  void SetUp() override { setenv("BATON_SHM_CMA", GetParam().remote_copy ? "1" : "0", 1); }
  void TearDown() override { unsetenv("BATON_SHM_CMA"); }
  void run(int world_size, const std::function<void(Communicator&)>& body) {
    run_local_group(world_size, 20s, body, GetParam().kind);
  }
};

TEST_P(TransportTest, EveryPeerUsesTheTransportAskedFor) {
  run(2, [&](Communicator& comm) {
    EXPECT_EQ(comm.transport_name(1 - comm.rank()),
              GetParam().kind == TransportKind::kGloo ? "gloo" : "shm");
    comm.barrier();  // neither rank leaves while the other still joins
  });
}

TEST_P(TransportTest, AShapeOrDtypeChangeMidRunArrivesAsSent) {
  // One tag over eight steps: sizes grow, repeat, shrink, keep their bytes
  // but change dtype, and jump past the inline limit and back.
  const std::vector<torch::Tensor> steps = {torch::arange(4, torch::kFloat32),
                                            torch::arange(4, torch::kFloat32) + 1,
                                            torch::arange(7, torch::kFloat32),
                                            torch::arange(3, torch::kFloat32),
                                            torch::arange(3, torch::kInt32),
                                            torch::arange(300000, torch::kFloat32),
                                            torch::arange(6, torch::kFloat32).view({2, 3}),
                                            torch::arange(6, torch::kFloat32).view({2, 3})};
  run(2, [&](Communicator& comm) {
    const Tag tag{0, 3, Direction::kForward};
    for (const auto& tensor : steps) {
      if (comm.rank() == 0) {
        comm.isend(tensor, 1, tag).wait("send");
      } else {
        RecvHandle recv = comm.irecv(0, tag);  // posted before the sender's size is known
        const torch::Tensor got = recv.wait("recv");
        EXPECT_EQ(got.scalar_type(), tensor.scalar_type());
        EXPECT_EQ(got.sizes(), tensor.sizes());
        EXPECT_TRUE(torch::equal(got, tensor));
      }
      comm.barrier();
    }
  });
}

TEST_P(TransportTest, TensorsOf64MiBCrossBothWaysIntact) {
  const torch::Tensor big = torch::arange(16 << 20, torch::kFloat32);  // 64 MiB
  run(2, [&](Communicator& comm) {
    const int peer = 1 - comm.rank();
    RecvHandle recv = comm.irecv(peer, Tag{peer, 0, Direction::kForward});
    SendHandle send = comm.isend(big + comm.rank(), peer, Tag{comm.rank(), 0, Direction::kForward});
    const torch::Tensor got = recv.wait("recv 64 MiB");
    send.wait("send 64 MiB");
    EXPECT_TRUE(torch::equal(got, big + peer));
  });
}

TEST_P(TransportTest, SixtyFourOutstandingMessagesArriveWhenWaitedInReverse) {
  // 64 micro-batches of 64 KiB each: more than a 1 MiB ring holds, sent
  // before the receiver posts anything.
  constexpr int kMessages = 64;
  auto payload = [](int i) {
    return torch::full({16 << 10}, static_cast<float>(i), torch::kFloat32);
  };
  run(2, [&](Communicator& comm) {
    if (comm.rank() == 0) {
      std::vector<SendHandle> sends;
      for (int i = 0; i < kMessages; ++i)
        sends.push_back(comm.isend(payload(i), 1, Tag{0, i, Direction::kForward}));
      for (auto& send : sends) send.wait("send");
    } else {
      std::this_thread::sleep_for(100ms);
      std::vector<RecvHandle> recvs;
      for (int i = 0; i < kMessages; ++i)
        recvs.push_back(comm.irecv(0, Tag{0, i, Direction::kForward}));
      for (int i = kMessages - 1; i >= 0; --i) {
        EXPECT_TRUE(torch::equal(recvs[static_cast<size_t>(i)].wait("recv"), payload(i))) << i;
      }
    }
  });
}

TEST_P(TransportTest, MessagesOfOneTagFromTwoStepsKeepTheirOrder) {
  // The sender runs a step ahead: both messages of a tag are in flight
  // before the receiver waits for the first.
  run(2, [&](Communicator& comm) {
    const Tag tag{0, 0, Direction::kBackward};
    if (comm.rank() == 0) {
      comm.isend(torch::full({5}, 1.0), 1, tag).wait("send 1");
      comm.isend(torch::full({9}, 2.0), 1, tag).wait("send 2");
    } else {
      std::this_thread::sleep_for(50ms);
      RecvHandle first = comm.irecv(0, tag);
      RecvHandle second = comm.irecv(0, tag);  // posted before the first's size is known
      EXPECT_TRUE(torch::equal(first.wait("recv 1"), torch::full({5}, 1.0)));
      EXPECT_TRUE(torch::equal(second.wait("recv 2"), torch::full({9}, 2.0)));
    }
  });
}

TEST_P(TransportTest, AReceivedTensorStillHeldIsNeverOverwrittenAndAFreedOneIsReused) {
  auto payload = [](int step) {
    return torch::full({1 << 18}, static_cast<float>(step));
  };  // 1 MiB
  run(2, [&](Communicator& comm) {
    const Tag tag{0, 1, Direction::kForward};
    if (comm.rank() == 0) {
      for (int step = 0; step < 4; ++step) {
        comm.isend(payload(step), 1, tag).wait("send");
        comm.barrier();
      }
      return;
    }
    torch::Tensor held = comm.irecv(0, tag).wait("recv 0");
    comm.barrier();
    const torch::Tensor second = comm.irecv(0, tag).wait("recv 1");
    comm.barrier();
    EXPECT_TRUE(torch::equal(held, payload(0)))
        << "a later message overwrote a tensor still in use";
    EXPECT_TRUE(torch::equal(second, payload(1)));
    const void* freed = second.data_ptr();
    held = torch::Tensor();
    torch::Tensor third = comm.irecv(0, tag).wait("recv 2");
    EXPECT_TRUE(torch::equal(third, payload(2)));
    EXPECT_NE(third.data_ptr(), freed) << "reused a buffer that `second` still holds";
    const void* reusable = third.data_ptr();
    // Freed before the barrier: over shared memory the barrier's own waits
    // may take in the next message already, into whichever buffer is free.
    third = torch::Tensor();
    comm.barrier();
    const torch::Tensor fourth = comm.irecv(0, tag).wait("recv 3");
    comm.barrier();
    EXPECT_TRUE(torch::equal(fourth, payload(3)));
    if (GetParam().kind == TransportKind::kShm) {
      EXPECT_EQ(fourth.data_ptr(), reusable);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest,
                         testing::Values(Variant{"shm", TransportKind::kShm, true},
                                         Variant{"shm_without_cma", TransportKind::kShm, false},
                                         Variant{"gloo", TransportKind::kGloo, true}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace baton::comm
