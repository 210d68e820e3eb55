// Hooks on tensor storage, for engines that compile a run ahead of it
// (engines/planned): a BufferRecorder sees every buffer a run creates and
// destroys and every write made outside a kernel (copies, fills), so that a
// dry run of an executor can be recorded as a flat list of instructions; a
// BufferStorage hands buffers their storage from a preallocated arena, so
// that replaying that list allocates nothing.
//
// Both are per thread and scoped (ScopedBufferRecorder,
// ScopedBufferStorage), and act only on buffers counted by the one tracker
// they name: other trackers' buffers (the caller's, another run's) are
// neither recorded nor placed. With neither installed (every engine but
// planned) a Buffer costs one thread-local load more.
#ifndef REMAT_ENGINES_API_BUFFER_HOOKS_H_
#define REMAT_ENGINES_API_BUFFER_HOOKS_H_

#include <cstdint>

#include "engines/api/memory_tracker.h"

namespace remat {

class Buffer;
class Tensor;

class BufferRecorder {
 public:
  virtual ~BufferRecorder() = default;
  // The tracker whose buffers are recorded.
  virtual const MemoryTracker* tracker() const = 0;
  // A buffer counted by tracker() was created (`zero`: zero-filled), or is
  // being destroyed (its release is counted).
  virtual void OnCreate(const Buffer* buffer, int64_t bytes, Category category, bool zero) = 0;
  virtual void OnDestroy(const Buffer* buffer) = 0;
  // Writes outside kernels, made by the functions named (tensor.h,
  // engines/exec/accumulate.h) or by an executor that calls them: `out` was
  // just created by Copy(src) or Cast(src); `dst` (a view) had `src` copied
  // into it; `dst` was zero-filled; `dst` (rank 0) was set to 1.
  virtual void OnCopy(const Tensor& src, const Tensor& out) = 0;
  virtual void OnCast(const Tensor& src, const Tensor& out) = 0;
  virtual void OnCopyInto(const Tensor& src, const Tensor& dst) = 0;
  virtual void OnZeroFill(const Tensor& dst) = 0;
  virtual void OnSetOne(const Tensor& dst) = 0;
};

class BufferStorage {
 public:
  virtual ~BufferStorage() = default;
  virtual const MemoryTracker* tracker() const = 0;
  // Storage for the next buffer counted by tracker() (already counted there),
  // or null to allocate it as usual (a buffer that outlives the arena). The
  // storage stays the arena's: the buffer never frees it.
  virtual void* Take(int64_t bytes, Category category) = 0;
};

// The recorder and storage hooks of this thread (null: none), for
// tracker `t`; what Buffer and the writers above consult.
BufferRecorder* ActiveRecorder(const MemoryTracker* t);
BufferStorage* ActiveStorage(const MemoryTracker* t);
// The recorder of this thread whatever its tracker: for writers that know
// only the tensor (the recorder checks the tensor's buffer itself).
BufferRecorder* ActiveRecorder();

class ScopedBufferRecorder {
 public:
  explicit ScopedBufferRecorder(BufferRecorder* recorder);
  ~ScopedBufferRecorder();
  ScopedBufferRecorder(const ScopedBufferRecorder&) = delete;
  ScopedBufferRecorder& operator=(const ScopedBufferRecorder&) = delete;

 private:
  BufferRecorder* saved_;
};

class ScopedBufferStorage {
 public:
  explicit ScopedBufferStorage(BufferStorage* storage);
  ~ScopedBufferStorage();
  ScopedBufferStorage(const ScopedBufferStorage&) = delete;
  ScopedBufferStorage& operator=(const ScopedBufferStorage&) = delete;

 private:
  BufferStorage* saved_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_API_BUFFER_HOOKS_H_
