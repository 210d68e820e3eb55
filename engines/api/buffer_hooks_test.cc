#include "engines/api/buffer_hooks.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/tensor.h"

namespace remat {
namespace {

class ArenaOf64 : public BufferStorage {
 public:
  explicit ArenaOf64(const MemoryTracker* tracker) : tracker_(tracker) {}
  const MemoryTracker* tracker() const override { return tracker_; }
  void* Take(int64_t bytes, Category) override {
    ++takes;
    return bytes <= 64 ? storage : nullptr;
  }
  alignas(64) char storage[64];
  int takes = 0;

 private:
  const MemoryTracker* tracker_;
};

TEST(BufferHooksTest, StorageComesFromTheArenaAndIsCountedButNotOwned) {
  auto tracker = std::make_shared<MemoryTracker>();
  ArenaOf64 arena(tracker.get());
  const int64_t ledger = TensorStorageBytes();
  {
    const ScopedBufferStorage placed(&arena);
    Tensor small = Tensor::Zeros(DType::kF32, Shape({16}), tracker);
    EXPECT_EQ(small.raw(), static_cast<void*>(arena.storage));
    EXPECT_EQ(small.f32()[15], 0.0f);  // zero-filled in place
    EXPECT_EQ(tracker->live_bytes(), 64);
    EXPECT_EQ(TensorStorageBytes(), ledger);  // the arena's, not a new allocation
    // Too big for this arena: allocated as usual.
    Tensor big = Tensor::Zeros(DType::kF32, Shape({32}), tracker);
    EXPECT_NE(big.raw(), static_cast<void*>(arena.storage));
    EXPECT_EQ(TensorStorageBytes(), ledger + 128);
    // Another tracker's buffers are not the arena's business.
    Tensor other = Tensor::Zeros(DType::kF32, Shape({4}), std::make_shared<MemoryTracker>());
    EXPECT_EQ(arena.takes, 2);
  }
  EXPECT_EQ(tracker->live_bytes(), 0);
  // The ledger counts what was allocated: the big buffer and the other's.
  EXPECT_EQ(TensorStorageBytes() - ledger, 128 + 16);
}

class Log : public BufferRecorder {
 public:
  explicit Log(const MemoryTracker* tracker) : tracker_(tracker) {}
  const MemoryTracker* tracker() const override { return tracker_; }
  void OnCreate(const Buffer*, int64_t bytes, Category, bool zero) override {
    events.push_back(zero ? bytes : -bytes);
  }
  void OnDestroy(const Buffer*) override { events.push_back(0); }
  void OnCopy(const Tensor&, const Tensor&) override { ++copies; }
  void OnCast(const Tensor&, const Tensor&) override { ++casts; }
  void OnCopyInto(const Tensor&, const Tensor&) override {}
  void OnZeroFill(const Tensor&) override {}
  void OnSetOne(const Tensor&) override {}
  std::vector<int64_t> events;
  int copies = 0, casts = 0;

 private:
  const MemoryTracker* tracker_;
};

TEST(BufferHooksTest, ARecorderSeesItsDryRunsBuffersAndCopies) {
  auto dry = std::make_shared<MemoryTracker>();
  dry->set_dry_run(true);
  Log log(dry.get());
  const ScopedBufferRecorder recording(&log);
  {
    Tensor a = Tensor::Zeros(DType::kF32, Shape({2}), dry);
    Tensor b = Tensor::Uninitialized(DType::kF32, Shape({3}), dry);
    Tensor c = Copy(a, dry);
    Tensor d = Cast(a, DType::kF64, dry);
    Tensor real = Tensor::Zeros(DType::kF32, Shape({2}), std::make_shared<MemoryTracker>());
  }
  EXPECT_EQ(log.events, (std::vector<int64_t>{8, -12, 8, 16, 0, 0, 0, 0}));
  EXPECT_EQ(log.copies, 1);
  EXPECT_EQ(log.casts, 1);
}

TEST(TensorViewTest, ViewsWithinTheBufferOnly) {
  const Tensor t = Tensor::FromF32(Shape({2, 3}), {1, 2, 3, 4, 5, 6});
  const Tensor row = t.View(12, Shape({3}));
  EXPECT_EQ(row.offset_bytes(), 12);
  EXPECT_EQ(row.f32()[0], 4.0f);
  EXPECT_EQ(t.Slice(1).offset_bytes(), 12);
  EXPECT_THROW(t.View(16, Shape({3})), Error);
  EXPECT_THROW(t.View(-4, Shape({1})), Error);
}

}  // namespace
}  // namespace remat
