// The definitions (op_def.h) of the ops that move or relabel elements and
// do no arithmetic but expand's backward sum: name and state (identities),
// transpose, split_heads, merge_heads, reshape, permute, slice, expand, cat
// and select, one entry each, with the table kernels they call.
#include "engines/api/op_defs_families.h"

#include <algorithm>
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

// slice and select, as the table's slice kernels take them: x's elements
// start + j step on `axis`, j < length (select: length 1, the axis dropped).
struct SliceSpec {
  int64_t axis = 0, start = 0, length = 0, step = 1;
};
// slice's ints = {axis, start, length} or {axis, start, length, step}: 0 <=
// axis < rank, step >= 1, length >= 0, start >= 0 and, length > 0, start +
// (length - 1) step < the axis' size (length 0: start <= it).
SliceSpec SliceOf(const Op& op, const Shape& x) {
  const bool form = op.ints.size() == 3 || op.ints.size() == 4;
  const SliceSpec s{form ? op.ints[0] : -1, form ? op.ints[1] : 0, form ? op.ints[2] : 0,
                    op.ints.size() == 4 ? op.ints[3] : 1};
  const bool axis_ok = s.axis >= 0 && s.axis < x.rank();
  const int64_t n = axis_ok ? x.dim(static_cast<int>(s.axis)) : 0;
  if (!axis_ok || s.step < 1 || s.start < 0 || s.length < 0 ||
      (s.length == 0 ? s.start > n : s.start + (s.length - 1) * s.step >= n)) {
    std::string list;
    for (int64_t v : op.ints) list += StrCat(list.empty() ? "" : ",", v);
    throw Error(StrCat("slice: ints = [", list, "] (axis, start, length[, step >= 1]) is not within x ",
                       x.ToString()));
  }
  return s;
}
// select's ints = {axis, index}: 0 <= axis < rank, 0 <= index < its size.
SliceSpec SelectOf(const Op& op, const Shape& x) {
  if (op.ints.size() != 2 || op.ints[0] < 0 || op.ints[0] >= x.rank() || op.ints[1] < 0 ||
      op.ints[1] >= x.dim(static_cast<int>(op.ints[0]))) {
    std::string list;
    for (int64_t v : op.ints) list += StrCat(list.empty() ? "" : ",", v);
    throw Error(StrCat("select: ints = [", list, "] (axis, index) is not within x ", x.ToString(),
                       " (no negative axis or index: add the size)"));
  }
  return {op.ints[0], op.ints[1], 1, 1};
}
// x's shape with `axis` of extent `length`, or without `axis` (drop).
Shape SlicedShape(const Shape& x, int64_t axis, int64_t length, bool drop) {
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    if (i != axis) dims.push_back(x.dim(i));
    if (i == axis && !drop) dims.push_back(length);
  }
  return Shape(dims);
}
// The slice kernels' operands: y = x's slice (attrs: axis int_a, start
// int_b, step int_c, 0 read as 1) of shape attrs.shape, x's shape with the
// axis' extent its length or the axis dropped (length 1). Checked so that
// no index leaves x.
void CheckSliceKernel(const Shape& x, const Shape& y, const KernelAttrs& a) {
  const int64_t axis = a.int_a, start = a.int_b, step = a.int_c == 0 ? 1 : a.int_c;
  bool ok = axis >= 0 && axis < x.rank() && step >= 1 && start >= 0;
  int64_t length = 1;
  if (ok && y.rank() == x.rank()) {
    length = y.dim(static_cast<int>(axis));
    ok = SlicedShape(x, axis, length, false) == y;
  } else {
    ok = ok && y.rank() == x.rank() - 1 && SlicedShape(x, axis, 1, true) == y;
  }
  const int64_t n = ok ? x.dim(static_cast<int>(axis)) : 0;
  if (!ok || (length == 0 ? start > n : start + (length - 1) * step >= n)) {
    throw Error(StrCat("slice: ", y.ToString(), " is not the slice of x ", x.ToString(),
                       " on axis ", axis, " from ", start, " by ", step));
  }
}
// x -> attrs.shape (the slice's).
const KernelOp kSliceKernel = DefineKernel(
    {.name = "slice",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckSliceKernel(in[0]->shape(), a.shape, a);
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
// dy -> dx of shape attrs.shape (x's).
const KernelOp kSliceBackwardKernel = DefineKernel(
    {.name = "slice_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       CheckSliceKernel(a.shape, in[0]->shape(), a);
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
// The slice kernel's call of `s` on x into `y`, and its backward (dy into
// x's shape).
Tensor SliceCall(Kernels& k, const SliceSpec& s, const Tensor& x, const Shape& y) {
  return k.Call(kSliceKernel, {&x}, {.int_a = s.axis, .int_b = s.start, .int_c = s.step, .shape = y});
}
Tensor SliceBackwardCall(Kernels& k, const SliceSpec& s, const Tensor& dy, const Shape& x) {
  return k.Call(kSliceBackwardKernel, {&dy}, {.int_a = s.axis, .int_b = s.start, .int_c = s.step, .shape = x});
}

// slice's and select's rules (Of: SliceOf or SelectOf; kDrop: select
// drops the axis): the slice kernel and its backward.
template <SliceSpec (*Of)(const Op&, const Shape&), bool kDrop>
Shape TakeShape(const Op& op, const Shapes& in) {
  const SliceSpec s = Of(op, in[0]);
  return SlicedShape(in[0], s.axis, s.length, kDrop);
}
template <SliceSpec (*Of)(const Op&, const Shape&), bool kDrop>
Tensor TakeForward(Kernels& k, const Op& op, const Tensors& in) {
  const SliceSpec s = Of(op, in[0].shape());
  return SliceCall(k, s, in[0], SlicedShape(in[0].shape(), s.axis, s.length, kDrop));
}
template <SliceSpec (*Of)(const Op&, const Shape&)>
void TakeBackward(Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
  if (a.needs[0]) d[0] = SliceBackwardCall(k, Of(op, a.input_shapes[0]), a.dout, a.input_shapes[0]);
}

// cat of a and b on `axis`: one rank, every other axis equal.
Shape CatShape(int64_t axis, const Shape& a, const Shape& b) {
  bool ok = a.rank() == b.rank() && axis >= 0 && axis < a.rank();
  for (int i = 0; ok && i < a.rank(); ++i) ok = i == axis || a.dim(i) == b.dim(i);
  if (!ok) {
    throw Error(StrCat("cat: ", a.ToString(), " and ", b.ToString(), " do not join on axis ", axis,
                       " (one rank, every other axis equal; no negative axis)"));
  }
  return SlicedShape(a, axis, a.dim(static_cast<int>(axis)) + b.dim(static_cast<int>(axis)), false);
}
// (a, b) -> a then b on axis int_a.
const KernelOp kCatKernel = DefineKernel(
    {.name = "cat",
     .arity = 2,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return CatShape(a.int_a, in[0]->shape(), in[1]->shape());
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});

// expand of x to `dims` (numpy broadcasting): x's axes aligned with the
// last ones, each 1 or equal; every dim >= 0 given.
Shape ExpandShape(const Shape& x, std::span<const int64_t> dims) {
  const int64_t lead = static_cast<int64_t>(dims.size()) - x.rank();
  bool ok = lead >= 0;
  for (int64_t d : dims) ok = ok && d >= 0;
  for (int i = 0; ok && i < x.rank(); ++i) ok = x.dim(i) == 1 || x.dim(i) == dims[static_cast<size_t>(lead + i)];
  if (!ok) {
    std::string list;
    for (int64_t d : dims) list += StrCat(list.empty() ? "" : ",", d);
    throw Error(StrCat("expand: x ", x.ToString(), " does not broadcast to [", list,
                       "] (x's axes align with the last ones, each 1 or equal; every dim given, no -1)"));
  }
  return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
}
// x -> attrs.shape; a copy.
const KernelOp kExpandKernel = DefineKernel(
    {.name = "expand",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       return ExpandShape(in[0]->shape(), a.shape.dims());
     },
     .flops = [](std::span<const Tensor* const>, const Shape&) { return int64_t{0}; }});
// dy -> dx of shape attrs.shape (x's): one addition per element of dy.
const KernelOp kExpandBackwardKernel = DefineKernel(
    {.name = "expand_backward",
     .arity = 1,
     .shape = [](std::span<const Tensor* const> in, const KernelAttrs& a) {
       if (ExpandShape(a.shape, in[0]->shape().dims()) != in[0]->shape()) {
         throw Error(StrCat("expand's backward: dy ", in[0]->TypeString(), " is not x ", a.shape.ToString(),
                            " expanded"));
       }
       return a.shape;
     },
     .flops = [](std::span<const Tensor* const> in, const Shape&) { return in[0]->num_elements(); }});

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

    // slice   y = x[..., start:start + length step:step, ...] on one axis
    //         (attr ints = {axis, start, length} or {axis, start, length,
    //         step}, step >= 1, 1 if left out): torch's narrow, split and
    //         chunk, one piece each, and x[:, a:b:step] (length = ceil((b -
    //         a) / step)). Saves nothing; dx = dy where the slice took x's
    //         elements, 0 elsewhere
    {.kind = OpKind::kSlice, .name = "slice", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = TakeShape<SliceOf, false>,
     .saves = SavesNothing,
     .forward = TakeForward<SliceOf, false>,
     .backward = TakeBackward<SliceOf>,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {1, 1, 2};
       return Shapes{Shape({3, 4})};
     }},

    // expand  y = x broadcast to the dims of attr ints (numpy's rule: x's
    //         axes aligned with the last ones, each 1 or equal; torch's
    //         expand, every dim given). Saves nothing; dx[k] = the sum of
    //         the dy elements that read x[k], added to +0 one at a time in
    //         increasing row-major position of dy; FLOPs 0 (a copy)
    {.kind = OpKind::kExpand, .name = "expand", .arity = 1, .has_scalar = false,
     .num_ints = kAnyNumberOfInts,
     .shape = [](const Op& op, const Shapes& in) { return ExpandShape(in[0], op.ints); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kExpandKernel, {&in[0]}, {.shape = ExpandShape(in[0].shape(), op.ints)});
     },
     .backward = [](Kernels& k, const Op&, const BackwardArgs& a, Tensors& d) {
       if (a.needs[0]) d[0] = k.Call(kExpandBackwardKernel, {&a.dout}, {.shape = a.input_shapes[0]});
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = [](const DepthArgs& a, double dy, std::vector<double>& k) {
       // Each x element sums the dy elements that read it.
       const int64_t x = std::max<int64_t>(1, a.inputs[0].num_elements());
       k[0] = dy + static_cast<double>(a.output.num_elements() / x);
     },
     .example = [](Op& op) {
       op.ints = {2, 3, 4};
       return Shapes{Shape({3, 1})};
     }},

    // cat     y = a then b along axis attr ints = {axis} (torch.cat of two;
    //         of more: a left fold of these). Saves nothing; da and db are
    //         dy's two slices on the axis; FLOPs 0 (a copy)
    {.kind = OpKind::kCat, .name = "cat", .arity = 2, .has_scalar = false, .num_ints = 1,
     .shape = [](const Op& op, const Shapes& in) { return CatShape(op.ints[0], in[0], in[1]); },
     .saves = SavesNothing,
     .forward = [](Kernels& k, const Op& op, const Tensors& in) {
       return k.Call(kCatKernel, {&in[0], &in[1]}, {.int_a = Int(op, 0)});
     },
     .backward = [](Kernels& k, const Op& op, const BackwardArgs& a, Tensors& d) {
       const int64_t axis = Int(op, 0), na = a.input_shapes[0].dim(static_cast<int>(axis));
       for (int i = 0; i < 2; ++i) {
         if (!a.needs[i]) continue;
         const Shape& x = a.input_shapes[i];
         d[i] = SliceCall(k, {axis, i == 0 ? 0 : na, x.dim(static_cast<int>(axis)), 1}, a.dout, x);
       }
     },
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {1};
       return Shapes{Shape({2, 1, 3}), Shape({2, 2, 3})};
     }},

    // select  y = x[..., index, ...] on axis (attr ints = {axis, index}),
    //         the axis dropped: torch's select, x[:, 0]. Saves nothing;
    //         dx = dy at the index, 0 elsewhere; FLOPs 0 (a copy)
    {.kind = OpKind::kSelect, .name = "select", .arity = 1, .has_scalar = false, .num_ints = 2,
     .shape = TakeShape<SelectOf, true>,
     .saves = SavesNothing,
     .forward = TakeForward<SelectOf, true>,
     .backward = TakeBackward<SelectOf>,
     .flops = NoFlops,
     .forward_depth = ExactDepth,
     .backward_depth = PassThrough,
     .example = [](Op& op) {
       op.ints = {1, 0};
       return Shapes{Shape({2, 3, 4})};
     }},
};
// clang-format on

}  // namespace

std::span<const OpDef> LayoutOpDefs() { return kLayoutOps; }

}  // namespace op_defs
}  // namespace remat
