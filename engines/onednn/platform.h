// Platform: what a number measured on oneDNN depends on, so that results
// from different machines are never compared blindly. oneDNN picks its
// kernels by the CPU's instruction set (capped by ONEDNN_MAX_CPU_ISA): an
// AVX-512 and an AVX2 machine run different matmul implementations, with
// different scratchpads and different summation orders, so both bits and
// memory (the scratchpad's share of the peak) may differ between them.
//
//   PlatformInfo p = DescribePlatform();
//   p.cpu_model      "AMD EPYC 7B13"            (/proc/cpuinfo's model name)
//   p.onednn_isa     "avx512_core"              (dnnl::get_effective_cpu_isa)
//   p.isa_cap        "AVX2" or "" when unset    (ONEDNN_MAX_CPU_ISA)
//   p.matmul_impl    "brg:avx512_core"          (impl_info_str of the f32
//                                                matmul on kReferenceMatMul)
#ifndef REMAT_ENGINES_ONEDNN_PLATFORM_H_
#define REMAT_ENGINES_ONEDNN_PLATFORM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace remat {

// The oneDNN library this binary runs with, e.g.
// "oneDNN 2.6.3 (cpu runtime: OpenMP)".
std::string OneDnnVersion();

struct PlatformInfo {
  std::string cpu_model;       // /proc/cpuinfo "model name"; "unknown" if absent
  int cpus = 0;                // online logical CPUs
  std::string onednn_version;  // OneDnnVersion()
  std::string onednn_isa;      // the ISA oneDNN dispatches to, the cap applied
  std::string isa_cap;         // $ONEDNN_MAX_CPU_ISA, "" when unset
  std::string matmul_impl;     // impl_info_str of the reference f32 matmul
  // The vector lanes of our own elementwise passes (lane_blocks.h: "avx512",
  // "avx2", "baseline"), the cap applied as to oneDNN.
  std::string lanes;
  int omp_threads = 0;         // omp_get_max_threads()
  // How its threads wait at barriers (OpenMpWait, omp_wait.h): how much a
  // neighbour on the machine costs a run.
  std::string omp_wait;
  // Where malloc puts the heap (MallocSetting, omp_wait.h).
  std::string malloc_setting;
};

// The shape (m, k, n) whose f32 matmul PlatformInfo::matmul_impl names: a
// mid-sized plain (m,k)x(k,n), as scan_stack's default runs.
inline constexpr int64_t kReferenceMatMul[3] = {256, 512, 512};

// Reads the machine and oneDNN's dispatch. Cheap after the first call (the
// matmul primitive descriptor is created once per process).
const PlatformInfo& DescribePlatform();

// impl_info_str of oneDNN's f32 matmul for (m,k)x(k,n) with plain layouts,
// as OneDnnKernels creates it ("brg:avx512_core", "gemm:jit", ...).
std::string OneDnnMatMulImpl(int64_t m, int64_t k, int64_t n);

// The distinct impl_info_str of every matmul primitive any OneDnnKernels in
// this process has created, sorted: what a run's matmuls really dispatched to.
// Process-wide and cumulative; for one stretch of work, see
// MatMulRecorder (engines/onednn/matmul_calls.h).
std::vector<std::string> OneDnnMatMulImplsSeen();

// One line: "AMD EPYC 7B13, 2 CPUs, oneDNN 2.6.3 (...), ISA avx512_core
// (cap: none), matmul brg:avx512_core, lanes avx512, 2 OpenMP threads ...".
std::string FormatPlatform(const PlatformInfo& p);

// Where two platforms differ in what makes numbers incomparable (CPU model,
// oneDNN's ISA, the matmul implementation, our lanes, thread count): one phrase each,
// e.g. "ISA avx512_core vs avx2"; empty when they agree.
std::vector<std::string> PlatformDifferences(const PlatformInfo& a, const PlatformInfo& b);

namespace platform_internal {
// Called by OneDnnKernels for every matmul primitive it creates.
void RecordMatMulImpl(const std::string& impl);
}  // namespace platform_internal

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_PLATFORM_H_
