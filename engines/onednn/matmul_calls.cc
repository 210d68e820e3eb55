#include "engines/onednn/matmul_calls.h"

#include <algorithm>
#include <string>

namespace remat {

namespace {
// The thread's innermost recorder; each links to the one it encloses. Per
// thread, so that recording costs no lock on a path every matmul takes.
thread_local MatMulRecorder* t_recorder = nullptr;
}  // namespace

// Grants NoteMatMul access to the recorders' state.
struct MatMulRecorderAccess {
  static void Note(const std::string& impl) {
    for (MatMulRecorder* r = t_recorder; r != nullptr; r = r->outer_) {
      // A handful of distinct impls at most: a linear scan costs less than
      // a set's allocation.
      if (std::find(r->impls_.begin(), r->impls_.end(), impl) == r->impls_.end()) {
        r->impls_.push_back(impl);
      }
    }
  }
};

MatMulRecorder::MatMulRecorder() : outer_(t_recorder) {
  t_recorder = this;
}

MatMulRecorder::~MatMulRecorder() { t_recorder = outer_; }

std::vector<std::string> MatMulRecorder::impls() const {
  std::vector<std::string> out = impls_;
  std::sort(out.begin(), out.end());
  return out;
}

namespace matmul_calls_internal {
void NoteMatMul(const std::string& impl) {
  if (t_recorder == nullptr) return;
  MatMulRecorderAccess::Note(impl);
}
}  // namespace matmul_calls_internal

}  // namespace remat
