#include "engines/api/buffer_hooks.h"

namespace remat {
namespace {

thread_local BufferRecorder* t_recorder = nullptr;
thread_local BufferStorage* t_storage = nullptr;

}  // namespace

BufferRecorder* ActiveRecorder(const MemoryTracker* t) {
  return t_recorder != nullptr && t != nullptr && t_recorder->tracker() == t ? t_recorder : nullptr;
}

BufferStorage* ActiveStorage(const MemoryTracker* t) {
  return t_storage != nullptr && t != nullptr && t_storage->tracker() == t ? t_storage : nullptr;
}

BufferRecorder* ActiveRecorder() { return t_recorder; }

ScopedBufferRecorder::ScopedBufferRecorder(BufferRecorder* recorder) : saved_(t_recorder) {
  t_recorder = recorder;
}
ScopedBufferRecorder::~ScopedBufferRecorder() { t_recorder = saved_; }

ScopedBufferStorage::ScopedBufferStorage(BufferStorage* storage) : saved_(t_storage) {
  t_storage = storage;
}
ScopedBufferStorage::~ScopedBufferStorage() { t_storage = saved_; }

}  // namespace remat
