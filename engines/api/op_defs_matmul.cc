// matmul's definition (op_def.h): its entry, on the shared MatMul kernel.
#include "engines/api/op_defs_families.h"

#include <algorithm>
#include <span>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/op_defs_shared.h"

namespace remat {
namespace op_defs {
namespace {

// clang-format off
const OpDef kMatMulOps[] = {
    // matmul  y = a @ b (rank 2, or rank 3 with one batch)
    //         saves b for da, a for db; da = dy @ b^T, db = a^T @ dy
    //         FLOPs 2mkn (times the batch)
    {.kind = OpKind::kMatMul, .name = "matmul", .arity = 2, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) { return Kernels::MatMulShape(in[0], false, in[1], false); },
     .saves = SavesOther,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.MatMul(in[0], false, in[1], false); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       // Each cotangent is one kernel call: written where the engine asks.
       if (a.needs[0]) {
         d[0] = a.Into(0) ? k.MatMulInto(*a.Into(0), a.dout, false, a.saved_inputs[1], true)
                          : k.MatMul(a.dout, false, a.saved_inputs[1], true);
       }
       if (a.needs[1]) {
         d[1] = a.Into(1) ? k.MatMulInto(*a.Into(1), a.saved_inputs[0], true, a.dout, false)
                          : k.MatMul(a.saved_inputs[0], true, a.dout, false);
       }
     },
     .flops = [](const Shapes& in, const Shape& out) {
       return 2 * out.num_elements() * in[0].dim(in[0].rank() - 1);
     },
     .forward_depth = [](const DepthArgs& a) { return a.deepest() + static_cast<double>(LastDim(a.inputs[0])); },
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // dA = dC B^T sums n terms, dB = A^T dC sums m.
       const int r = a.output.rank() - 2;
       const double m = static_cast<double>(a.output.dim(r)), n = static_cast<double>(a.output.dim(r + 1));
       k[0] = std::max(dy, a.kf_inputs[1]) + n;
       k[1] = std::max(dy, a.kf_inputs[0]) + m;
     },
     .example = [](Op&) { return Shapes{Shape({3, 4}), Shape({4, 5})}; }},
};
// clang-format on

}  // namespace

std::span<const OpDef> MatMulOpDefs() { return kMatMulOps; }

}  // namespace op_defs
}  // namespace remat
