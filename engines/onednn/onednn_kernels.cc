#include "engines/onednn/onednn_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "engines/api/error.h"
#include "engines/api/loop_kernels.h"
#include "engines/api/philox.h"
#include "engines/onednn/kernel_traffic.h"
#include "engines/onednn/matmul_calls.h"

namespace remat {

// The dnnl::algorithm the header's int-typed helpers take (the header does
// not include dnnl.hpp).
constexpr int AlgorithmId(dnnl::algorithm a) { return static_cast<int>(a); }
namespace {

// The loop kernels' threshold, for this file's own OpenMP loops too.
using loop_kernels::ParallelMinElements;

using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;

// Shapes in one benchmark run are few; the bound only stops a long-lived
// process that sees ever new shapes from growing the cache without end.
constexpr size_t kMaxCachedPrimitives = 512;

dnnl::memory::desc F32Desc(const Dims& dims, Tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

// "name:d0,d1,...", the cache key of one configuration.
std::string Key(const char* name, const Dims& dims) {
  std::string key = name;
  key += ':';
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) key += ',';
    key += std::to_string(dims[i]);
  }
  return key;
}

// Runs `body`, turning oneDNN's exceptions into remat::Error. `describe`
// names the op and its operands; it runs only on failure.
template <typename Describe, typename Body>
void Guarded(Describe describe, Body body) {
  try {
    body();
  } catch (const dnnl::error& e) {
    throw Error(StrCat("onednn kernel ", describe(), ": ", e.what(), " (dnnl status ",
                       static_cast<int>(e.status), ")"));
  }
}

std::string Types(std::initializer_list<const Tensor*> tensors) {
  std::vector<std::string> types;
  for (const Tensor* t : tensors) types.push_back(t->TypeString());
  return Join(types, ", ");
}

// Elementwise loops one element at a time, for the ops oneDNN 2.6 lacks
// and that have no lanes of their own here.
template <typename F>
void UnaryLoop(const Tensor& x, Tensor& out, F f) {
  const float* in = x.f32();
  float* o = out.f32();
  const int64_t n = out.num_elements();
  loop_kernels::ForEachIndex(n, n, [&](int64_t i) { o[i] = f(in[i]); });
}

template <typename F>
void BinaryLoop(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  const float* pa = a.f32();
  const float* pb = b.f32();
  float* o = out.f32();
  const int64_t n = out.num_elements();
  loop_kernels::ForEachIndex(n, n, [&](int64_t i) { o[i] = f(pa[i], pb[i]); });
}

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

// Layer normalization's per-row statistics, in f32, each row summed in index
// order: the forward and both backward kernels call this one function, so the
// mean and rstd they use are the same bits. The kernels take rows in
// blocks of kLaneRows (loop_kernels::ForRowBlocks), whose sums' chains
// overlap.
struct RowStats {
  float mean;
  float rstd;
};

// Layer norm's kernels take blocks of this many rows: with the rows in SSE
// lanes (RowLanes below), four groups of four, so that four chains of
// vector additions overlap.
constexpr int kLaneRows = 16;

#if defined(__SSE2__)
// The 4x4 block at p (row stride `stride`), transposed: r[t] holds column t
// of the block, its rows in lanes 0 to 3.
inline void LoadTransposed4x4(const float* p, int64_t stride, __m128 (&r)[4]) {
  r[0] = _mm_loadu_ps(p);
  r[1] = _mm_loadu_ps(p + stride);
  r[2] = _mm_loadu_ps(p + 2 * stride);
  r[3] = _mm_loadu_ps(p + 3 * stride);
  _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
}

// Calls f(j, g, cols) for every column j of the 4G rows at each of the S
// matrices `srcs` (row stride c), group g of four rows at a time, every
// group's columns in increasing j: cols[s] holds rows 4g to 4g + 3 of
// matrix s at column j, one row a lane. A row's sums taken in f are those
// of one plain loop over the row (the same operations in the same order,
// four rows side by side). Four columns at a time are loaded as rows and
// transposed in registers. The loops over groups, matrices and columns are
// unrolled so that each group's sums stay in registers: rolled, GCC kept
// them in an array on the stack, stored and reloaded at every column (perf
// annotate of Stats<16>), and transformer_stack's layer norm kernels took
// 1.1 to 1.8 times as long (engine_loop's "alone, in cache" column).
template <int G, int S, typename F>
inline void RowLanes(const float* const (&srcs)[S], int64_t c, F&& f) {
  int64_t j = 0;
  for (; j + 4 <= c; j += 4) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      __m128 block[S][4];
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) LoadTransposed4x4(srcs[s] + 4 * g * c + j, c, block[s]);
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        __m128 col[S];
#pragma GCC unroll 4
        for (int s = 0; s < S; ++s) col[s] = block[s][t];
        f(j + t, g, col);
      }
    }
  }
  for (; j < c; ++j) {
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      __m128 col[S];
#pragma GCC unroll 4
      for (int s = 0; s < S; ++s) {
        const float* p = srcs[s] + 4 * g * c + j;
        col[s] = _mm_setr_ps(p[0], p[c], p[2 * c], p[3 * c]);
      }
      f(j, g, col);
    }
  }
}
#endif

