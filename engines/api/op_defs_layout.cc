// The definitions (op_def.h) of the ops that move or relabel elements and
// do no arithmetic: name and state (identities), transpose, split_heads,
// merge_heads, reshape, permute and slice, one entry each, with the table
// kernels they call.
#include "engines/api/op_defs_families.h"

#include <span>
#include <string>
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
// reshape: the elements in order, under another shape (attrs.shape); a
// copy, no FLOPs.
const KernelOp kReshapeKernel = DefineKernel(
    {.name = "reshape",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (a.shape.num_elements() != in[0]->num_elements()) {
         throw Error(StrCat("cannot reshape ", in[0]->TypeString(), " (", in[0]->num_elements(),
                            " elements) to ", a.shape.ToString(), " (", a.shape.num_elements(),
                            " elements)"));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) -> int64_t { return 0; }});

// The output shape of permuting `s` by `perm`, or an error naming both.
Shape PermutedShape(const Shape& s, std::span<const int64_t> perm) {
  std::vector<bool> seen(static_cast<size_t>(s.rank()), false);
  bool ok = static_cast<int>(perm.size()) == s.rank();
  std::vector<int64_t> dims;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    const int64_t p = perm[i];
    ok = p >= 0 && p < s.rank() && !seen[static_cast<size_t>(p)];
    if (ok) {
      seen[static_cast<size_t>(p)] = true;
      dims.push_back(s.dim(static_cast<int>(p)));
    }
  }
  if (!ok) {
    std::string list;
    for (int64_t p : perm) list += StrCat(list.empty() ? "" : ",", p);
    throw Error(StrCat("permute: [", list, "] is not a permutation of the ", s.rank(),
                       " axes of ", s.ToString()));
  }
  return Shape(dims);
}
// permute: y[i_perm[0], ..., i_perm[r-1]] = x[i_0, ..., i_{r-1}]; a copy.
const KernelOp kPermuteKernel = DefineKernel(
    {.name = "permute",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return PermutedShape(in[0]->shape(), a.perm);
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) -> int64_t { return 0; }});

// The identity's rules (name, state): the output is the input's buffer,
// and dx = dy.
Tensor IdentityForward(Kernels&, const Op&, const Tensors& in) { return in[0]; }
void IdentityBackward(Kernels&, const Op&, const BackwardArgs& a, Tensors& d) {
  if (a.needs[0]) d[0] = a.dout;
}

