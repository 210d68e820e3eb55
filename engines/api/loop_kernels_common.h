// How the loop kernels (loop_kernels.h) run: their loops split between
// OpenMP's threads (ForEachIndex, ForRowBlocks) and between vector lanes
// (ForEachLaneBlock, LaneBlockPass) without changing a bit, and the
// contract's order for choices (ChosenBefore), which top_k_softmax and
// max_pool2d share; and integer indices read and checked against their bound
// before any thread starts (CheckedIndices), which the index kernels and
// cross_entropy share.
#ifndef REMAT_ENGINES_API_LOOP_KERNELS_COMMON_H_
#define REMAT_ENGINES_API_LOOP_KERNELS_COMMON_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/lane_blocks.h"
#include "engines/api/tensor.h"

namespace remat {
namespace loop_kernels {

// Loops over at least ParallelMinElements() elements split their rows (or
// elements) between OpenMP's threads where the including file is built with
// OpenMP (the oneDNN backend; the reference backend runs them on one
// thread): kParallelMinElementsPerThread for each thread the team would
// have. Below it a loop runs on the calling thread: starting the team costs
// about a microsecond. Per thread, because a fixed threshold would start
// every thread of a wide machine for a few hundred elements each. On two
// threads it is 16384: eager's share of its matmul bound was the same
// within a point at 8192 to 32768 on gpt, moe, transformer_stack and
// unreached, and 6 to 10 points lower on gpt and unreached at 131072 and
// up, on moe at 524288 (bench --engines=eager --windows=1, alternating).
inline constexpr int64_t kParallelMinElementsPerThread = 8192;
inline int64_t ParallelMinElements() {
#ifdef _OPENMP
  return kParallelMinElementsPerThread * omp_get_max_threads();
#else
  return kParallelMinElementsPerThread;
#endif
}

// Runs body(i) for every i in [0, count), split between OpenMP's threads
// (statically, in index order) where the including file is built with
// OpenMP and `elements`, the loop's work in elements, is at least
// ParallelMinElements(). Contract for body: index i's arithmetic is its own
// (it writes only what belongs to i, and nothing it reads is written by
// another index), so the split changes no bit; what sums over indices sums
// after the loop, in index order. body must not throw: an exception leaving
// an OpenMP loop ends the process, so inputs are checked before.
template <typename F>
void ForEachIndex(int64_t count, int64_t elements, F&& body) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (elements >= ParallelMinElements())
#endif
  for (int64_t i = 0; i < count; ++i) body(i);
}

// A row's sum is a chain of dependent additions, one every few cycles (the
// add's latency), and a kernel that sums one row after another runs at the
// chain's speed: moe's rms_norm over 256 rows of 64 took 20 us a call on
// one thread. ForRowBlocks hands a body kRowBlock rows side by side, each
// still summed in its own index order (so the bits are those of one row
// alone), so that their chains overlap.
inline constexpr int kRowBlock = 8;

// On a function whose loops keep kRowBlock scalar sums: GCC otherwise packs
// a block's sums into vectors that it stores and reloads every column, a
// chain through memory as slow as the one it replaced.
#if defined(__GNUC__) && !defined(__clang__)
#define REMAT_SCALAR_CHAINS __attribute__((optimize("no-tree-vectorize")))
#else
#define REMAT_SCALAR_CHAINS
#endif

// On an elementwise loop (each index's arithmetic its own, no sum across
// indices, so vector lanes give each element the scalar's bits): vectorize
// it where the including file is built with OpenMP. -O2's cost model will
// not vectorize a loop whose count is not known to be a multiple of the
// vector's width. (Not for clang, which builds only the fuzzers, at -O1,
// where it cannot vectorize and would say so for every loop.)
#if defined(_OPENMP) && !defined(__clang__)
#define REMAT_ELEMENTWISE_SIMD _Pragma("omp simd")
#else
#define REMAT_ELEMENTWISE_SIMD
#endif

// Calls body.template operator()<N>(r0) on rows [r0, r0 + N) for every
// block of kRows rows of `rows` (N = kRows) and then each row left over
// (N = 1), the blocks split between OpenMP's threads as ForEachIndex splits
// indices (`elements`: the loop's work). The same contract for body.
template <int kRows = kRowBlock, typename Body>
void ForRowBlocks(int64_t rows, int64_t elements, Body&& body) {
  const int64_t blocks = rows / kRows;
  ForEachIndex(blocks, elements, [&](int64_t b) { body.template operator()<kRows>(b * kRows); });
  for (int64_t r = blocks * kRows; r < rows; ++r) body.template operator()<1>(r);
}

inline int64_t IndexAt(const char* kernel, const Tensor& ids, int64_t p, int64_t bound) {
  const int32_t id = ids.i32()[p];
  if (id < 0 || id >= bound) {
    throw Error(StrCat(kernel, ": index ", id, " at position ", p, " is outside [0, ", bound, ")"));
  }
  return id;
}

// KernelAttrs::skip's index, or null when it holds none.
inline const int64_t* Skip(const KernelAttrs& a) { return a.skip.empty() ? nullptr : a.skip.data(); }

// Every position's index, checked before any thread starts (an Error thrown
// inside an OpenMP loop would end the process).
// With `skip` given, a position whose index equals *skip (cross_entropy's
// ignore_index, which may lie outside the bound) is -1 and not checked.
inline std::vector<int64_t> CheckedIndices(const char* kernel, const Tensor& ids, int64_t count,
                                           int64_t bound, const int64_t* skip = nullptr) {
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t p = 0; p < count; ++p) {
    out[static_cast<size_t>(p)] =
        skip != nullptr && ids.i32()[p] == *skip ? -1 : IndexAt(kernel, ids, p, bound);
  }
  return out;
}