// The statistics of the N rows at `x` (row stride `c`) into `out`: each
// row's sum, then the sum of its squared deviations, in index order.
template <int N>
REMAT_SCALAR_CHAINS void Stats(const float* x, int64_t c, RowStats* out) {
  const float eps = static_cast<float>(Kernels::kLayerNormEps);
#if defined(__SSE2__)
  if constexpr (N % 4 == 0) {
    constexpr int G = N / 4;
    const float* const srcs[1] = {x};
    const __m128 cs = _mm_set1_ps(static_cast<float>(c));
    __m128 sum[G], mean[G], squares[G];
    for (int g = 0; g < G; ++g) sum[g] = squares[g] = _mm_setzero_ps();
    RowLanes<G>(srcs, c, [&](int64_t, int g, const __m128* col) {
      sum[g] = _mm_add_ps(sum[g], col[0]);
    });
    for (int g = 0; g < G; ++g) mean[g] = _mm_div_ps(sum[g], cs);
    RowLanes<G>(srcs, c, [&](int64_t, int g, const __m128* col) {
      const __m128 d = _mm_sub_ps(col[0], mean[g]);
      squares[g] = _mm_add_ps(squares[g], _mm_mul_ps(d, d));
    });
    for (int g = 0; g < G; ++g) {
      const __m128 rstd = _mm_div_ps(
          _mm_set1_ps(1.0f), _mm_sqrt_ps(_mm_add_ps(_mm_div_ps(squares[g], cs), _mm_set1_ps(eps))));
      alignas(16) float m[4], r[4];
      _mm_store_ps(m, mean[g]);
      _mm_store_ps(r, rstd);
      for (int k = 0; k < 4; ++k) out[4 * g + k] = {m[k], r[k]};
    }
    return;
  }
#endif
  float sum[N] = {};
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) sum[k] += x[k * c + j];
  }
  float mean[N], squares[N] = {};
  for (int k = 0; k < N; ++k) mean[k] = sum[k] / static_cast<float>(c);
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) {
      const float d = x[k * c + j] - mean[k];
      squares[k] += d * d;
    }
  }
  for (int k = 0; k < N; ++k) {
    const float var = squares[k] / static_cast<float>(c);
    out[k] = {mean[k], 1.0f / std::sqrt(var + eps)};
  }
}

// Layer norm's backward sums for the N rows at x and dy (row stride c), each
// row's two in its index order: sum_j g_j and sum_j g_j xhat_j, g = dy gamma.
template <int N>
REMAT_SCALAR_CHAINS void LayerNormBackwardSums(const float* x, const float* dy,
                                               const float* gamma, int64_t c, const RowStats* s,
                                               float* sum_g, float* sum_gx) {
#if defined(__SSE2__)
  if constexpr (N % 4 == 0) {
    constexpr int G = N / 4;
    const float* const srcs[2] = {x, dy};
    __m128 mean[G], rstd[G], acc_g[G], acc_gx[G];
    for (int g = 0; g < G; ++g) {
      mean[g] = _mm_setr_ps(s[4 * g].mean, s[4 * g + 1].mean, s[4 * g + 2].mean,
                            s[4 * g + 3].mean);
      rstd[g] = _mm_setr_ps(s[4 * g].rstd, s[4 * g + 1].rstd, s[4 * g + 2].rstd,
                            s[4 * g + 3].rstd);
      acc_g[g] = acc_gx[g] = _mm_setzero_ps();
    }
    RowLanes<G>(srcs, c, [&](int64_t j, int g, const __m128* col) {
      const __m128 gj = _mm_mul_ps(col[1], _mm_set1_ps(gamma[j]));
      const __m128 xhat = _mm_mul_ps(_mm_sub_ps(col[0], mean[g]), rstd[g]);
      acc_g[g] = _mm_add_ps(acc_g[g], gj);
      acc_gx[g] = _mm_add_ps(acc_gx[g], _mm_mul_ps(gj, xhat));
    });
    for (int g = 0; g < G; ++g) {
      _mm_storeu_ps(sum_g + 4 * g, acc_g[g]);
      _mm_storeu_ps(sum_gx + 4 * g, acc_gx[g]);
    }
    return;
  }
#endif
  float mean[N], rstd[N], acc_g[N] = {}, acc_gx[N] = {};
  for (int k = 0; k < N; ++k) {
    mean[k] = s[k].mean;
    rstd[k] = s[k].rstd;
  }
  for (int64_t j = 0; j < c; ++j) {
#pragma GCC unroll 16
    for (int k = 0; k < N; ++k) {
      const float gj = dy[k * c + j] * gamma[j];
      const float xhat = (x[k * c + j] - mean[k]) * rstd[k];
      acc_g[k] += gj;
      acc_gx[k] += gj * xhat;
    }
  }
  for (int k = 0; k < N; ++k) {
    sum_g[k] = acc_g[k];
    sum_gx[k] = acc_gx[k];
  }
}

