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

// One matmul as it ran: its operands' shapes and transposes, where their
// elements and its output's were (Tensor::raw(): the buffer's address plus
// the view's offset), so that a replay can give operands and outputs the
// same aliasing as the run's (the same buffer where the run read or wrote
// the same buffer), and the impl_info_str of the oneDNN primitive it ran on.
struct RecordedMatMul {
  MatMulCall call;
  const void* a_data = nullptr;
  const void* b_data = nullptr;
  const void* out_data = nullptr;
  std::string impl;
};

// Records the matmuls OneDnnKernels runs on the calling thread while the
// recorder lives: always the distinct impls they ran on (whether the
// primitive was created now or taken from a kernels instance's cache:
// exactly what that stretch of work dispatched to), and with Detail::kCalls
// every call, in order. Dry runs' matmuls (planned, not run) and empty
// products (a zero-sized output or contraction: no primitive) are not
// recorded. Recorders nest: the innermost is the thread's current one, and
// every enclosing one records too. Not shared across threads (oneDNN's
// OpenMP workers never call back): create, use and destroy on one thread,
// innermost first.
//
//   MatMulRecorder recorder(MatMulRecorder::Detail::kCalls);
//   eager->ValueAndGrad(program, inputs, wrt, options);
//   recorder.impls();  // {"brg:avx512_core"}
//   recorder.calls();  // {{[256,512] x [512,512], x's data, w's data, ...}, ...}
class MatMulRecorder {
 public:
  // kImpls costs a comparison with each impl seen per matmul, so it may
  // wrap timed work (a benchmark row's runs); kCalls copies each call's
  // shapes too.
  enum class Detail { kImpls, kCalls };

  explicit MatMulRecorder(Detail detail = Detail::kImpls);
  ~MatMulRecorder();
  MatMulRecorder(const MatMulRecorder&) = delete;
  MatMulRecorder& operator=(const MatMulRecorder&) = delete;

  // The distinct impls run so far, sorted.
  std::vector<std::string> impls() const;
  // Detail::kCalls: every call so far, in the order made; else empty.
  const std::vector<RecordedMatMul>& calls() const { return calls_; }

 private:
  friend struct MatMulRecorderAccess;
  MatMulRecorder* outer_;
  Detail detail_;
  std::vector<std::string> impls_;  // distinct, in the order first seen
  std::vector<RecordedMatMul> calls_;
};

namespace matmul_calls_internal {
// Called by OneDnnKernels for every matmul it runs (not in dry runs).
void NoteMatMul(const Shape& a, bool transpose_a, const void* a_data, const Shape& b,
                bool transpose_b, const void* b_data, const void* out_data,
                const std::string& impl);
}  // namespace matmul_calls_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_
