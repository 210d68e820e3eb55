#include "engines/api/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/memory_tracker.h"

namespace remat {
namespace {

TEST(ShapeTest, CountsAndPrints) {
  EXPECT_EQ(Shape().num_elements(), 1);
  EXPECT_EQ(Shape({5, 4}).num_elements(), 20);
  EXPECT_EQ(Shape({2, 3, 4}).ToString(), "[2,3,4]");
  EXPECT_EQ(Shape().ToString(), "[]");
  EXPECT_EQ(Shape({8, 3, 2}).DropLeading(), Shape({3, 2}));
  EXPECT_EQ(Shape({3, 2}).PrependLeading(8), Shape({8, 3, 2}));
}

TEST(ShapeTest, RejectsRankSevenAndNegativeDims) {
  EXPECT_NO_THROW(Shape({1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(Shape({1, 2, 3, 4, 5, 6, 7}), Error);
  EXPECT_THROW(Shape({2, -1}), Error);
  EXPECT_THROW(Shape().DropLeading(), Error);
}

TEST(MemoryTrackerTest, CountsLivePeakAndWhere) {
  auto tracker = std::make_shared<MemoryTracker>();
  {
    ScopedSite site(tracker.get(), Category::kActivations, "op a");
    Tensor a = Tensor::Zeros(DType::kF32, Shape({10, 10}), tracker);  // 400 bytes
    {
      ScopedSite inner(tracker.get(), Category::kGradients, "op b");
      Tensor b = Tensor::Zeros(DType::kF64, Shape({10}), tracker);  // 80 bytes
      EXPECT_EQ(tracker->live_bytes(), 480);
      EXPECT_EQ(tracker->live_bytes(Category::kGradients), 80);
    }
    EXPECT_EQ(tracker->live_bytes(), 400);
    EXPECT_EQ(tracker->site(), "op a");
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
  EXPECT_EQ(tracker->peak_bytes(), 480);
  EXPECT_EQ(tracker->peak_bytes(Category::kActivations), 400);
  EXPECT_EQ(tracker->peak_bytes(Category::kGradients), 80);
  EXPECT_EQ(tracker->peak_site(), "op b");
}

// set_site_ref names the site without copying it: the tracker reads the
// caller's string, for the site and a peak reached there, until
// DetachSiteRefs copies both in; set_site takes a copy as before.
TEST(MemoryTrackerTest, SiteByReferenceUntilDetached) {
  MemoryTracker tracker;
  std::string name = "plan op 1";
  tracker.set_site_ref(name);
  EXPECT_EQ(&tracker.site(), &name);
  tracker.Allocate(100, Category::kActivations);
  EXPECT_EQ(&tracker.peak_site(), &name);
  tracker.DetachSiteRefs();
  name = "changed";
  EXPECT_EQ(tracker.site(), "plan op 1");
  EXPECT_EQ(tracker.peak_site(), "plan op 1");
  std::string next = "plan op 2";
  tracker.set_site_ref(next);
  tracker.set_site("own copy");
  tracker.Allocate(50, Category::kActivations);  // a new peak, at a copied site
  tracker.DetachSiteRefs();
  next = "changed again";
  EXPECT_EQ(tracker.site(), "own copy");
  EXPECT_EQ(tracker.peak_site(), "own copy");
  tracker.Release(150, Category::kActivations);
}

// The high-water mark of one category is not what it held at the total
// peak: here the peak (600 bytes) comes with 100 bytes of activations, while
// activations alone reached 400 earlier.
TEST(MemoryTrackerTest, HighWaterPerCategoryIsIndependentOfTheTotalPeak) {
  MemoryTracker tracker;
  tracker.Allocate(400, Category::kActivations);
  tracker.Release(300, Category::kActivations);
  tracker.Allocate(500, Category::kScratchpad);
  EXPECT_EQ(tracker.peak_bytes(), 600);
  EXPECT_EQ(tracker.peak_bytes(Category::kActivations), 100);
  EXPECT_EQ(tracker.high_water_bytes(Category::kActivations), 400);
  EXPECT_EQ(tracker.high_water_bytes(Category::kScratchpad), 500);
  tracker.Release(500, Category::kScratchpad);
  tracker.ResetPeak();
  EXPECT_EQ(tracker.high_water_bytes(Category::kActivations), 100);
  EXPECT_EQ(tracker.high_water_bytes(Category::kScratchpad), 0);
}

TEST(MemoryTrackerTest, ViewsAndCopiesOfAHandleCountOnce) {
  auto tracker = std::make_shared<MemoryTracker>();
  Tensor stacked = Tensor::Zeros(DType::kF32, Shape({4, 2, 2}), tracker);  // 64 bytes
  Tensor step = stacked.Slice(2);
  Tensor alias = stacked;
  EXPECT_EQ(tracker->live_bytes(), 64);
  stacked = Tensor();
  alias = Tensor();
  EXPECT_EQ(tracker->live_bytes(), 64);  // the view keeps the buffer alive
  step = Tensor();
  EXPECT_EQ(tracker->live_bytes(), 0);
}

TEST(MemoryTrackerTest, LimitThrowsBeforeAllocating) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_limit_bytes(100);
  tracker->set_site("matmul at test:1");
  Tensor ok = Tensor::Zeros(DType::kF32, Shape({20}), tracker);  // 80 bytes
  try {
    Tensor too_big = Tensor::Zeros(DType::kF32, Shape({20}), tracker);
    FAIL() << "expected the limit to throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul at test:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-memory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tracker->live_bytes(), 80);
}

TEST(MemoryTrackerTest, SoftCapCallsThePressureHookWhichMakesRoom) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_soft_cap_bytes(100);
  std::vector<Tensor> held;
  std::vector<int64_t> asked;
  tracker->set_pressure_hook([&](int64_t bytes_to_free) {
    asked.push_back(bytes_to_free);
    held.erase(held.begin());  // evicts the oldest: 40 bytes
  });
  held.push_back(Tensor::Zeros(DType::kF32, Shape({10}), tracker));  // 40
  held.push_back(Tensor::Zeros(DType::kF32, Shape({10}), tracker));  // 80
  EXPECT_TRUE(asked.empty());  // under the cap: no call
  // 80 live + 40 would be 120 > 100: the hook is asked for 20 bytes and frees 40.
  held.push_back(Tensor::Zeros(DType::kF32, Shape({10}), tracker));
  EXPECT_EQ(asked, std::vector<int64_t>{20});
  EXPECT_EQ(tracker->pressure_calls(), 1);
  EXPECT_EQ(tracker->live_bytes(), 80);
  EXPECT_EQ(tracker->peak_bytes(), 80);  // the cap was never passed, not even for a moment
  // Exactly at the cap is allowed: 80 + 20 = 100.
  Tensor fits = Tensor::Zeros(DType::kF32, Shape({5}), tracker);
  EXPECT_EQ(asked.size(), 1u);
  EXPECT_EQ(tracker->peak_bytes(), 100);
}

TEST(MemoryTrackerTest, SoftCapThrowsWhenTheHookCannotMakeRoom) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_soft_cap_bytes(100);
  tracker->set_site("relu at test:7");
  int calls = 0;
  tracker->set_pressure_hook([&](int64_t) { ++calls; });  // frees nothing
  Tensor a = Tensor::Zeros(DType::kF32, Shape({20}), tracker);  // 80 bytes
  try {
    Tensor b = Tensor::Zeros(DType::kF32, Shape({10}), tracker);
    FAIL() << "expected the cap to throw";
  } catch (const MemoryCapError& e) {
    EXPECT_EQ(e.cap_bytes(), 100);
    const std::string m = e.what();
    EXPECT_NE(m.find("relu at test:7"), std::string::npos) << m;
    EXPECT_NE(m.find("cap of 100 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("--memory-cap"), std::string::npos) << m;
  }
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(tracker->live_bytes(), 80);  // nothing counted for the refused allocation
  EXPECT_EQ(tracker->peak_bytes(), 80);
  // A MemoryCapError is a remat::Error; without a hook the cap alone throws.
  tracker->set_pressure_hook(nullptr);
  EXPECT_THROW(Tensor::Zeros(DType::kF32, Shape({10}), tracker), Error);
  // The host tier is not capped.
  Tensor host = Tensor::Zeros(DType::kF32, Shape({100}), tracker, Category::kHost);
  EXPECT_EQ(tracker->live_bytes(), 80);
}

TEST(MemoryTrackerTest, APressureHookThatAllocatesIsAnError) {
  auto tracker = std::make_shared<MemoryTracker>();
  tracker->set_soft_cap_bytes(40);
  tracker->set_pressure_hook([&](int64_t) { Tensor::Zeros(DType::kF32, Shape({1}), tracker); });
  Tensor a = Tensor::Zeros(DType::kF32, Shape({10}), tracker);
  try {
    Tensor b = Tensor::Zeros(DType::kF32, Shape({1}), tracker);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must not allocate"), std::string::npos) << e.what();
  }
  EXPECT_EQ(tracker->live_bytes(), 40);
  // The hook is not left marked as running: a later allocation under the cap works.
  tracker->set_pressure_hook(nullptr);
  a = Tensor();
  Tensor c = Tensor::Zeros(DType::kF32, Shape({10}), tracker);
  EXPECT_EQ(tracker->live_bytes(), 40);
}

TEST(MemoryTrackerTest, HostTierIsSeparate) {
  auto tracker = std::make_shared<MemoryTracker>();
  Tensor host = Tensor::Zeros(DType::kF32, Shape({10}), tracker, Category::kHost);
  EXPECT_EQ(tracker->live_bytes(), 0);
  EXPECT_EQ(tracker->peak_bytes(), 0);
  EXPECT_EQ(tracker->peak_host_bytes(), 40);
}

TEST(TensorTest, SliceSharesStorage) {
  Tensor t = Tensor::FromF32(Shape({3, 2}), {0, 1, 2, 3, 4, 5});
  Tensor row = t.Slice(1);
  EXPECT_EQ(row.shape(), Shape({2}));
  EXPECT_EQ(row.f32()[0], 2.0f);
  row.f32()[1] = 9.0f;
  EXPECT_EQ(t.f32()[3], 9.0f);
  EXPECT_THROW(t.Slice(3), Error);
}

TEST(TensorTest, CastCopyAndBitwiseEqual) {
  Tensor t = Tensor::FromF32(Shape({3}), {1.5f, -2.0f, NAN});
  Tensor d = Cast(t, DType::kF64);
  EXPECT_EQ(d.dtype(), DType::kF64);
  EXPECT_EQ(d.f64()[0], 1.5);
  EXPECT_TRUE(std::isnan(d.f64()[2]));
  Tensor c = Copy(t);
  EXPECT_TRUE(BitwiseEqual(t, c));  // NaN compares equal by bits
  c.f32()[0] = 1.25f;
  EXPECT_FALSE(BitwiseEqual(t, c));
  EXPECT_FALSE(BitwiseEqual(t, d));
  EXPECT_THROW(t.f64(), Error);
}

// The storage ledger sees every Buffer's storage; a tracker sees only its
// own; a dry-run tracker's buffers have none; views and counted arguments
// are not storage.
TEST(TensorTest, StorageLedgerCountsTrackedAndUntrackedStorage) {
  auto tracker = std::make_shared<MemoryTracker>();
  auto dry = std::make_shared<MemoryTracker>();
  dry->set_dry_run(true);
  const int64_t before = TensorStorageBytes();
  Tensor a = Tensor::Zeros(DType::kF32, Shape({4, 5}), tracker);  // 80 bytes, tracked
  Tensor b = Copy(a);                                              // 80 bytes, untracked
  Tensor c = Tensor::Zeros(DType::kF64, Shape({100}), dry);        // no storage
  Tensor view = a.Slice(1);
  tracker->Allocate(1000, Category::kInputs);  // counted, not allocated
  EXPECT_EQ(TensorStorageBytes() - before, 160);
  EXPECT_EQ(tracker->storage_bytes(), 80);
  EXPECT_EQ(dry->storage_bytes(), 0);
  a = Tensor();
  EXPECT_EQ(tracker->storage_bytes(), 80) << "storage allocated, not live";
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

// Buffers' blocks are recycled per thread: tensors made in one thread and
// released in another, or after their thread has ended, are freed (ASan's
// leak check and use-after-free checks run this test in CI), and their
// counts are right.
TEST(TensorTest, TensorsOutliveAndCrossTheirThreads) {
  auto tracker = std::make_shared<MemoryTracker>();
  std::vector<Tensor> made;
  std::thread maker([&] {
    for (int i = 0; i < 1000; ++i) made.push_back(Tensor::Zeros(DType::kF32, Shape({4}), tracker));
  });
  maker.join();  // the maker's pool has ended; its tensors live on
  EXPECT_EQ(tracker->live_bytes(), 1000 * 16);
  for (int round = 0; round < 3; ++round) {
    std::thread freer([&] {
      for (int i = 0; i < 500; ++i) made.pop_back();
      for (int i = 0; i < 500; ++i) made.push_back(Tensor::Zeros(DType::kF32, Shape({4}), tracker));
    });
    freer.join();
  }
  made.clear();
  EXPECT_EQ(tracker->live_bytes(), 0);
  EXPECT_EQ(tracker->peak_bytes(), 1000 * 16);
}

// Small blocks are recycled (by size class): a recycled block is 64-byte
// aligned, holds the whole tensor, and is zero-filled when Zeros asks,
// whatever the tensor before it left there.
TEST(TensorTest, RecycledStorageIsAlignedAndZeroedWhenAsked) {
  for (const int64_t n : {0, 1, 4, 16, 17, 100, 1024, 1025, 5000}) {
    SCOPED_TRACE(n);
    for (int round = 0; round < 3; ++round) {
      Tensor dirty = Tensor::Uninitialized(DType::kF32, Shape({n}), nullptr);
      if (n > 0) std::memset(dirty.raw(), 0xff, static_cast<size_t>(dirty.bytes()));
      dirty = Tensor();
      const Tensor clean = Tensor::Zeros(DType::kF32, Shape({n}), nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(clean.raw()) % 64, 0u);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(clean.f32()[i], 0.0f) << i;
    }
  }
}

}  // namespace
}  // namespace remat