// Every row's statistics, in row order.
std::vector<RowStats> AllStats(const float* x, int64_t c, int64_t rows) {
  std::vector<RowStats> stats(static_cast<size_t>(rows));
  loop_kernels::ForRowBlocks<kLaneRows>(
      rows, rows * c, [&]<int N>(int64_t r0) { Stats<N>(x + r0 * c, c, stats.data() + r0); });
  return stats;
}

// out[j] = sum over rows r, in row order, of term(r, j), from +0. The
// columns, not the rows, are split among the OpenMP threads (kColumnChunk
// at a time), so that each column's sum keeps its order.
constexpr int64_t kColumnChunk = 64;
template <typename Term>
void SumOverRows(int64_t rows, int64_t c, float* out, Term term) {
  const int64_t chunks = (c + kColumnChunk - 1) / kColumnChunk;
#pragma omp parallel for schedule(static) if (rows * c >= ParallelMinElements())
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t j0 = chunk * kColumnChunk, j1 = std::min(c, j0 + kColumnChunk);
    for (int64_t j = j0; j < j1; ++j) out[j] = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) out[j] += term(r, j);
    }
  }
}

// Rows and the last axis of a rank >= 1 operand.
int64_t LastDim(const Tensor& t) { return t.shape().dim(t.shape().rank() - 1); }
int64_t NumRows(const Tensor& t) {
  const int64_t c = LastDim(t);
  return c == 0 ? 0 : t.num_elements() / c;
}

}  // namespace

