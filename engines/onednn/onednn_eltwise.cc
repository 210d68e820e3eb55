// The elementwise kernels: relu, square, add and mul as passes of our own
// (SSE2 lanes of the scalar formula, a cache line at a time, prefetched);
// sin, cos and their backwards on lane_blocks' formulas; broadcast and
// bias_add as loops; gelu and scale on oneDNN's eltwise primitives.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "engines/api/error.h"
#include "engines/api/lane_blocks.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::Guarded;
using onednn_kernels_internal::Key;
using onednn_kernels_internal::LastDim;
using onednn_kernels_internal::NumRows;
using onednn_kernels_internal::ParallelMinElements;
using onednn_kernels_internal::Types;

namespace {

// The dnnl::algorithm the header's int-typed helpers take (the header does
// not include dnnl.hpp).
constexpr int AlgorithmId(dnnl::algorithm a) { return static_cast<int>(a); }

// An elementwise pass over n floats: `block(i)` does elements i..i+3 and
// `one(i)` element i; whole cache lines of blocks split between OpenMP's
// threads, the blocks after the last whole line and then the tail of fewer
// than four done in order. For relu and its backward, whose selects -O2
// compiled one element at a time (with a branch for the backward's, which
// mispredicts on random signs): in SSE2, which every x86-64 CPU has, four
// lanes of the same IEEE single-precision operations, so the bits are the
// one-at-a-time formula's on every ISA. Without SSE2, every element one at a
// time.
//
// `streams` are the arrays the pass reads and writes, each prefetched
// kPrefetchFloats ahead of the line being done. Their operands are a
// matmul's product just written and a fresh buffer, and on the 2-core Xeon
// (4 MiB of L2, a 480 MiB L3 shared with other guests) neither is still in
// L2 after the matmul: perf annotate of eager's relu on scan_stack L=32
// (`perf record bazel-bin/harness/engine_loop --problem=scan_stack
// --engine=eager --param=L=32`) put 77% of its samples on the load's and
// the store's misses, and a call took 46 us against 7.7 us for the same pass
// over operands in L2. The hardware's prefetcher leaves the pass waiting on
// each line: in a standalone loop over 256 buffers of relu's size, the
// prefetch took a call from 40 to 28 us (median of 2000; in L2, 7.4 against
// 7.4-8.6 us). A prefetch is a hint: past an array's end it loads nothing
// and faults never.
constexpr int64_t kLineFloats = 16;
constexpr int64_t kPrefetchFloats = 1024;  // 4 KiB ahead

template <size_t K>
using Streams = std::array<const void*, K>;

#if defined(__SSE2__)
template <size_t K, typename One, typename Block>
void ForEachFloatBlock(int64_t n, Streams<K> streams, One one, Block block) {
  const int64_t lines = n / kLineFloats;
  // Each thread works on its own copies of the closures and the streams:
  // shared, they are read through a pointer that every store might alias,
  // and were loaded again for every block.
#pragma omp parallel for schedule(static) if (n >= ParallelMinElements()) \
    firstprivate(streams, block)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t i = line * kLineFloats;
    for (const void* s : streams) {
      // Integer arithmetic: a pointer past the array's end is not formed.
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(s) +
                                                 (i + kPrefetchFloats) * sizeof(float)),
                   _MM_HINT_T0);
    }
    for (int64_t j = 0; j < kLineFloats; j += 4) block(i + j);
  }
  int64_t i = lines * kLineFloats;
  for (; i + 4 <= n; i += 4) block(i);
  for (; i < n; ++i) one(i);
}
#endif
template <size_t K, typename One>
void ForEachFloatBlock(int64_t n, const Streams<K>&, One one) {
#pragma omp parallel for schedule(static) if (n >= ParallelMinElements())
  for (int64_t i = 0; i < n; ++i) one(i);
}

