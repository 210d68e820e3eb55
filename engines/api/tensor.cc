#include "engines/api/tensor.h"

#include <malloc.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "engines/api/buffer_hooks.h"
#include "engines/api/error.h"

namespace remat {

const char* DTypeName(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
  }
  return "?";
}

int64_t DTypeSize(DType d) { return d == DType::kF64 ? 8 : 4; }

constexpr size_t kAlignmentBytes = kBufferAlignmentBytes;

namespace {

// glibc serves large blocks with fresh mmap()s and trims freed heap back to
// the kernel, so a run that allocates and frees the same few sizes step
// after step pays a page fault per page of every tensor (about 10% of a
// dense layer's time here). Every block comes from the heap instead (no
// mmap at all: a threshold would still send the biggest blocks, the stacked
// gradient of a deep scan, 256 MiB at L = 256, d = 512, back to the kernel
// every run: a fifth of eager's time there), and up to 2 GiB of freed heap
// is kept for the next run. The tracker counts bytes in use, so this changes
// no measured peak.
void TuneMalloc() {
  static const bool tuned = [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 0x7fffffff);
    return true;
  }();
  (void)tuned;
}

// A new block's first bytes: zeros when asked, else poison when the
// process asks for it (PoisonUninitialized), else left as they were.
void FillNew(char* data, size_t bytes, bool zero) {
  if (zero) {
    std::memset(data, 0, bytes);
  } else if (PoisonUninitialized()) {
    std::memset(data, 0xff, bytes);
  }
}

// The storage ledger (TensorStorageBytes).
std::atomic<int64_t> storage_ledger{0};

// Every kernel output is a Buffer, made by allocate_shared: one small block
// (the Buffer and its reference counts) from malloc and back, per tensor.
// On the scalar chains that was a tenth of a compiled engine's run (glibc's
// per-thread cache holds 7 blocks; a forward pass keeps a thousand). The
// blocks are recycled per thread instead, on a free list of at most
// kMaxPooledBlocks, freed when the thread ends. A block freed by a thread
// whose pool has ended goes back to malloc.
constexpr int64_t kMaxPooledBlocks = 1 << 16;

template <size_t kBytes>
struct BlockPool {
  struct Node {
    Node* next;
  };
  Node* head = nullptr;
  int64_t count = 0;
  ~BlockPool();
};

// Trivially destructible: still readable while the thread's pools are
// being destroyed and after.
thread_local bool pools_ended = false;

template <size_t kBytes>
BlockPool<kBytes>::~BlockPool() {
  pools_ended = true;
  while (head != nullptr) {
    Node* next = head->next;
    std::free(head);
    head = next;
  }
}

template <size_t kBytes>
BlockPool<kBytes>& Pool() {
  thread_local BlockPool<kBytes> pool;
  return pool;
}

template <typename T>
struct PooledAllocator {
  using value_type = T;
  PooledAllocator() = default;
  template <typename U>
  PooledAllocator(const PooledAllocator<U>&) {}
  static_assert(sizeof(T) >= sizeof(void*));

  T* allocate(size_t n) {
    if (n == 1 && !pools_ended) {
      BlockPool<sizeof(T)>& pool = Pool<sizeof(T)>();
      if (pool.head != nullptr) {
        auto* block = pool.head;
        pool.head = block->next;
        --pool.count;
        return reinterpret_cast<T*>(block);
      }
    }
    static_assert(alignof(T) <= alignof(std::max_align_t));
    void* p = std::malloc(n * sizeof(T));
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n == 1 && !pools_ended) {
      BlockPool<sizeof(T)>& pool = Pool<sizeof(T)>();
      if (pool.count < kMaxPooledBlocks) {
        auto* block = reinterpret_cast<typename BlockPool<sizeof(T)>::Node*>(p);
        block->next = pool.head;
        pool.head = block;
        ++pool.count;
        return;
      }
    }
    std::free(p);
  }
  template <typename U>
  bool operator==(const PooledAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const PooledAllocator<U>&) const {
    return false;
  }
};

// Kernel outputs' storage, for small tensors: aligned_alloc carves a
// 64-byte-aligned block out of a larger chunk and frees the rest, and glibc
// consolidates those remainders later; on the scalar chains that was a sixth
// of a compiled engine's run (its returned value and gradient) and about a
// tenth of eager's time per op. Blocks of up to kMaxPooledDataBytes are
// recycled per thread instead, by power-of-two size class, at most
// kMaxPooledBytesPerClass of each kept free. The tracker and the storage
// ledger count a Buffer's bytes, not its block: no measured number changes.
constexpr int kDataClasses = 7;  // 64, 128, ..., 4096 bytes
constexpr size_t kMaxPooledDataBytes = kAlignmentBytes << (kDataClasses - 1);
constexpr size_t kMaxPooledBytesPerClass = size_t{1} << 20;

struct DataPool {
  struct Node {
    Node* next;
  };
  Node* head[kDataClasses] = {};
  size_t free_bytes[kDataClasses] = {};
  ~DataPool() {
    pools_ended = true;
    for (Node* n : head) {
      while (n != nullptr) {
        Node* next = n->next;
        std::free(n);
        n = next;
      }
    }
  }
};