class OneDnnKernels::State {
 public:
  State() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  void MatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out,
              const std::shared_ptr<MemoryTracker>& tracker) {
    const Shape& shape = out.shape();
    const bool batched = shape.rank() == 3;
    const int r = shape.rank() - 2;
    const int64_t batch = batched ? shape.dim(0) : 1;
    const int64_t m = shape.dim(r);
    const int64_t n = shape.dim(r + 1);
    const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
    // A transposed operand is the same logical (m,k) or (k,n) matrix with its
    // last two axes swapped in memory.
    const Tag plain = batched ? Tag::abc : Tag::ab;
    const Tag swapped = batched ? Tag::acb : Tag::ba;
    const Dims a_dims = batched ? Dims{batch, m, k} : Dims{m, k};
    const Dims b_dims = batched ? Dims{batch, k, n} : Dims{k, n};
    const Dims out_dims = batched ? Dims{batch, m, n} : Dims{m, n};
    const auto a_md = F32Desc(a_dims, transpose_a ? swapped : plain);
    const auto b_md = F32Desc(b_dims, transpose_b ? swapped : plain);
    const auto out_md = F32Desc(out_dims, plain);
    const std::string key =
        Key(transpose_a ? (transpose_b ? "matmul_tt" : "matmul_tn")
                        : (transpose_b ? "matmul_nt" : "matmul_nn"),
            {batch, m, k, n});
    const Cached& cached = Lookup<dnnl::matmul>(key, [&](const dnnl::primitive_attr& attr) {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, out_md), attr, engine_);
      platform_internal::RecordMatMulImpl(pd.impl_info_str());
      return pd;
    });
    // On every run, not only at creation: a recorder scoped to one stretch
    // of work (a benchmark row) sees the primitives it took from the cache.
    // A dry run plans the matmul and runs nothing: not recorded.
    if (!(tracker && tracker->dry_run())) {
      matmul_calls_internal::NoteMatMul(a.shape(), transpose_a, a.raw(), b.shape(), transpose_b,
                                        b.raw(), out.raw(), cached.impl);
    }
    Execute(cached,
            {{DNNL_ARG_SRC, Memory(a_md, a)},
             {DNNL_ARG_WEIGHTS, Memory(b_md, b)},
             {DNNL_ARG_DST, Memory(out_md, out)}},
            tracker);
  }

  // `alpha` and `beta` are the algorithm's parameters (eltwise_linear:
  // alpha * x + beta); the other algorithms used here take 0.
  void EltwiseForward(dnnl::algorithm algorithm, const Tensor& x, Tensor& out,
                      const std::shared_ptr<MemoryTracker>& tracker, float alpha = 0.0f,
                      float beta = 0.0f) {
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

  // `data` is the forward's dst for the *_use_dst_for_bwd algorithms, its src
  // otherwise.
  void EltwiseBackward(dnnl::algorithm algorithm, const Tensor& data, const Tensor& dy,
                       Tensor& out, const std::shared_ptr<MemoryTracker>& tracker) {
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

  // Needs at least two elements: oneDNN rejects a reduction that reduces no
  // dimension ({1} -> {1}).
  void Sum(const Tensor& x, Tensor& out, const std::shared_ptr<MemoryTracker>& tracker) {
    const auto src_md = Flat(x);
    const auto dst_md = F32Desc({1}, Tag::a);
    const Cached& cached =
        Lookup<dnnl::reduction>(Key("sum", {x.num_elements()}), [&](const dnnl::primitive_attr& attr) {
          return dnnl::reduction::primitive_desc(
              dnnl::reduction::desc(dnnl::algorithm::reduction_sum, src_md, dst_md, 0.0f, 0.0f),
              attr, engine_);
        });
    Execute(cached, {{DNNL_ARG_SRC, Memory(src_md, x)}, {DNNL_ARG_DST, Memory(dst_md, out)}},
            tracker);
  }

  // conv2d, NCHW x and OIHW w in plain layouts (so that no reorder runs and
  // the tensors are used in place), direct algorithm, zero padding.
  // `which`: 0 forward (x, w -> y), 1 backward data (dy, w -> dx), 2
  // backward weights (x, dy -> dw).
  void Conv2d(int which, const Tensor& a, const Tensor& b, Tensor& out, int64_t stride,
              int64_t pad, const std::shared_ptr<MemoryTracker>& tracker) {
    const Shape& xs = which == 1 ? out.shape() : a.shape();
    const Shape& ws = which == 0 ? b.shape() : which == 1 ? b.shape() : out.shape();
    const Shape& ys = which == 0 ? out.shape() : which == 1 ? a.shape() : b.shape();
    auto dims = [](const Shape& s) { return Dims(s.dims().begin(), s.dims().end()); };
    const auto x_md = F32Desc(dims(xs), Tag::nchw);
    const auto w_md = F32Desc(dims(ws), Tag::oihw);
    const auto y_md = F32Desc(dims(ys), Tag::nchw);
    const Dims strides = {stride, stride}, padding = {pad, pad};
    const dnnl::algorithm direct = dnnl::algorithm::convolution_direct;
    auto forward_pd = [&](const dnnl::primitive_attr& attr) {
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, x_md, w_md,
                                          y_md, strides, padding, padding),
          attr, engine_);
    };
    Dims key_dims = dims(xs);
    for (int64_t d : ws.dims()) key_dims.push_back(d);
    key_dims.push_back(stride);
    key_dims.push_back(pad);
    if (which == 0) {
      const Cached& cached = Lookup<dnnl::convolution_forward>(Key("conv_fwd", key_dims), forward_pd);
      Execute(cached,
              {{DNNL_ARG_SRC, Memory(x_md, a)},
               {DNNL_ARG_WEIGHTS, Memory(w_md, b)},
               {DNNL_ARG_DST, Memory(y_md, out)}},
              tracker);
    } else if (which == 1) {
      const Cached& cached = Lookup<dnnl::convolution_backward_data>(
          Key("conv_bwd_data", key_dims), [&](const dnnl::primitive_attr& attr) {
            return dnnl::convolution_backward_data::primitive_desc(
                dnnl::convolution_backward_data::desc(direct, x_md, w_md, y_md, strides, padding,
                                                      padding),
                attr, engine_, forward_pd(dnnl::primitive_attr()));
          });
      Execute(cached,
              {{DNNL_ARG_DIFF_DST, Memory(y_md, a)},
               {DNNL_ARG_WEIGHTS, Memory(w_md, b)},
               {DNNL_ARG_DIFF_SRC, Memory(x_md, out)}},
              tracker);
    } else {
      const Cached& cached = Lookup<dnnl::convolution_backward_weights>(
          Key("conv_bwd_weights", key_dims), [&](const dnnl::primitive_attr& attr) {
            return dnnl::convolution_backward_weights::primitive_desc(
                dnnl::convolution_backward_weights::desc(direct, x_md, w_md, y_md, strides,
                                                         padding, padding),
                attr, engine_, forward_pd(dnnl::primitive_attr()));
          });
      Execute(cached,
              {{DNNL_ARG_SRC, Memory(x_md, a)},
               {DNNL_ARG_DIFF_DST, Memory(y_md, b)},
               {DNNL_ARG_DIFF_WEIGHTS, Memory(w_md, out)}},
              tracker);
    }
  }

 private:
  struct Cached {
    dnnl::primitive primitive;
    dnnl::memory::desc scratchpad_desc;
    int64_t scratchpad_bytes = 0;
    std::string impl;  // the primitive descriptor's impl_info_str
  };

  // The primitive for `key`, created by `make_pd` on first use. Every
  // primitive has a user-mode scratchpad, so its memory can be counted.
  template <typename Primitive, typename MakePd>
  const Cached& Lookup(const std::string& key, MakePd make_pd) {
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
    if (cache_.size() >= kMaxCachedPrimitives) cache_.clear();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const auto pd = make_pd(attr);
    Cached cached;
    cached.primitive = Primitive(pd);
    cached.scratchpad_desc = pd.scratchpad_desc();
    cached.scratchpad_bytes = static_cast<int64_t>(cached.scratchpad_desc.get_size());
    cached.impl = pd.impl_info_str();
    return cache_.emplace(key, std::move(cached)).first->second;
  }

  // Runs one primitive to completion, with a scratchpad tensor that lives
  // only for the call.
  void Execute(const Cached& cached, std::unordered_map<int, dnnl::memory> args,
               const std::shared_ptr<MemoryTracker>& tracker) {
    Tensor scratchpad;
    if (cached.scratchpad_bytes > 0) {
      // Uninitialized, as oneDNN's own scratchpads are: a primitive writes
      // its scratch before reading it. Zero-filling it was a serial pass of
      // the calling thread over 641 KiB before every matmul on scan_stack
      // (d=512, N=256), while the other OpenMP thread waited.
      scratchpad = Tensor::Uninitialized(DType::kF32,
                                         Shape({(cached.scratchpad_bytes + 3) / 4}), tracker,
                                         Category::kScratchpad);
      if (scratchpad.dry()) return;  // a dry run counts the scratchpad, runs nothing
      args.emplace(DNNL_ARG_SCRATCHPAD,
                   dnnl::memory(cached.scratchpad_desc, engine_, scratchpad.raw()));
    }
    if (tracker && tracker->dry_run()) return;
    cached.primitive.execute(stream_, args);
    stream_.wait();
  }

  dnnl::memory Memory(const dnnl::memory::desc& md, const Tensor& t) const {
    return dnnl::memory(md, engine_, t.raw());
  }

  // Elementwise ops see every tensor as 1-D: shapes are equal, layout is
  // contiguous, and one configuration then serves all ranks.
  static dnnl::memory::desc Flat(const Tensor& t) { return F32Desc({t.num_elements()}, Tag::a); }

  static dnnl::eltwise_forward::desc ForwardDesc(dnnl::algorithm algorithm,
                                                 const dnnl::memory::desc& md,
                                                 float alpha = 0.0f, float beta = 0.0f) {
    return dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, algorithm, md, alpha,
                                       beta);
  }

  // The bits of a float, for cache keys (distinct for every value, -0.0 too).
  static uint32_t FloatBits(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
  }

  static std::string AlgorithmKey(const char* name, dnnl::algorithm algorithm) {
    return StrCat(name, "/", static_cast<int>(algorithm));
  }

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::string, Cached> cache_;
};

