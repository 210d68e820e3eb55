// Tensor: a dtype, a shape and contiguous row-major storage. Storage is
// shared (copies of a Tensor alias the same buffer) and counted by the
// MemoryTracker it was allocated from until the last alias goes away. A
// tensor may be a view of a contiguous slice of another's buffer (scan takes
// step i of a stacked input this way, without copying).
#ifndef REMAT_ENGINES_API_TENSOR_H_
#define REMAT_ENGINES_API_TENSOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "engines/api/memory_tracker.h"
#include "engines/api/shape.h"

namespace remat {

enum class DType { kF32, kF64, kI32 };
const char* DTypeName(DType d);  // "f32", "f64", "i32"
int64_t DTypeSize(DType d);

// Every Buffer's data starts at a multiple of this many bytes (oneDNN's
// vector kernels like it); a view is as aligned as its offset makes it.
inline constexpr int64_t kBufferAlignmentBytes = 64;

// Owns one allocation and reports it to its tracker (if any) for its life.
class Buffer {
 public:
  // Allocates `bytes`, zero-filled, counted in `category`. A null tracker
  // means uncounted; a dry-run tracker counts the bytes but allocates nothing
  // (data() is null).
  Buffer(int64_t bytes, std::shared_ptr<MemoryTracker> tracker, Category category,
         bool zero = true);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  int64_t bytes() const { return bytes_; }
  Category category() const { return category_; }

 private:
  void* data_ = nullptr;
  bool owned_ = true;  // false: storage of a BufferStorage's arena (buffer_hooks.h)
  int64_t bytes_ = 0;
  std::shared_ptr<MemoryTracker> tracker_;
  Category category_;
};

class Tensor {
 public:
  Tensor() = default;  // an empty handle; defined() is false

  // A new zero-filled tensor counted by `tracker` (may be null).
  static Tensor Zeros(DType dtype, const Shape& shape,
                      const std::shared_ptr<MemoryTracker>& tracker = nullptr);
  static Tensor Zeros(DType dtype, const Shape& shape,
                      const std::shared_ptr<MemoryTracker>& tracker, Category category);
  // A new tensor whose contents are unspecified: for kernel outputs, which
  // write every element (zero-filling them would cost a pass over memory).
  // Under REMAT_POISON_UNINITIALIZED=1 (read once per process) every byte is
  // 0xff, a NaN in f32 and f64: a kernel that reads before it writes shows.
  static Tensor Uninitialized(DType dtype, const Shape& shape,
                              const std::shared_ptr<MemoryTracker>& tracker);
  // The same, counted in `category` (a primitive's scratchpad).
  static Tensor Uninitialized(DType dtype, const Shape& shape,
                              const std::shared_ptr<MemoryTracker>& tracker, Category category);
  // A new tensor of `shape` holding `values` (row-major), uncounted.
  static Tensor FromF32(const Shape& shape, const std::vector<float>& values);
  static Tensor FromF64(const Shape& shape, const std::vector<double>& values);
  static Tensor FromI32(const Shape& shape, const std::vector<int32_t>& values);

  bool defined() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  int64_t bytes() const { return num_elements() * DTypeSize(dtype_); }

  // The first element; null for a tensor of a dry-run tracker.
  void* raw() const;
  bool dry() const { return buffer_ && buffer_->data() == nullptr; }
  float* f32() const;    // checks dtype
  double* f64() const;   // checks dtype
  int32_t* i32() const;  // checks dtype
  double at(int64_t i) const;  // element i as double, any dtype (exact: i32 fits)

  // Step i of a tensor with a leading axis: shares storage.
  Tensor Slice(int64_t i) const;
  // Same storage, another shape with the same number of elements.
  Tensor Reshaped(const Shape& shape) const;
  // Where the view starts in its buffer, in bytes.
  int64_t offset_bytes() const { return offset_bytes_; }
  // A view of `shape` starting `offset_bytes` into this tensor's buffer;
  // remat::Error unless it lies within the buffer.
  Tensor View(int64_t offset_bytes, const Shape& shape) const;
  // The buffer's identity, for counting shared storage once.
  const Buffer* buffer() const { return buffer_.get(); }

  // "f32[5,4]"
  std::string TypeString() const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  int64_t offset_bytes_ = 0;
};

// Bytes of tensor storage every Buffer of the process has allocated since it
// started, counted by a tracker or not (dry-run buffers have none).
// Thread-safe. The storage ledger: a run's share of it (the difference across
// the run) must equal what its trackers counted (MemoryTracker::
// storage_bytes), or the run allocated storage outside them.
int64_t TensorStorageBytes();

// Whether this process fills every uninitialized tensor with poison (0xff
// bytes, a NaN in f32 and f64): REMAT_POISON_UNINITIALIZED set to anything
// but "" or "0", read once per process.
bool PoisonUninitialized();

// A copy of `t` converted to `dtype`, counted by `tracker` (may be null).
Tensor Cast(const Tensor& t, DType dtype,
            const std::shared_ptr<MemoryTracker>& tracker = nullptr);
// A deep copy (same dtype), counted by `tracker` (may be null).
Tensor Copy(const Tensor& t, const std::shared_ptr<MemoryTracker>& tracker = nullptr);
// True when both have the same dtype, shape and bytes (NaNs compare by bits).
bool BitwiseEqual(const Tensor& a, const Tensor& b);

}  // namespace remat

#endif  // REMAT_ENGINES_API_TENSOR_H_