// slice: ints = {axis, start, length}, 0 <= start, length >= 0, start +
// length <= the axis' size. A copy: no FLOPs.
Shape SliceShape(const Op& op, const Shape& x) {
  const int64_t axis = op.ints[0], start = op.ints[1], length = op.ints[2];
  if (axis < 0 || axis >= x.rank() || start < 0 || length < 0 ||
      start + length > x.dim(static_cast<int>(axis))) {
    throw Error(StrCat("slice: ints = {axis, start, length} = {", axis, ", ", start, ", ", length,
                       "} is not within x ", x.ToString()));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) dims.push_back(i == axis ? length : x.dim(i));
  return Shape(dims);
}
// x -> attrs.shape (the slice's), axis int_a, start int_b.
const KernelOp kSliceKernel = DefineKernel(
    {.name = "slice",
     .arity = 1,
     .shape = [](std::span<const Tensor* const>, const KernelAttrs& a) { return a.shape; },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
// dy -> dx of shape attrs.shape (x's).
const KernelOp kSliceBackwardKernel = DefineKernel(
    {.name = "slice_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const>, const KernelAttrs& a) { return a.shape; },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});

// The reshape op's dims as a shape, each >= 0.
Shape DimsOf(const Op& op) {
  for (int64_t d : op.ints) {
    if (d < 0) throw Error(StrCat("reshape: dim ", d, " is negative (no -1 inference: give every dim)"));
  }
  return Shape(op.ints);
}

// clang-format off
const OpDef kLayoutOps[] = {
    // name    y = x, labelled (attr name: checkpoint_name); saves nothing
    //         dx = dy; its output is its input's buffer
    {.kind = OpKind::kName, .name = "name", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       if (op.name.empty()) throw Error("name needs a non-empty label (checkpoint_name's)");
       return in[0];
     },
     .saves = SavesNothing,
     .forward = IdentityForward,
     .backward = IdentityBackward,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.name = "label";
       return Shapes{Shape({3, 4})};
     }},

    // transpose  y = x with the last two axes swapped (rank 2 or 3)
    //         saves nothing; dx = transpose(dy); a copy: no FLOPs
    {.kind = OpKind::kTranspose, .name = "transpose", .arity = 1, .has_scalar = false,
     .num_ints = 0,
     .shape = [](const Op&, const Shapes& in) { return Kernels::TransposeShape(in[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op&, const Tensors& in) { return k.Transpose(in[0]); },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Transpose(a.dout);
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op&) { return Shapes{Shape({2, 3, 4})}; }},

    // split_heads  (B*S, D) -> (B*H, S, D/H) (attrs ints = {B, H})
    //         out[b*H + h, s, j] = x[b*S + s, h*(D/H) + j]
    //         saves nothing; dx = merge_heads(dy, B); a copy: no FLOPs
    {.kind = OpKind::kSplitHeads, .name = "split_heads", .arity = 1, .has_scalar = false,
     .num_ints = 2,
     .shape = [](const Op& op, const Shapes& in) {
       return Kernels::SplitHeadsShape(in[0], op.ints[0], op.ints[1]);
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.SplitHeads(in[0], Int(op, 0), Int(op, 1));
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.MergeHeads(a.dout, Int(op, 0));
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 2};
       return Shapes{Shape({6, 8})};
     }},

    // merge_heads  (B*H, S, Dh) -> (B*S, H*Dh) (attr ints = {B})
    //         saves nothing; dx = split_heads(dy, B, H), H = (B*H) / B from
    //         x's shape; a copy: no FLOPs
    {.kind = OpKind::kMergeHeads, .name = "merge_heads", .arity = 1, .has_scalar = false,
     .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) { return Kernels::MergeHeadsShape(in[0], op.ints[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) { return k.MergeHeads(in[0], Int(op, 0)); },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (!a.needs[0]) return;
       const int64_t batch = Int(op, 0);
       d[0] = k.SplitHeads(a.dout, batch, a.input_shapes[0].dim(0) / batch);
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2};
       return Shapes{Shape({4, 3, 4})};
     }},

    // reshape  the elements in order under the dims of attr ints (one
    //         element count, every dim given); saves nothing;
    //         dx = reshape(dy) to x's shape; a copy: no FLOPs
    {.kind = OpKind::kReshape, .name = "reshape", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) {
       const Shape out = DimsOf(op);
       if (out.num_elements() != in[0].num_elements()) {
         throw Error(StrCat("cannot reshape ", in[0].ToString(), " (", in[0].num_elements(),
                            " elements) to ", out.ToString(), " (", out.num_elements(), " elements)"));
       }
       return out;
     },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kReshapeKernel, {&in[0]}, {.shape = DimsOf(op)});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kReshapeKernel, {&a.dout}, {.shape = a.input_shapes[0]});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 6};
       return Shapes{Shape({3, 4})};
     }},

    // permute  output axis i is input axis ints[i] (a permutation of x's
    //         axes); saves nothing; dx = permute(dy) by the inverse
    //         permutation; a copy: no FLOPs
    {.kind = OpKind::kPermute, .name = "permute", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) { return PermutedShape(in[0], op.ints); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kPermuteKernel, {&in[0]}, {.perm = op.ints});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (!a.needs[0]) return;
       std::vector<int64_t> inverse(op.ints.size());
       for (size_t i = 0; i < op.ints.size(); ++i) inverse[static_cast<size_t>(op.ints[i])] = static_cast<int64_t>(i);
       d[0] = k.Call(kPermuteKernel, {&a.dout}, {.perm = inverse});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {2, 0, 1};
       return Shapes{Shape({2, 3, 4})};
     }},

    // state   y = x, the new value of the program's parameter named by attr
    //         name (a running statistic): engines return it in
    //         Result::state, from the forward pass, once per run
    //         (CONTRACT.md, state). Saves nothing; dx = dy; its output is
    //         its input's buffer
    {.kind = OpKind::kState, .name = "state", .arity = 1, .has_scalar = false, .num_ints = 0,
     .shape = [](const Op& op, const Shapes& in) {
       if (op.name.empty()) throw Error("state needs the name of the parameter it updates");
       return in[0];
     },
     .saves = SavesNothing,
     .forward = IdentityForward,
     .backward = IdentityBackward,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.name = "x0";
       return Shapes{Shape({3, 4})};
     }},

    // slice   y = x[..., start:start + length, ...] on one axis (attr ints =
    //         {axis, start, length}): torch's narrow, split and chunk, one
    //         piece each. Saves nothing; dx = dy in the slice, 0 elsewhere
    {.kind = OpKind::kSlice, .name = "slice", .arity = 1, .has_scalar = false, .num_ints = 3,
     .shape = [](const Op& op, const Shapes& in) { return SliceShape(op, in[0]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kSliceKernel, {&in[0]},
                     {.int_a = op.ints[0], .int_b = op.ints[1], .shape = SliceShape(op, in[0].shape())});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) {
         d[0] = k.Call(kSliceBackwardKernel, {&a.dout},
                       {.int_a = op.ints[0], .int_b = op.ints[1], .shape = a.input_shapes[0]});
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {1, 1, 2};
       return Shapes{Shape({3, 4})};
     }},
};
// clang-format on

}  // namespace

std::span<const OpDef> LayoutOpDefs() { return kLayoutOps; }

}  // namespace op_defs
}  // namespace remat
