// dropout's definition (op_def.h): its entry and its table kernel, whose
// mask is drawn from engines/api/philox.h's bits.
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
// dropout(x, seed; p, key): x * keep_i / (1 - p), keep_i from the bits of
// engines/api/philox.h. Its own gradient rule (the same mask on dy).
const KernelOp kDropoutKernel = DefineKernel(
    {.name = "dropout",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs&) {
       if (in[1]->shape().rank() != 0) {
         throw Error(StrCat("the seed is ", in[1]->TypeString(), ", expected i32[]"));
       }
       return in[0]->shape();
     },
     .flops = [](std::span<const Tensor* const>, const Shape& out) { return out.num_elements(); },
     .int_operands = 0b10});

// clang-format off
const OpDef kRandomOps[] = {
    // dropout y = x * keep / (1 - p): inputs x and a seed (i32[]); attrs
    //         `scalar` = p, the drop probability in [0, 1), and `ints` =
    //         {key}, the op's stable key. keep_i is 1 when
    //         RandomBits(seed, key, i) >= DropThreshold(p) (philox.h): a
    //         pure function of (seed, key, i), so a recomputation draws the
    //         forward's mask (CONTRACT.md, randomness). Saves the seed alone
    //         (4 bytes): dx = dropout(dy, seed), the same mask, redrawn.
    {.kind = OpKind::kDropout, .name = "dropout", .arity = 2, .has_scalar = true, .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) {
       if (in[1].rank() != 0) {
         throw Error(StrCat("the seed is of shape ", in[1].ToString(), "; dropout takes a scalar seed"));
       }
       if (!(op.scalar >= 0 && op.scalar < 1)) {
         throw Error(StrCat("drop probability ", op.scalar, " is outside [0, 1)"));
       }
       return in[0];
     },
     .saves = [](const Needs& needs, Saves& s) { s.inputs[1] = needs[0]; },
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kDropoutKernel, {&in[0], &in[1]}, {.scalar = op.scalar, .key = Int(op, 0)});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kDropoutKernel, {&a.dout, &a.saved_inputs[1]},
                       {.scalar = op.scalar, .key = Int(op, 0)});
       }
     },
     .flops = OnePerOutput,
     .forward_depth = OneRounding,
     .backward_depth = [](const DepthArgs&, double dy, std::vector<double>& k) {
       k[0] = dy + 1;  // one multiply by the mask's scale
     },
     .example = [](Op& op) {
       op.scalar = 0.25;
       op.ints = {7};
       return Shapes{Shape({3, 4}), Shape()};
     },
     .int_inputs = 0b10},
};
// clang-format on

}  // namespace

std::span<const OpDef> RandomOpDefs() { return kRandomOps; }

}  // namespace op_defs
}  // namespace remat
