// What the files of OneDnnKernels (engines/onednn/onednn_kernels.h) share:
// the State (oneDNN's CPU engine, its stream, the primitive cache, each
// primitive's scratchpad allocated through the bound tracker) and the small
// helpers several kernel families use. Private to engines/onednn's
// onednn_kernels library: its sources include it, nothing else does (it
// compiles dnnl.hpp, which the public header keeps from its users).
//
// The kernels, by family: onednn_matmul.cc (matmul, conv2d),
// onednn_eltwise.cc (the elementwise passes and oneDNN's eltwise
// primitives), onednn_reduce.cc (sum, sum_leading), onednn_norm.cc (layer
// norm's row lanes), onednn_softmax.cc, onednn_copies.cc (transpose,
// split_heads, merge_heads); onednn_kernels.cc assembles the table.
#ifndef REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_INTERNAL_H_
#define REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_INTERNAL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
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
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"

namespace remat {
namespace onednn_kernels_internal {

// The loop kernels' threshold, for these files' own OpenMP loops too.
using loop_kernels::ParallelMinElements;

using Dims = dnnl::memory::dims;
using Tag = dnnl::memory::format_tag;

// Shapes in one benchmark run are few; the bound only stops a long-lived
// process that sees ever new shapes from growing the cache without end.
inline constexpr size_t kMaxCachedPrimitives = 512;

inline dnnl::memory::desc F32Desc(const Dims& dims, Tag tag) {
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, tag);
}

// "name:d0,d1,...", the cache key of one configuration.
inline std::string Key(const char* name, const Dims& dims) {
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

inline std::string Types(std::initializer_list<const Tensor*> tensors) {
  std::vector<std::string> types;
  for (const Tensor* t : tensors) types.push_back(t->TypeString());
  return Join(types, ", ");
}

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
#endif

// out[j] = sum over rows r, in row order, of term(r, j), from +0. The
// columns, not the rows, are split among the OpenMP threads (kColumnChunk
// at a time), so that each column's sum keeps its order.
inline constexpr int64_t kColumnChunk = 64;
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
inline int64_t LastDim(const Tensor& t) { return t.shape().dim(t.shape().rank() - 1); }
inline int64_t NumRows(const Tensor& t) {
  const int64_t c = LastDim(t);
  return c == 0 ? 0 : t.num_elements() / c;
}

}  // namespace onednn_kernels_internal

// The engine, the stream and the primitive cache of one OneDnnKernels (its
// state_): each primitive is created once per (op, shapes, flags) and
// reused, and runs with a scratchpad the bound tracker counts. Not
// thread-safe, as OneDnnKernels is not.
class OneDnnKernels::State {
 public:
  State() : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {}

  // The kernel families' primitives: each defined in its family's file
  // (onednn_matmul.cc, onednn_eltwise.cc, onednn_reduce.cc).
  void MatMul(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, Tensor& out,
              const std::shared_ptr<MemoryTracker>& tracker);

  // `alpha` and `beta` are the algorithm's parameters (eltwise_linear:
  // alpha * x + beta); the other algorithms used here take 0.
  void EltwiseForward(dnnl::algorithm algorithm, const Tensor& x, Tensor& out,
                      const std::shared_ptr<MemoryTracker>& tracker, float alpha = 0.0f,
                      float beta = 0.0f);

  // `data` is the forward's dst for the *_use_dst_for_bwd algorithms, its src
  // otherwise.
  void EltwiseBackward(dnnl::algorithm algorithm, const Tensor& data, const Tensor& dy,
                       Tensor& out, const std::shared_ptr<MemoryTracker>& tracker);

  // Needs at least two elements: oneDNN rejects a reduction that reduces no
  // dimension ({1} -> {1}).
  void Sum(const Tensor& x, Tensor& out, const std::shared_ptr<MemoryTracker>& tracker);

  // conv2d, NCHW x and OIHW w in plain layouts (GOIHW for groups > 1: the
  // same elements), so that no reorder runs and the tensors are used in
  // place; direct algorithm, zero padding, the geometry g. `which`: 0
  // forward (x, w -> y; plus `bias` where not null), 1 backward data (dy, w
  // -> dx), 2 backward weights (x, dy -> dw).
  void Conv2d(int which, const Tensor& a, const Tensor& b, const Tensor* bias, Tensor& out,
              const Conv2dGeometry& g, const std::shared_ptr<MemoryTracker>& tracker);

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
    if (cache_.size() >= onednn_kernels_internal::kMaxCachedPrimitives) cache_.clear();
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
  static dnnl::memory::desc Flat(const Tensor& t) {
    return onednn_kernels_internal::F32Desc({t.num_elements()},
                                            onednn_kernels_internal::Tag::a);
  }

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

}  // namespace remat

#endif  // REMAT_ENGINES_ONEDNN_ONEDNN_KERNELS_INTERNAL_H_
