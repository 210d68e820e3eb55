#ifndef REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_
#define REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/shape.h"

namespace remat {

// One matmul's operands as OneDnnKernels was asked for it: a (transposed
// when transpose_a) times b (when transpose_b), batched over the leading
// axes of rank-3 and rank-4 operands.
struct MatMulCall {
  Shape a;
  bool transpose_a = false;
  Shape b;
  bool transpose_b = false;

  bool operator==(const MatMulCall& o) const {
    return a == o.a && transpose_a == o.transpose_a && b == o.b && transpose_b == o.transpose_b;
  }
  // "[256,512] x [512,512]^T".
  std::string ToString() const;
};

// One matmul as it was made: its operands' shapes and transposes, and
// where their elements were (Tensor::raw(): the buffer's address plus the
// view's offset), so that a replay can give operands the same aliasing as
// the run's: the same buffer where the run read the same buffer.
struct RecordedMatMul {
  MatMulCall call;
  const void* a_data = nullptr;
  const void* b_data = nullptr;
};

// Records every matmul OneDnnKernels runs on the calling thread while the
// recorder lives, in order. Dry runs' matmuls (planned, not run) and empty
// products (a zero-sized output or contraction: no primitive) are not
// recorded. Recorders nest like
// MatMulImplRecorder (engines/onednn/platform.h): every enclosing one
// records too. Create, use and destroy on one thread, innermost first.
//
//   MatMulCallRecorder recorder;
//   eager->ValueAndGrad(program, inputs, wrt, options);
//   recorder.calls();  // {{[256,512] x [512,512], x's data, w's data}, ...}
class MatMulCallRecorder {
 public:
  MatMulCallRecorder();
  ~MatMulCallRecorder();
  MatMulCallRecorder(const MatMulCallRecorder&) = delete;
  MatMulCallRecorder& operator=(const MatMulCallRecorder&) = delete;

  // Every call so far, in the order made.
  const std::vector<RecordedMatMul>& calls() const { return calls_; }

 private:
  friend struct MatMulCallRecorderAccess;
  MatMulCallRecorder* outer_;
  std::vector<RecordedMatMul> calls_;
};

namespace matmul_calls_internal {
// Called by OneDnnKernels for every matmul it runs.
void NoteMatMulCall(const Shape& a, bool transpose_a, const void* a_data, const Shape& b,
                    bool transpose_b, const void* b_data);
}  // namespace matmul_calls_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_