void OneDnnKernels::RunTableKernel(KernelOp op, std::span<const Tensor* const> operands,
                                   const KernelAttrs& attrs, Tensor& out) {
  RunImpl(*this, op, operands, attrs, out);
  // A dry run moves no data.
  if (kernel_traffic_internal::Recording() && !dry_run()) {
    kernel_traffic_internal::NoteKernelCall(op, operands, attrs, out);
  }
}

OneDnnKernels::OneDnnKernels() {
  Guarded([] { return std::string("setup (cpu engine 0)"); },
          [&] { state_ = std::make_unique<State>(); });
}

OneDnnKernels::~OneDnnKernels() = default;

void OneDnnKernels::DoMatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b,
                             Tensor& out) {
  if (out.num_elements() == 0) return;
  const int r = a.shape().rank() - 2;
  const int64_t k = transpose_a ? a.shape().dim(r) : a.shape().dim(r + 1);
  if (k == 0) {
    if (dry_run()) return;
    // An empty dot product is 0. oneDNN 2.6 dies of SIGFPE creating a matmul
    // with k == 0, so it must never see one.
    std::memset(out.raw(), 0, out.bytes());
    return;
  }
  Guarded(
      [&] {
        return StrCat("matmul on ", a.TypeString(), transpose_a ? "^T" : "", " x ",
                      b.TypeString(), transpose_b ? "^T" : "");
      },
      [&] { state_->MatMul(a, transpose_a, b, transpose_b, out, tracker()); });
}