DataPool& Data() {
  thread_local DataPool pool;
  return pool;
}

// The block size a Buffer of `bytes` gets (a multiple of kAlignmentBytes,
// at least one), and its size class (-1: not pooled).
size_t BlockBytes(int64_t bytes, int* size_class) {
  size_t rounded = (static_cast<size_t>(bytes) + kAlignmentBytes - 1) / kAlignmentBytes *
                   kAlignmentBytes;
  if (rounded == 0) rounded = kAlignmentBytes;
  *size_class = -1;
  if (rounded > kMaxPooledDataBytes) return rounded;
  size_t block = kAlignmentBytes;
  int c = 0;
  while (block < rounded) {
    block <<= 1;
    ++c;
  }
  *size_class = c;
  return block;
}

void* TakeData(int64_t bytes, size_t* block_bytes) {
  int c;
  *block_bytes = BlockBytes(bytes, &c);
  if (c >= 0 && !pools_ended) {
    DataPool& pool = Data();
    if (DataPool::Node* n = pool.head[c]) {
      pool.head[c] = n->next;
      pool.free_bytes[c] -= *block_bytes;
      return n;
    }
  }
  return std::aligned_alloc(kAlignmentBytes, *block_bytes);
}

void GiveData(void* data, int64_t bytes) {
  int c;
  const size_t block = BlockBytes(bytes, &c);
  if (c >= 0 && !pools_ended) {
    DataPool& pool = Data();
    if (pool.free_bytes[c] + block <= kMaxPooledBytesPerClass) {
      auto* n = static_cast<DataPool::Node*>(data);
      n->next = pool.head[c];
      pool.head[c] = n;
      pool.free_bytes[c] += block;
      return;
    }
  }
  std::free(data);
}

}  // namespace

int64_t TensorStorageBytes() { return storage_ledger.load(std::memory_order_relaxed); }

// Poison is 0xff bytes (a NaN in f32 and f64, -1 in i32) instead of
// whatever the pool or the heap held: a kernel that reads an output element,
// or a scratchpad word, before writing it then gives NaN on every run
// instead of a wrong value on some runs only (the one that reused a block).
bool PoisonUninitialized() {
  static const bool poison = [] {
    const char* v = std::getenv("REMAT_POISON_UNINITIALIZED");
    return v != nullptr && v[0] != '\0' && std::strcmp(v, "0") != 0;
  }();
  return poison;
}

Buffer::Buffer(int64_t bytes, std::shared_ptr<MemoryTracker> tracker, Category category,
               bool zero)
    : bytes_(bytes), tracker_(std::move(tracker)), category_(category) {
  TuneMalloc();
  // Count first: a limit violation throws before anything is allocated.
  if (tracker_) tracker_->Allocate(bytes_, category_);
  if (tracker_ && tracker_->dry_run()) {
    BufferRecorder* recorder = ActiveRecorder(tracker_.get());
    if (recorder != nullptr) recorder->OnCreate(this, bytes_, category_, zero);
    return;
  }
  if (BufferStorage* s = ActiveStorage(tracker_.get())) {
    data_ = s->Take(bytes_, category_);
    if (data_ != nullptr) {
      owned_ = false;
      FillNew(static_cast<char*>(data_), static_cast<size_t>(bytes_), zero);
      return;
    }
  }
  size_t rounded = 0;
  data_ = TakeData(bytes_, &rounded);
  if (data_ == nullptr) {
    if (tracker_) tracker_->Release(bytes_, category_);
    throw Error(StrCat("out of memory allocating ", bytes_, " bytes"));
  }
  FillNew(static_cast<char*>(data_), rounded, zero);
  storage_ledger.fetch_add(bytes_, std::memory_order_relaxed);
  if (tracker_) tracker_->AddStorage(bytes_);
}

Buffer::~Buffer() {
  if (tracker_ && tracker_->dry_run()) {
    if (BufferRecorder* r = ActiveRecorder(tracker_.get())) r->OnDestroy(this);
  }
  if (owned_ && data_ != nullptr) GiveData(data_, bytes_);
  if (tracker_) tracker_->Release(bytes_, category_);
}

Tensor Tensor::Zeros(DType dtype, const Shape& shape,
                     const std::shared_ptr<MemoryTracker>& tracker) {
  return Zeros(dtype, shape, tracker, tracker ? tracker->category() : Category::kActivations);
}

Tensor Tensor::Zeros(DType dtype, const Shape& shape,
                     const std::shared_ptr<MemoryTracker>& tracker, Category category) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::allocate_shared<Buffer>(PooledAllocator<Buffer>(), shape.num_elements() * DTypeSize(dtype), tracker,
                                       category);
  return t;
}

Tensor Tensor::Uninitialized(DType dtype, const Shape& shape,
                             const std::shared_ptr<MemoryTracker>& tracker) {
  return Uninitialized(dtype, shape, tracker,
                       tracker ? tracker->category() : Category::kActivations);
}

