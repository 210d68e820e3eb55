#include "harness/kernel_replay.h"

#include <gtest/gtest.h>

#include "engines/api/error.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

// Every recorded call is replayed and counted under its kernel's name, each
// with a time; a call replays on its own operands and attributes (a
// transposed matmul of mismatched shapes would throw if the attribute were
// lost).
TEST(KernelReplayTest, ReplaysEveryCallUnderItsKernel) {
  OneDnnKernels kernels;
  Tensor a = Tensor::Zeros(DType::kF32, Shape({4, 8}));
  Tensor b = Tensor::Zeros(DType::kF32, Shape({6, 8}));
  // Replayed under the recorder still live: it records the replay too.
  KernelTrafficRecorder recorder(KernelTrafficRecorder::KeepCalls::kYes);
  kernels.MatMul(a, false, b, true);
  kernels.Add(a, a);
  kernels.Add(b, b);
  const ReplayTimes times = ReplayEachAlone(kernels, recorder.calls(), 3);
  EXPECT_EQ(recorder.calls().size(), 3u + 3u * 4u);
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times.at("matmul").calls, 1);
  EXPECT_EQ(times.at("add").calls, 2);
  EXPECT_GT(times.at("matmul").seconds, 0);
  EXPECT_GT(times.at("add").seconds, 0);
}

TEST(KernelReplayTest, NoRepeatsIsAnError) {
  OneDnnKernels kernels;
  EXPECT_THROW(ReplayEachAlone(kernels, {}, 0), Error);
}

}  // namespace
}  // namespace remat