void OneDnnKernels::DoConv2d(int which, const Tensor& a, const Tensor& b, int64_t stride,
                             int64_t pad, Tensor& out) {
  if (out.num_elements() == 0) return;
  if (a.num_elements() == 0 || b.num_elements() == 0) {
    // An empty sum is 0 (oneDNN refuses empty operands).
    if (!dry_run()) std::memset(out.raw(), 0, out.bytes());
    return;
  }
  static const char* const kNames[] = {"conv2d", "conv2d_backward_data", "conv2d_backward_weights"};
  Guarded([&] { return StrCat(kNames[which], " on ", Types({&a, &b}), " -> ", out.TypeString()); },
          [&] { state_->Conv2d(which, a, b, out, stride, pad, tracker()); });
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

void OneDnnKernels::DoSum(const Tensor& x, Tensor& out) {
  const int64_t n = x.num_elements();
  if (n <= 1 && dry_run()) return;
  if (n == 0) {
    out.f32()[0] = 0.0f;
    return;
  }
  if (n == 1) {
    // oneDNN rejects a reduction over nothing ({1} -> {1}); 0 + x is what its
    // sum, which starts from 0, would give (-0.0 becomes +0.0).
    out.f32()[0] = 0.0f + x.f32()[0];
    return;
  }
  Guarded([&] { return StrCat("sum on ", x.TypeString()); },
          [&] { state_->Sum(x, out, tracker()); });
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

}  // namespace remat

namespace remat {

// softmax and its backward over the last axis, as loops of our own rather
// than oneDNN's primitives (lane_blocks::SoftmaxRow and
// SoftmaxBackwardRow, which state the arithmetic): the same bits on every
// ISA, where oneDNN's exp and sums are its own on each, and one dispatch a
// row, so that rows as short as attention's (64) run about as fast as
// oneDNN's: gpt's scores (1024 rows of 64) 87-95 us a run against
// oneDNN's 84-93, their backward 21 against 28-29, transformer_stack's
// 46 and 13 against 48-67 and 19-25 (engine_loop's "alone, in cache"
// column, alternating builds). m = the row's largest number
// (lane_blocks::MaxNumber: 16 partial maxima; of +0 and -0 either, which
// changes no e_j), so a NaN or +inf in the row (or a row of -inf) makes s
// NaN, and the whole row NaN, as in the reference and in JAX.
void OneDnnKernels::DoSoftmax(const Tensor& x, Tensor& out) {
  if (dry_run() || out.num_elements() == 0) return;
  const int64_t c = LastDim(out), rows = NumRows(out);
  const float* x0 = x.f32();
  float* o0 = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  loop_kernels::ForEachIndex(rows, rows * c, [x0, o0, c, isa](int64_t r) {
    lane_blocks::SoftmaxRow(isa, x0 + r * c, o0 + r * c, c);
  });
}

void OneDnnKernels::DoSoftmaxBackward(const Tensor& y, const Tensor& dy, Tensor& out) {
  if (dry_run() || out.num_elements() == 0) return;
  const int64_t c = LastDim(out), rows = NumRows(out);
  const float* y0 = y.f32();
  const float* g0 = dy.f32();
  float* o0 = out.f32();
  const lane_blocks::LaneIsa isa = lane_blocks::BestLaneIsa();
  loop_kernels::ForEachIndex(rows, rows * c, [y0, g0, o0, c, isa](int64_t r) {
    lane_blocks::SoftmaxBackwardRow(isa, y0 + r * c, g0 + r * c, o0 + r * c, c);
  });
}

void OneDnnKernels::DoLayerNorm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* g = gamma.f32();
  const float* b = beta.f32();
  // Rows are independent: blocks of them are split among the OpenMP threads.
  loop_kernels::ForRowBlocks<kLaneRows>(rows, rows * c, [&]<int N>(int64_t r0) {
    RowStats s[N];
    Stats<N>(x.f32() + r0 * c, c, s);
    for (int k = 0; k < N; ++k) {
      const float* xr = x.f32() + (r0 + k) * c;
      float* o = out.f32() + (r0 + k) * c;
      const float mean = s[k].mean, rstd = s[k].rstd;
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) o[j] = (xr[j] - mean) * rstd * g[j] + b[j];
    }
  });
}

void OneDnnKernels::DoLayerNormBackward(const Tensor& x, const Tensor& gamma, const Tensor& dy,
                                        Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* g = gamma.f32();
  loop_kernels::ForRowBlocks<kLaneRows>(rows, rows * c, [&]<int N>(int64_t r0) {
    const float* x0 = x.f32() + r0 * c;
    const float* dy0 = dy.f32() + r0 * c;
    RowStats s[N];
    Stats<N>(x0, c, s);
    float sum_g[N], sum_gx[N];
    LayerNormBackwardSums<N>(x0, dy0, g, c, s, sum_g, sum_gx);
    for (int k = 0; k < N; ++k) {
      const float* xr = x0 + k * c;
      const float* dyr = dy0 + k * c;
      float* o = out.f32() + (r0 + k) * c;
      const float mean = s[k].mean, rstd = s[k].rstd;
      const float mean_g = sum_g[k] / static_cast<float>(c);
      const float mean_gx = sum_gx[k] / static_cast<float>(c);
#pragma omp simd
      for (int64_t j = 0; j < c; ++j) {
        const float gj = dyr[j] * g[j];
        const float xhat = (xr[j] - mean) * rstd;
        o[j] = rstd * (gj - mean_g - xhat * mean_gx);
      }
    }
  });
}

void OneDnnKernels::DoLayerNormGammaGrad(const Tensor& x, const Tensor& dy, Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* x0 = x.f32();
  const float* dy0 = dy.f32();
  const std::vector<RowStats> stats = AllStats(x0, c, rows);
  SumOverRows(rows, c, out.f32(), [&](int64_t r, int64_t j) {
    return dy0[r * c + j] * ((x0[r * c + j] - stats[r].mean) * stats[r].rstd);
  });
}

