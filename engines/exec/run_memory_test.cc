#include "engines/exec/run_memory.h"

#include <gtest/gtest.h>

#include "engines/api/error.h"
#include "engines/api/tracer.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace {

Program TwoParams() {
  return Trace("two", {{"a", Shape({4})}, {"b", Shape({4})}},
               [](const std::vector<Var>& in) { return sum(mul(in[0], in[1])); });
}

TEST(RunMemoryTest, ArgumentsInTheDtypeAreCountedOnceOthersCopied) {
  OneDnnKernels k;
  std::shared_ptr<MemoryTracker> seen;
  RunOptions options;
  options.on_tracker = [&](const std::shared_ptr<MemoryTracker>& t) { seen = t; };
  options.max_memory_bytes = 1000;
  const Program p = TwoParams();
  Tensor shared = Tensor::Zeros(DType::kF32, Shape({4}));
  Result r;
  {
    RunMemory memory(k, options, /*dry_run=*/false);
    EXPECT_EQ(seen, memory.tracker());
    EXPECT_EQ(memory.tracker()->limit_bytes(), 1000);
    std::vector<Tensor> in = memory.Arguments(p, {shared, shared});
    EXPECT_EQ(in[0].buffer(), shared.buffer());
    EXPECT_EQ(memory.tracker()->live_bytes(Category::kInputs), 16);  // one buffer, once
    EXPECT_TRUE(memory.IsArgument(shared.buffer()));
    {
      ScopedSite site(memory.tracker().get(), Category::kGradients, "the gradient");
      r.grads.push_back(Tensor::Zeros(DType::kF32, Shape({4}), memory.tracker()));
    }
    memory.Finish(&r);
  }
  EXPECT_EQ(r.stats.peak_bytes, 32);
  EXPECT_EQ(r.stats.high_water_bytes_by_category[static_cast<int>(Category::kInputs)], 16);
  EXPECT_EQ(r.stats.peak_site, "the gradient");
  EXPECT_EQ(r.tracker->live_bytes(), 16);  // the gradient alone
}

TEST(RunMemoryTest, ArgumentsOfAnotherDtypeAreTrackedCopies) {
  OneDnnKernels k;
  RunMemory memory(k, RunOptions(), false);
  std::vector<Tensor> in = memory.Arguments(
      TwoParams(), {Tensor::Zeros(DType::kF64, Shape({4})), Tensor::Zeros(DType::kF32, Shape({4}))});
  EXPECT_EQ(in[0].dtype(), DType::kF32);
  EXPECT_EQ(memory.tracker()->live_bytes(Category::kInputs), 32);
  EXPECT_TRUE(memory.IsArgument(in[0].buffer()));
}

TEST(RunMemoryTest, ALeakIsAnError) {
  OneDnnKernels k;
  RunMemory memory(k, RunOptions(), false);
  Tensor kept = Tensor::Zeros(DType::kF32, Shape({4}), memory.tracker());
  Result r;
  EXPECT_THROW(memory.Finish(&r), Error);
}

TEST(RunMemoryTest, TheCapAndHookAreWiredAndRemoved) {
  OneDnnKernels k;
  std::shared_ptr<MemoryTracker> tracker;
  int64_t asked = 0;
  {
    RunMemory memory(k, RunOptions(), false);
    tracker = memory.tracker();
    memory.SetMemoryCap(8, [&](int64_t bytes) { asked = bytes; });
    EXPECT_THROW(Tensor::Zeros(DType::kF32, Shape({4}), tracker), Error);
    EXPECT_EQ(asked, 8);
  }
  EXPECT_EQ(tracker->soft_cap_bytes(), 0);
  EXPECT_EQ(tracker->live_bytes(), 0);
}

TEST(RunMemoryTest, DryArgumentsKeepSharingAndDataIsRequired) {
  auto dry = std::make_shared<MemoryTracker>();
  dry->set_dry_run(true);
  Tensor a = Tensor::Zeros(DType::kF32, Shape({4}));
  std::vector<Tensor> d = DryArguments({a, a, Tensor::Zeros(DType::kF32, Shape({4}))}, dry);
  EXPECT_EQ(d[0].buffer(), d[1].buffer());
  EXPECT_NE(d[0].buffer(), d[2].buffer());
  EXPECT_TRUE(d[0].dry());
  EXPECT_THROW(RequireArgumentData(TwoParams(), {d[0], a}), Error);
  RequireArgumentData(TwoParams(), {a, a});
}

}  // namespace
}  // namespace remat