// The lambdas below take the arrays' pointers by value: captured by
// reference, every store through `o` might have changed them, and GCC
// loaded each one again through the closure for every block of four (perf
// annotate of add: 3 dependent loads a block, 1.3 cycles an element in L1).
// One pass over `out` of scalar(x[i]) (UnaryFloatPass) or scalar(a[i], b[i])
// (BinaryFloatPass), `lanes` the same formula on four SSE2 lanes (the
// overloads without it, where SSE2 is missing, go one element at a time).
template <typename Scalar>
void UnaryFloatPass(const Tensor& x, Tensor& out, Scalar scalar) {
  const float* in = x.f32();
  float* o = out.f32();
  ForEachFloatBlock(out.num_elements(), Streams<2>{in, o},
                    [in, o, &scalar](int64_t i) { o[i] = scalar(in[i]); });
}
template <typename Scalar>
void BinaryFloatPass(const Tensor& a, const Tensor& b, Tensor& out, Scalar scalar) {
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* o = out.f32();
  ForEachFloatBlock(out.num_elements(), Streams<3>{pa, pb, o},
                    [pa, pb, o, &scalar](int64_t i) { o[i] = scalar(pa[i], pb[i]); });
}
#if defined(__SSE2__)
template <typename Scalar, typename Lanes>
void UnaryFloatPass(const Tensor& x, Tensor& out, Scalar scalar, Lanes lanes) {
  const float* in = x.f32();
  float* o = out.f32();
  ForEachFloatBlock(
      out.num_elements(), Streams<2>{in, o}, [in, o, &scalar](int64_t i) { o[i] = scalar(in[i]); },
      [in, o, &lanes](int64_t i) { _mm_storeu_ps(o + i, lanes(_mm_loadu_ps(in + i))); });
}
template <typename Scalar, typename Lanes>
void BinaryFloatPass(const Tensor& a, const Tensor& b, Tensor& out, Scalar scalar, Lanes lanes) {
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* o = out.f32();
  ForEachFloatBlock(
      out.num_elements(), Streams<3>{pa, pb, o},
      [pa, pb, o, &scalar](int64_t i) { o[i] = scalar(pa[i], pb[i]); },
      [pa, pb, o, &lanes](int64_t i) {
        _mm_storeu_ps(o + i, lanes(_mm_loadu_ps(pa + i), _mm_loadu_ps(pb + i)));
      });
}
#endif

}  // namespace

void OneDnnKernels::State::EltwiseForward(dnnl::algorithm algorithm, const Tensor& x,
                                         Tensor& out,
                                         const std::shared_ptr<MemoryTracker>& tracker,
                                         float alpha, float beta) {
  const auto md = Flat(out);
  const Cached& cached = Lookup<dnnl::eltwise_forward>(
      Key(StrCat(AlgorithmKey("eltwise_fwd", algorithm), "/", FloatBits(alpha), "/",
                 FloatBits(beta))
              .c_str(),
          {out.num_elements()}),
      [&](const dnnl::primitive_attr& attr) {
        return dnnl::eltwise_forward::primitive_desc(ForwardDesc(algorithm, md, alpha, beta),
                                                     attr, engine_);
      });
  Execute(cached, {{DNNL_ARG_SRC, Memory(md, x)}, {DNNL_ARG_DST, Memory(md, out)}}, tracker);
}

void OneDnnKernels::State::EltwiseBackward(dnnl::algorithm algorithm, const Tensor& data,
                                          const Tensor& dy, Tensor& out,
                                          const std::shared_ptr<MemoryTracker>& tracker) {
  const auto md = Flat(out);
  const Cached& cached = Lookup<dnnl::eltwise_backward>(
      Key(AlgorithmKey("eltwise_bwd", algorithm).c_str(), {out.num_elements()}),
      [&](const dnnl::primitive_attr& attr) {
        // The forward primitive descriptor is only a hint (for formats,
        // which are fixed here anyway), but oneDNN requires one.
        const dnnl::eltwise_forward::primitive_desc hint(ForwardDesc(algorithm, md), engine_);
        return dnnl::eltwise_backward::primitive_desc(
            dnnl::eltwise_backward::desc(algorithm, md, md, 0.0f, 0.0f), attr, engine_, hint);
      });
  const bool use_dst = algorithm == dnnl::algorithm::eltwise_relu_use_dst_for_bwd;
  Execute(cached,
          {{use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, Memory(md, data)},
           {DNNL_ARG_DIFF_DST, Memory(md, dy)},
           {DNNL_ARG_DIFF_SRC, Memory(md, out)}},
          tracker);
}