Tensor Tensor::Uninitialized(DType dtype, const Shape& shape,
                             const std::shared_ptr<MemoryTracker>& tracker, Category category) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.buffer_ = std::allocate_shared<Buffer>(PooledAllocator<Buffer>(),
                                           shape.num_elements() * DTypeSize(dtype), tracker,
                                           category, /*zero=*/false);
  return t;
}

Tensor Tensor::FromF32(const Shape& shape, const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    throw Error(StrCat("FromF32: ", values.size(), " values for shape ", shape.ToString()));
  }
  Tensor t = Zeros(DType::kF32, shape);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::FromF64(const Shape& shape, const std::vector<double>& values) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    throw Error(StrCat("FromF64: ", values.size(), " values for shape ", shape.ToString()));
  }
  Tensor t = Zeros(DType::kF64, shape);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(double));
  return t;
}

Tensor Tensor::FromI32(const Shape& shape, const std::vector<int32_t>& values) {
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) {
    throw Error(StrCat("FromI32: ", values.size(), " values for shape ", shape.ToString()));
  }
  Tensor t = Zeros(DType::kI32, shape);
  std::memcpy(t.raw(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

void* Tensor::raw() const {
  if (!buffer_) throw Error("use of an undefined tensor");
  if (buffer_->data() == nullptr) return nullptr;
  return static_cast<char*>(buffer_->data()) + offset_bytes_;
}

float* Tensor::f32() const {
  if (dtype_ != DType::kF32) throw Error(StrCat("tensor is ", TypeString(), ", not f32"));
  return static_cast<float*>(raw());
}

double* Tensor::f64() const {
  if (dtype_ != DType::kF64) throw Error(StrCat("tensor is ", TypeString(), ", not f64"));
  return static_cast<double*>(raw());
}

int32_t* Tensor::i32() const {
  if (dtype_ != DType::kI32) throw Error(StrCat("tensor is ", TypeString(), ", not i32"));
  return static_cast<int32_t*>(raw());
}

double Tensor::at(int64_t i) const {
  switch (dtype_) {
    case DType::kF32: return static_cast<double>(f32()[i]);
    case DType::kF64: return f64()[i];
    case DType::kI32: return static_cast<double>(i32()[i]);
  }
  return 0;
}

Tensor Tensor::Slice(int64_t i) const {
  if (shape_.rank() == 0 || i < 0 || i >= shape_.dim(0)) {
    throw Error(StrCat("slice ", i, " out of range for ", TypeString()));
  }
  Tensor t = *this;
  t.shape_ = shape_.DropLeading();
  t.offset_bytes_ = offset_bytes_ + i * t.bytes();
  return t;
}

Tensor Tensor::View(int64_t offset_bytes, const Shape& shape) const {
  if (!buffer_) throw Error("view of an undefined tensor");
  const int64_t bytes = shape.num_elements() * DTypeSize(dtype_);
  if (offset_bytes < 0 || offset_bytes + bytes > buffer_->bytes()) {
    throw Error(StrCat("view of ", bytes, " bytes at offset ", offset_bytes, " out of a buffer of ",
                       buffer_->bytes(), " bytes"));
  }
  Tensor t = *this;
  t.shape_ = shape;
  t.offset_bytes_ = offset_bytes;
  return t;
}

Tensor Tensor::Reshaped(const Shape& shape) const {
  if (shape.num_elements() != num_elements()) {
    throw Error(StrCat("cannot reshape ", TypeString(), " to ", shape.ToString()));
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

std::string Tensor::TypeString() const {
  return StrCat(DTypeName(dtype_), shape_.ToString());
}

Tensor Cast(const Tensor& t, DType dtype, const std::shared_ptr<MemoryTracker>& tracker) {
  Tensor out = Tensor::Zeros(dtype, t.shape(), tracker);
  if (BufferRecorder* r = ActiveRecorder(tracker.get())) r->OnCast(t, out);
  if (out.dry() || t.dry()) return out;
  const int64_t n = t.num_elements();
  if (dtype == DType::kF64) {
    double* o = out.f64();
    for (int64_t i = 0; i < n; ++i) o[i] = t.at(i);
  } else if (dtype == DType::kI32) {
    // Integers stay integers (ids, seeds): a float that is not one is an
    // error, never truncated.
    int32_t* o = out.i32();
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.at(i);
      if (!(v == std::floor(v) && std::abs(v) <= 2147483647.0)) {
        throw Error(StrCat("cast of ", t.TypeString(), " to i32: element ", i, " is ", v,
                           ", not an integer in range"));
      }
      o[i] = static_cast<int32_t>(v);
    }
  } else {
    float* o = out.f32();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(t.at(i));
  }
  return out;
}

Tensor Copy(const Tensor& t, const std::shared_ptr<MemoryTracker>& tracker) {
  Tensor out = Tensor::Zeros(t.dtype(), t.shape(), tracker);
  if (BufferRecorder* r = ActiveRecorder(tracker.get())) r->OnCopy(t, out);
  if (out.dry() || t.dry()) return out;
  std::memcpy(out.raw(), t.raw(), t.bytes());
  return out;
}

bool BitwiseEqual(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

}  // namespace remat
