#ifndef REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_
#define REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_

#include <cstdint>
#include <string>
#include <vector>


namespace remat {

// Records the distinct impls (impl_info_str) of the matmuls OneDnnKernels
// runs on the calling thread while the recorder lives, whether the
// primitive was created now or taken from a kernels instance's cache:
// exactly what that stretch of work dispatched to. Dry runs' matmuls
// (planned, not run) and empty products (a zero-sized output or
// contraction: no primitive) are not recorded. A comparison with each impl
// seen per matmul, so it may wrap timed work (a benchmark row's runs).
// Recorders nest: the innermost is the thread's current one, and every
// enclosing one records too. Not shared across threads (oneDNN's OpenMP
// workers never call back): create, use and destroy on one thread,
// innermost first. (Each call's shapes and addresses, matmuls and
// convolutions alike: KernelTrafficRecorder's kContractionSites,
// engines/onednn/kernel_traffic.h.)
//
//   MatMulRecorder recorder;
//   eager->ValueAndGrad(program, inputs, wrt, options);
//   recorder.impls();  // {"brg:avx512_core"}
class MatMulRecorder {
 public:
  MatMulRecorder();
  ~MatMulRecorder();
  MatMulRecorder(const MatMulRecorder&) = delete;
  MatMulRecorder& operator=(const MatMulRecorder&) = delete;

  // The distinct impls run so far, sorted.
  std::vector<std::string> impls() const;

 private:
  friend struct MatMulRecorderAccess;
  MatMulRecorder* outer_;
  std::vector<std::string> impls_;  // distinct, in the order first seen
};

namespace matmul_calls_internal {
// Called by OneDnnKernels for every matmul it runs (not in dry runs).
void NoteMatMul(const std::string& impl);
}  // namespace matmul_calls_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_MATMUL_CALLS_H_