void OneDnnKernels::Eltwise(const char* op, int algorithm, const Tensor& x, Tensor& out) {
  if (out.num_elements() == 0) return;
  Guarded([&] { return StrCat(op, " on ", x.TypeString()); },
          [&] {
            state_->EltwiseForward(static_cast<dnnl::algorithm>(algorithm), x, out, tracker());
          });
}

void OneDnnKernels::EltwiseBackward(const char* op, int algorithm, const Tensor& x,
                                    const Tensor& dy, Tensor& out) {
  if (out.num_elements() == 0) return;
  Guarded([&] { return StrCat(op, " on ", Types({&x, &dy})); },
          [&] {
            state_->EltwiseBackward(static_cast<dnnl::algorithm>(algorithm), x, dy, out,
                                    tracker());
          });
}

void OneDnnKernels::DoRelu(const Tensor& x, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  // Our own pass, not oneDNN's eltwise_relu: with alpha == 0 its JIT relu is
  // max(x, 0) in vector registers, which returns 0 for NaN, and NaN must
  // propagate (as in JAX and PyTorch). Putting the NaNs back took a second
  // pass over the output, 4% of eager's samples on mlp_chain (perf record of
  // engine_loop); one pass that keeps x where x > 0 or x is NaN and +0
  // elsewhere (so -0 -> +0, as max(x, +0) and the reference give) is the
  // same bits in one read and one write.
  UnaryFloatPass(
      x, out,
      [](float v) {
        const float r = v > 0.0f ? v : 0.0f;
        return v != v ? v : r;
      }
#if defined(__SSE2__)
      ,
      [](__m128 v) {
        const __m128 keep = _mm_or_ps(_mm_cmpgt_ps(v, _mm_setzero_ps()), _mm_cmpunord_ps(v, v));
        return _mm_and_ps(keep, v);  // +0 where not kept
      }
#endif
  );
}

void OneDnnKernels::DoReluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  // From relu's input: dx = x > 0 ? dy : dy * 0, so relu'(0) = 0 and a NaN
  // or infinite cotangent stays NaN where x <= 0: the formula of oneDNN's
  // eltwise_relu backward (dy times the derivative), which this pass
  // replaced. Its primitive took 53 us a call on mlp_chain's 512 KiB
  // operands, 4.9% of eager's run (the kernel clock of `remat run --problem
  // mlp_chain --param L=16 --param d=256 --param N=512`); one pass, each
  // operand read once, no primitive to execute (SameShape checked the
  // operands).
  BinaryFloatPass(
      x, dy, out, [](float v, float d) { return v > 0.0f ? d : d * 0.0f; }
#if defined(__SSE2__)
      ,
      [](__m128 v, __m128 d) {
        const __m128 keep = _mm_cmpgt_ps(v, _mm_setzero_ps());
        const __m128 dropped = _mm_mul_ps(d, _mm_setzero_ps());
        return _mm_or_ps(_mm_and_ps(keep, d), _mm_andnot_ps(keep, dropped));
      }
#endif
  );
}

// sin, cos and their backwards, which oneDNN 2.6 lacks: lane_math.h's
// formulas (double lanes, within 0.53 ulp; libm's beyond 2^20 and for inf
// and NaN) over lane blocks split between the threads
// (loop_kernels::LaneBlockPass), so an element's bits are the same on every
// ISA and at every thread count. libm's sinf one element at a time took
// 3.3-3.4 ns an element against 1.0-1.1 in AVX-512 lanes and 1.7-1.8 in
// AVX2's (131,072 floats in L2).
void OneDnnKernels::DoSin(const Tensor& x, Tensor& out) {
  if (dry_run()) return;
  loop_kernels::LaneBlockPass(x, out, lane_blocks::Sin);
}

void OneDnnKernels::DoCos(const Tensor& x, Tensor& out) {
  if (dry_run()) return;
  loop_kernels::LaneBlockPass(x, out, lane_blocks::Cos);
}

void OneDnnKernels::DoSinBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (dry_run()) return;
  loop_kernels::LaneBlockPass(x, dy, out, lane_blocks::SinBackward);
}

void OneDnnKernels::DoCosBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (dry_run()) return;
  loop_kernels::LaneBlockPass(x, dy, out, lane_blocks::CosBackward);
}

