// The definitions (op_def.h) of the ops that read by an integer index:
// embedding and masked_fill, one entry each, with the table kernels they
// call.
#include "engines/api/op_defs_families.h"

#include <span>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/op_defs_shared.h"

namespace remat {
namespace op_defs {
namespace {

// The table's kernels the ops below call (kernels.h: each backend
// implements them by name).
// embedding's kernels: rows of a table gathered by id, and the rows of dy
// added back by id in increasing position (the order CONTRACT.md states).
const KernelOp kGatherRowsKernel = DefineKernel(
    {.name = "gather_rows",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape().rank() != 2) {
         throw Error(StrCat("the table is ", in[0]->TypeString(), ", expected rank 2 (V, D)"));
       }
       std::vector<int64_t> dims(in[1]->shape().dims().begin(), in[1]->shape().dims().end());
       dims.push_back(in[0]->shape().dim(1));
       return Shape(dims);
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b10});
// attrs.int_a = V, the table's rows; attrs.skip: the padding_idx, whose
// row stays zero.
const KernelOp kScatterAddRowsKernel = DefineKernel(
    {.name = "scatter_add_rows",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& attrs) {
       const Shape& dy = in[0]->shape();
       if (dy.rank() != in[1]->shape().rank() + 1) {
         throw Error(StrCat("dy ", in[0]->TypeString(), " does not fit ids ", in[1]->TypeString()));
       }
       return Shape({attrs.int_a, dy.dim(dy.rank() - 1)});
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[0]->num_elements(); },
     .int_operands = 0b10});
// masked_fill: x where mask is 0, attrs.scalar where it is not.
const KernelOp kMaskedFillKernel = DefineKernel(
    {.name = "masked_fill",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[0]->shape() != in[1]->shape()) {
         throw Error(StrCat("the mask is ", in[1]->TypeString(), ", x is ", in[0]->TypeString()));
       }
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; },
     .int_operands = 0b10});

// clang-format off
const OpDef kIndexOps[] = {
    // embedding y[..., :] = table[ids[...], :]: inputs table (V, D) and ids
    //         (i32, any shape, each in [0, V)); y is ids' shape + (D).
    //         Saves the ids; dtable = rows of dy added by id in increasing
    //         position of ids (row-major), so repeated ids sum in a stated
    //         order. FLOPs 0 (a gather). Optional attr `ints` =
    //         {PADDING_IDX}, 0 <= PADDING_IDX < V: that row's gradient is
    //         zero (the forward still reads it); left out, none.
    {.kind = OpKind::kEmbedding, .name = "embedding", .arity = 2, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       if (in[0].rank() != 2) throw Error(StrCat("the table is ", in[0].ToString(), ", expected (V, D)"));
       if (op.ints.size() > 1 || (op.ints.size() == 1 && (op.ints[0] < 0 || op.ints[0] >= in[0].dim(0)))) {
         throw Error(StrCat("embedding's ints=", IntsText(op.ints), " on the table ", in[0].ToString(),
                            ": expected ints=[PADDING_IDX] with 0 <= PADDING_IDX < ", in[0].dim(0),
                            ", or no ints"));
       }
       std::vector<int64_t> dims(in[1].dims().begin(), in[1].dims().end());
       dims.push_back(in[0].dim(1));
       return Shape(dims);
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op&, const Tensors& in) {
       return k.Call(kGatherRowsKernel, {&in[0], &in[1]});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kScatterAddRowsKernel, {&a.dout, &a.saved_inputs[1]},
                       {.int_a = a.input_shapes[0].dim(0), .skip = op.ints});
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       k[0] = dy + static_cast<double>(a.inputs[1].num_elements());  // a row sums up to every position
     },
     .example = [](Op&) { return Shapes{Shape({5, 4}), Shape({3})}; },
     .int_inputs = 0b10,
     .int_bound = [](const Shapes& in, int) { return in[0].dim(0); },
     .optional_ints = true},

    // masked_fill y = mask ? c : x (attr `scalar` = c, e.g. -1e9 above a
    //         causal diagonal): inputs x and mask (i32, x's shape; nonzero
    //         fills). Saves the mask; dx = masked_fill(dy, mask, 0). FLOPs 0.
    {.kind = OpKind::kMaskedFill, .name = "masked_fill", .arity = 2, .has_scalar = true,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) {
       if (in[0] != in[1]) {
         throw Error(StrCat("the mask is ", in[1].ToString(), ", x is ", in[0].ToString(),
                            "; masked_fill takes a mask of x's shape"));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kMaskedFillKernel, {&in[0], &in[1]}, {.scalar = op.scalar});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kMaskedFillKernel, {&a.dout, &a.saved_inputs[1]}, {.scalar = 0});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.scalar = -1e9;
       return Shapes{Shape({3, 4}), Shape({3, 4})};
     },
     .int_inputs = 0b10,
     .int_bound = [](const Shapes&, int) { return int64_t{2}; }},
};
// clang-format on

}  // namespace

std::span<const OpDef> IndexOpDefs() { return kIndexOps; }

}  // namespace op_defs
}  // namespace remat
