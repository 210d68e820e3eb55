#include "engines/onednn/matmul_calls.h"

#include <algorithm>
#include <string>

namespace remat {

namespace {
// The thread's innermost recorder; each links to the one it encloses. Per
// thread, so that recording costs no lock on a path every matmul takes.
thread_local MatMulRecorder* t_recorder = nullptr;
}  // namespace

std::string MatMulCall::ToString() const {
  return a.ToString() + (transpose_a ? "^T" : "") + " x " + b.ToString() +
         (transpose_b ? "^T" : "");
}

// Grants NoteMatMul access to the recorders' state.
struct MatMulRecorderAccess {
  static void Note(const Shape& a, bool transpose_a, const void* a_data, const Shape& b,
                   bool transpose_b, const void* b_data, const void* out_data,
                   const std::string& impl) {
    for (MatMulRecorder* r = t_recorder; r != nullptr; r = r->outer_) {
      // A handful of distinct impls at most: a linear scan costs less than
      // a set's allocation.
      if (std::find(r->impls_.begin(), r->impls_.end(), impl) == r->impls_.end()) {
        r->impls_.push_back(impl);
      }
      if (r->detail_ == MatMulRecorder::Detail::kCalls) {
        r->calls_.push_back({{a, transpose_a, b, transpose_b}, a_data, b_data, out_data, impl});
      }
    }
  }
};

MatMulRecorder::MatMulRecorder(Detail detail) : outer_(t_recorder), detail_(detail) {
  t_recorder = this;
}

MatMulRecorder::~MatMulRecorder() { t_recorder = outer_; }

std::vector<std::string> MatMulRecorder::impls() const {
  std::vector<std::string> out = impls_;
  std::sort(out.begin(), out.end());
  return out;
}

namespace matmul_calls_internal {
void NoteMatMul(const Shape& a, bool transpose_a, const void* a_data, const Shape& b,
                bool transpose_b, const void* b_data, const void* out_data,
                const std::string& impl) {
  if (t_recorder == nullptr) return;
  MatMulRecorderAccess::Note(a, transpose_a, a_data, b, transpose_b, b_data, out_data, impl);
}
}  // namespace matmul_calls_internal

}  // namespace remat