// square, its backward, add and mul: our own passes rather than oneDNN's
// eltwise and binary primitives, for the reason relu is (above): one pass
// with each operand prefetched, no primitive to execute. On layer_loss and
// dot_policy square and its backward took 37-40 us a call on 512 KiB
// operands, 2-3% of eager's kernels (`bazel-bin/harness/engine_loop
// --problem=layer_loss --engine=eager --runs=200`); on gpt the adds 3.4% of
// the run (`remat run --problem gpt ...` at the bench size). The lanes are
// the scalar formula's IEEE operations, so the bits are the same on every
// ISA: x * x; dy * (2 * x), 2x exact as in the reference and oneDNN's f32
// rule; a + b; a * b.
void OneDnnKernels::DoSquare(const Tensor& x, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  UnaryFloatPass(
      x, out, [](float v) { return v * v; }
#if defined(__SSE2__)
      ,
      [](__m128 v) { return _mm_mul_ps(v, v); }
#endif
  );
}

void OneDnnKernels::DoSquareBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  BinaryFloatPass(
      x, dy, out, [](float v, float g) { return g * (2.0f * v); }
#if defined(__SSE2__)
      ,
      [](__m128 v, __m128 g) { return _mm_mul_ps(g, _mm_mul_ps(_mm_set1_ps(2.0f), v)); }
#endif
  );
}

void OneDnnKernels::DoAdd(const Tensor& a, const Tensor& b, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  BinaryFloatPass(
      a, b, out, [](float x, float y) { return x + y; }
#if defined(__SSE2__)
      ,
      [](__m128 x, __m128 y) { return _mm_add_ps(x, y); }
#endif
  );
}

void OneDnnKernels::DoMul(const Tensor& a, const Tensor& b, Tensor& out) {
  if (out.num_elements() == 0 || dry_run()) return;
  BinaryFloatPass(
      a, b, out, [](float x, float y) { return x * y; }
#if defined(__SSE2__)
      ,
      [](__m128 x, __m128 y) { return _mm_mul_ps(x, y); }
#endif
  );
}

void OneDnnKernels::DoBroadcast(const Tensor& s, Tensor& out) {
  if (dry_run()) return;
  // Split between the threads and prefetched like the passes above: one
  // thread writing 512 KiB took 53 us on layer_loss (engine_loop, above).
  const float v = s.f32()[0];
  float* o = out.f32();
  ForEachFloatBlock(
      out.num_elements(), Streams<1>{o}, [&](int64_t i) { o[i] = v; }
#if defined(__SSE2__)
      ,
      [&](int64_t i) { _mm_storeu_ps(o + i, _mm_set1_ps(v)); }
#endif
  );
}

// One f32 addition per element, which IEEE rounds exactly once whatever the
// loop order: a plain loop is as deterministic as oneDNN's binary add with a
// broadcast operand, and needs no primitive.
void OneDnnKernels::DoBiasAdd(const Tensor& x, const Tensor& b, Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* bias = b.f32();
#pragma omp parallel for schedule(static) if (rows * c >= ParallelMinElements())
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.f32() + r * c;
    float* o = out.f32() + r * c;
#pragma omp simd
    for (int64_t j = 0; j < c; ++j) o[j] = xr[j] + bias[j];
  }
}

void OneDnnKernels::DoGelu(const Tensor& x, Tensor& out) {
  Eltwise("gelu", AlgorithmId(dnnl::algorithm::eltwise_gelu_tanh), x, out);
}

void OneDnnKernels::DoGeluBackward(const Tensor& x, const Tensor& dy, Tensor& out) {
  EltwiseBackward("gelu_backward", AlgorithmId(dnnl::algorithm::eltwise_gelu_tanh), x, dy, out);
}

void OneDnnKernels::DoScale(const Tensor& x, double c, Tensor& out) {
  if (out.num_elements() == 0) return;
  Guarded([&] { return StrCat("scale by ", c, " on ", x.TypeString()); },
          [&] {
            state_->EltwiseForward(dnnl::algorithm::eltwise_linear, x, out, tracker(),
                                   static_cast<float>(c), 0.0f);
          });
}

}  // namespace remat
