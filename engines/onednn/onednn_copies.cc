// The copies: transpose (square tiles, 4x4 blocks transposed in SSE2
// registers), split_heads and merge_heads (a head's row at a time). Copies
// only, so the bits are the input's on every path.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::ParallelMinElements;
#if defined(__SSE2__)
using onednn_kernels_internal::LoadTransposed4x4;
#endif


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

}  // namespace remat