void OneDnnKernels::DoSumLeading(const Tensor& x, Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* x0 = x.f32();
  SumOverRows(rows, c, out.f32(), [&](int64_t r, int64_t j) { return x0[r * c + j]; });
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

void OneDnnKernels::DoTranspose(const Tensor& x, Tensor& out) {
  if (dry_run()) return;
  const Shape& s = x.shape();
  const int r = s.rank();
  const int64_t batch = r == 3 ? s.dim(0) : 1;
  const int64_t m = s.dim(r - 2), n = s.dim(r - 1);
  const float* x0 = x.f32();
  float* o0 = out.f32();
  // In square tiles of kTile, and in a tile 4x4 blocks transposed in SSE
  // registers (every x86-64 CPU has them; a copy, so the bits are the
  // input's on every path): a tile's input and output rows stay in L1 while
  // it is copied. Element by element, each write of an input row went to
  // another output line: gpt's transposes (its keys, 16x64x32, and its tied
  // head's 512x128) took 39 us a call in the run, 17-31 us alone.
  constexpr int64_t kTile = 32;
  const int64_t tile_rows = (m + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static) if (batch * m * n >= ParallelMinElements())
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t ti = 0; ti < tile_rows; ++ti) {
      const float* in = x0 + t * m * n;
      float* o = o0 + t * m * n;
      const int64_t i0 = ti * kTile, i1 = std::min(m, i0 + kTile);
      for (int64_t j0 = 0; j0 < n; j0 += kTile) {
        const int64_t j1 = std::min(n, j0 + kTile);
        int64_t i = i0;
#if defined(__SSE2__)
        for (; i + 4 <= i1; i += 4) {
          int64_t j = j0;
          for (; j + 4 <= j1; j += 4) {
            __m128 r[4];
            LoadTransposed4x4(in + i * n + j, n, r);
            for (int t = 0; t < 4; ++t) _mm_storeu_ps(o + (j + t) * m + i, r[t]);
          }
          for (; j < j1; ++j) {
            for (int64_t k = i; k < i + 4; ++k) o[j * m + k] = in[k * n + j];
          }
        }
#endif
        for (; i < i1; ++i) {
          for (int64_t j = j0; j < j1; ++j) o[j * m + i] = in[i * n + j];
        }
      }
    }
  }
}

void OneDnnKernels::DoSplitHeads(const Tensor& x, int64_t batch, int64_t heads, Tensor& out) {
  if (dry_run()) return;
  const int64_t seq = x.shape().dim(0) / batch, width = x.shape().dim(1), dh = width / heads;
  const float* in = x.f32();
  float* o = out.f32();
#pragma omp parallel for collapse(2) schedule(static) if (x.num_elements() >= ParallelMinElements())
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        const float* src = in + (b * seq + t) * width + h * dh;
        float* dst = o + ((b * heads + h) * seq + t) * dh;
        // libc's copy (vector registers of the CPU's width; this file is
        // built for baseline x86-64): a head's row is contiguous.
        std::memcpy(dst, src, static_cast<size_t>(dh) * sizeof(float));
      }
    }
  }
}

void OneDnnKernels::DoMergeHeads(const Tensor& x, int64_t batch, Tensor& out) {
  if (dry_run()) return;
  const int64_t heads = x.shape().dim(0) / batch, seq = x.shape().dim(1), dh = x.shape().dim(2);
  const int64_t width = heads * dh;
  const float* in = x.f32();
  float* o = out.f32();
#pragma omp parallel for collapse(2) schedule(static) if (x.num_elements() >= ParallelMinElements())
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < seq; ++t) {
        const float* src = in + ((b * heads + h) * seq + t) * dh;
        float* dst = o + (b * seq + t) * width + h * dh;
        std::memcpy(dst, src, static_cast<size_t>(dh) * sizeof(float));
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The table's kernels (kernels.h's KernelDef; defined beside their ops in
// engines/api/op_defs_<family>.cc). Plain f32 loops where the result is exact or
// std:: gives the f32-rounded function.

REMAT_KERNEL_IMPL(OneDnnKernels, neg,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return -v; }); });
REMAT_KERNEL_IMPL(OneDnnKernels, sub,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    BinaryLoop(*in[0], *in[1], out, [](float a, float b) { return a - b; });
                  });
// std::exp's float overload: f32 in, f32 out (oneDNN's eltwise_exp is
// faster but its bits differ by ISA; the loop is the same everywhere).
REMAT_KERNEL_IMPL(OneDnnKernels, exp,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return std::exp(v); }); });
REMAT_KERNEL_IMPL(OneDnnKernels, log,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) { UnaryLoop(*in[0], out, [](float v) { return std::log(v); }); });
REMAT_KERNEL_IMPL(OneDnnKernels, div,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs&,
                     Tensor& out) {
                    BinaryLoop(*in[0], *in[1], out, [](float a, float b) { return a / b; });
                  });

