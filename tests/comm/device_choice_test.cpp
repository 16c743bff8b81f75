// Which device each local rank runs on, checked without a GPU: the count of
// visible GPUs is an argument.
#include "baton/comm/device_choice.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"

namespace baton::comm {
namespace {

using testing::HasSubstr;
using testing::ThrowsMessage;

const c10::Device kCpu(c10::kCPU);
const c10::Device kCuda(c10::kCUDA);

class DeviceChoiceTest : public testing::TestWithParam<int> {};

TEST_P(DeviceChoiceTest, CudaWithoutAnIndexIsTheGpuOfTheLocalRank) {
  const int local_rank = GetParam();
  EXPECT_EQ(device_for_local_rank(kCuda, local_rank, 8),
            c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank)));
}

TEST_P(DeviceChoiceTest, CudaWithAnIndexIsThatGpuForEveryLocalRank) {
  EXPECT_EQ(device_for_local_rank(c10::Device("cuda:5"), GetParam(), 8), c10::Device("cuda:5"));
}

TEST_P(DeviceChoiceTest, TheCpuStaysTheCpuWithOrWithoutGpus) {
  EXPECT_EQ(device_for_local_rank(kCpu, GetParam(), 8), kCpu);
  EXPECT_EQ(device_for_local_rank(kCpu, GetParam(), 0), kCpu);
}

INSTANTIATE_TEST_SUITE_P(LocalRank, DeviceChoiceTest, testing::Range(0, 8));

TEST(DeviceChoice, EightLocalRanksOnEightGpusUseEightDifferentGpus) {
  std::set<c10::DeviceIndex> used;
  for (int local_rank = 0; local_rank < 8; ++local_rank) {
    used.insert(device_for_local_rank(kCuda, local_rank, 8).index());
  }
  EXPECT_EQ(used.size(), 8u);
}

TEST(DeviceChoice, ALocalRankBeyondTheVisibleGpusIsRefusedNamingBoth) {
  EXPECT_THAT([] { device_for_local_rank(kCuda, 2, 2); },
              ThrowsMessage<Error>(HasSubstr(
                  "[comm.device] local rank 2 would run on cuda:2, but 2 CUDA device(s) are "
                  "visible: start at most 2 ranks per machine, one GPU each")));
}

TEST(DeviceChoice, CudaIsRefusedWhenNoGpuIsVisible) {
  EXPECT_THAT([] { device_for_local_rank(kCuda, 0, 0); },
              ThrowsMessage<Error>(
                  HasSubstr("[comm.device] device cuda: this process sees no CUDA device")));
}

TEST(DeviceChoice, AnIndexBeyondTheVisibleGpusIsRefused) {
  EXPECT_THAT([] { device_for_local_rank(c10::Device("cuda:3"), 0, 2); },
              ThrowsMessage<Error>(HasSubstr(
                  "[comm.device] device cuda:3 does not exist; 2 CUDA device(s) are visible")));
}

TEST(DeviceChoice, ADeviceTypeOtherThanCpuOrCudaIsRefusedByName) {
  EXPECT_THAT([] { device_for_local_rank(c10::Device("meta"), 0, 8); },
              ThrowsMessage<Error>(
                  HasSubstr("[comm.device] device meta is not supported; use cpu or cuda")));
}

}  // namespace
}  // namespace baton::comm