// Float32 elementwise passes go in blocks of this many elements, each on
// the vector lanes of lane_blocks.h, the blocks split between OpenMP's
// threads: 16 KiB of input, a few microseconds of work.
inline constexpr int64_t kLaneBlockElements = 4096;

// Runs block(offset, length) over [0, n) in kLaneBlockElements pieces, split
// between the threads as ForEachIndex splits indices.
template <typename F>
void ForEachLaneBlock(int64_t n, F&& block) {
  const int64_t blocks = (n + kLaneBlockElements - 1) / kLaneBlockElements;
  ForEachIndex(blocks, n, [&](int64_t b) {
    const int64_t offset = b * kLaneBlockElements;
    block(offset, std::min(kLaneBlockElements, n - offset));
  });
}

// A float32 elementwise pass of lane_blocks.h's `block` (Silu, Sin, ...) over
// x into out, on the best lanes the run may use (BestLaneIsa, which follows
// ONEDNN_MAX_CPU_ISA), in ForEachLaneBlock's pieces: every path gives the
// scalar formula's bits, so an element's bits depend on neither the ISA nor
// the thread count.
template <typename Block>
void LaneBlockPass(const Tensor& x, Tensor& out, Block block) {
  const float* in = x.f32();
  float* o = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  ForEachLaneBlock(out.num_elements(),
                   [&](int64_t i, int64_t len) { block(isa, in + i, o + i, len); });
}

// The same for a backward block of x and the cotangent dy.
template <typename Block>
void LaneBlockPass(const Tensor& x, const Tensor& dy, Tensor& out, Block block) {
  const float* in = x.f32();
  const float* g = dy.f32();
  float* o = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  ForEachLaneBlock(out.num_elements(),
                   [&](int64_t i, int64_t len) { block(isa, in + i, g + i, o + i, len); });
}

// The contract's order for choices: a before b when a > b, or a is NaN and b
// is not; among equal values the lower index (the caller's scan order).
template <typename T>
bool ChosenBefore(T a, T b) {
  return a > b || (std::isnan(a) && !std::isnan(b));
}

}  // namespace loop_kernels
}  // namespace remat

#endif  // REMAT_ENGINES_API_LOOP_KERNELS_COMMON_H_
