#include "engines/onednn/matmul_calls.h"

#include <string>

namespace remat {

namespace {
// The thread's innermost recorder; each links to the one it encloses.
thread_local MatMulCallRecorder* t_recorder = nullptr;
}  // namespace

std::string MatMulCall::ToString() const {
  return a.ToString() + (transpose_a ? "^T" : "") + " x " + b.ToString() +
         (transpose_b ? "^T" : "");
}

// Grants NoteMatMulCall access to the recorders' state.
struct MatMulCallRecorderAccess {
  static void Note(const RecordedMatMul& call) {
    for (MatMulCallRecorder* r = t_recorder; r != nullptr; r = r->outer_) {
      r->calls_.push_back(call);
    }
  }
};

MatMulCallRecorder::MatMulCallRecorder() : outer_(t_recorder) { t_recorder = this; }

MatMulCallRecorder::~MatMulCallRecorder() { t_recorder = outer_; }

namespace matmul_calls_internal {
void NoteMatMulCall(const Shape& a, bool transpose_a, const void* a_data, const Shape& b,
                    bool transpose_b, const void* b_data) {
  if (t_recorder == nullptr) return;
  MatMulCallRecorderAccess::Note({{a, transpose_a, b, transpose_b}, a_data, b_data});
}
}  // namespace matmul_calls_internal

}  // namespace remat