// dropout: x * keep * s, s = 1 / (1 - p) rounded to f32 once; the mask's
// bits from philox.h, four elements per Philox block, drawn a chunk of
// blocks at a time (RandomBlocks: vector registers where the CPU has them;
// one block per call took gpt's eager 16% of its samples).
REMAT_KERNEL_IMPL(OneDnnKernels, dropout,
                  [](OneDnnKernels&, std::span<const Tensor* const> in, const KernelAttrs& attrs,
                     Tensor& out) {
                    const float* x = in[0]->f32();
                    const int32_t seed = in[1]->i32()[0];
                    const uint32_t threshold = DropThreshold(attrs.scalar);
                    const float scale = static_cast<float>(1.0 / (1.0 - attrs.scalar));
                    float* y = out.f32();
                    const int64_t n = out.num_elements();
                    // Each block of four has its own Philox counter: the
                    // threads' split changes no bit.
                    constexpr int64_t kChunkBlocks = 256;
                    const int64_t blocks = (n + 3) / 4;
                    const int64_t chunks = (blocks + kChunkBlocks - 1) / kChunkBlocks;
                    _Pragma("omp parallel for schedule(static) if (n >= ParallelMinElements())")
                    for (int64_t c = 0; c < chunks; ++c) {
                      uint32_t bits[4 * kChunkBlocks];
                      const int64_t first = c * kChunkBlocks;
                      RandomBlocks(seed, attrs.key, first,
                                   std::min(kChunkBlocks, blocks - first), bits);
                      const int64_t begin = 4 * first;
                      const int64_t count = std::min(n, 4 * (first + kChunkBlocks)) - begin;
                      const float* xc = x + begin;
                      float* yc = y + begin;
                      // Branch-free, so that it vectorizes: unsigned bits >=
                      // threshold as a signed compare of both with the sign
                      // bit flipped (baseline x86-64 has no unsigned vector
                      // compare), and the product taken for every element
                      // and masked to +0 where dropped (the same bits as
                      // `kept ? x * s : 0.0f`, which GCC leaves as a branch:
                      // "control flow in loop", 25% of the kernel's samples
                      // on one scalar store in perf annotate).
                      const int32_t signed_threshold =
                          static_cast<int32_t>(threshold ^ 0x80000000u);
                      _Pragma("omp simd")
                      for (int64_t j = 0; j < count; ++j) {
                        const int32_t b = static_cast<int32_t>(bits[j] ^ 0x80000000u);
                        const float kept = xc[j] * scale;
                        uint32_t k;
                        std::memcpy(&k, &kept, sizeof k);
                        k &= -static_cast<uint32_t>(b >= signed_threshold);
                        std::memcpy(&yc[j], &k, sizeof k);
                      }
                    }
                  });

REMAT_LOOP_KERNELS(OneDnnKernels, float);

// ---------------------------------------------------------------------------
// The kernels several ops share (kernels.h's KernelOp ids), in the table.
// Registered as allocating: each makes its oneDNN primitive, and counts its
// scratchpad, in dry runs too, and skips its arithmetic there itself.
#define REMAT_SHARED_KERNEL(kernel_name, call)                                            \
  REMAT_KERNEL_IMPL_ALLOCATING(OneDnnKernels, kernel_name,                                                    \
      [](OneDnnKernels& k, std::span<const Tensor* const> in, [[maybe_unused]] const KernelAttrs& a, \
         Tensor& out) { call; })
REMAT_SHARED_KERNEL(matmul, k.DoMatMul(*in[0], a.transpose_a, *in[1], a.transpose_b, out));
REMAT_SHARED_KERNEL(relu, k.DoRelu(*in[0], out));
REMAT_SHARED_KERNEL(relu_backward, k.DoReluBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(sin, k.DoSin(*in[0], out));
REMAT_SHARED_KERNEL(cos, k.DoCos(*in[0], out));
REMAT_SHARED_KERNEL(sin_backward, k.DoSinBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(cos_backward, k.DoCosBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(square, k.DoSquare(*in[0], out));
REMAT_SHARED_KERNEL(square_backward, k.DoSquareBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(add, k.DoAdd(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(mul, k.DoMul(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(sum, k.DoSum(*in[0], out));
REMAT_SHARED_KERNEL(broadcast, k.DoBroadcast(*in[0], out));
REMAT_SHARED_KERNEL(softmax, k.DoSoftmax(*in[0], out));
REMAT_SHARED_KERNEL(softmax_backward, k.DoSoftmaxBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(layer_norm, k.DoLayerNorm(*in[0], *in[1], *in[2], out));
REMAT_SHARED_KERNEL(layer_norm_backward, k.DoLayerNormBackward(*in[0], *in[1], *in[2], out));
REMAT_SHARED_KERNEL(layer_norm_gamma_grad, k.DoLayerNormGammaGrad(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(sum_leading, k.DoSumLeading(*in[0], out));
REMAT_SHARED_KERNEL(gelu, k.DoGelu(*in[0], out));
REMAT_SHARED_KERNEL(gelu_backward, k.DoGeluBackward(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(scale, k.DoScale(*in[0], a.scalar, out));
REMAT_SHARED_KERNEL(transpose, k.DoTranspose(*in[0], out));
REMAT_SHARED_KERNEL(split_heads, k.DoSplitHeads(*in[0], a.int_a, a.int_b, out));
REMAT_SHARED_KERNEL(merge_heads, k.DoMergeHeads(*in[0], a.int_a, out));
REMAT_SHARED_KERNEL(bias_add, k.DoBiasAdd(*in[0], *in[1], out));
REMAT_SHARED_KERNEL(conv2d, k.DoConv2d(0, *in[0], *in[1], a.int_a, a.int_b, out));
REMAT_SHARED_KERNEL(conv2d_backward_data, k.DoConv2d(1, *in[0], *in[1], a.int_a, a.int_b, out));
REMAT_SHARED_KERNEL(conv2d_backward_weights, k.DoConv2d(2, *in[0], *in[1], a.int_a, a.int_b, out));
#undef REMAT_SHARED_KERNEL

}  // namespace remat
