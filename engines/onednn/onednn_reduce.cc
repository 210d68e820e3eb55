// The reductions: sum (oneDNN's reduction primitive; its scratchpad counted
// by the tracker) and sum_leading (columns summed over rows in row order,
// SumOverRows in engines/onednn/onednn_kernels_internal.h).
#include <cstdint>
#include <memory>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "engines/api/error.h"
#include "engines/api/tensor.h"
#include "engines/onednn/onednn_kernels.h"
#include "engines/onednn/onednn_kernels_internal.h"

namespace remat {

using onednn_kernels_internal::F32Desc;
using onednn_kernels_internal::Guarded;
using onednn_kernels_internal::Key;
using onednn_kernels_internal::LastDim;
using onednn_kernels_internal::NumRows;
using onednn_kernels_internal::SumOverRows;
using onednn_kernels_internal::Tag;


void OneDnnKernels::State::Sum(const Tensor& x, Tensor& out,
                              const std::shared_ptr<MemoryTracker>& tracker) {
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

void OneDnnKernels::DoSumLeading(const Tensor& x, Tensor& out) {
  if (dry_run()) return;
  const int64_t c = LastDim(x), rows = NumRows(x);
  const float* x0 = x.f32();
  SumOverRows(rows, c, out.f32(), [&](int64_t r, int64_t j) { return x0[r * c + j]; });
}

}  // namespace remat
