// Each primitive op's forward rule and backward (VJP) rule, as its OpDef
// (op_def.h, op_defs_<family>.cc) defines them: these are lookups in the registry.
// Engines call these and never re-derive a gradient, so every engine that
// runs the same rules on the same kernels computes the same bits.
//
// A backward rule reads only what the op saved: `Saves` says which inputs and
// whether the output the backward rule needs, given which input cotangents are
// wanted. Engines save exactly that (and, under a policy, may recompute it).
//
// Structural ops (checkpoint, scan) have no rule here: their forward and
// backward are the engines' business.
#ifndef REMAT_ENGINES_API_RULES_H_
#define REMAT_ENGINES_API_RULES_H_

#include <span>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

// Which residuals the backward rule of `kind` reads when the cotangents of
// inputs with needs[i] true are wanted.
Saves SavesFor(OpKind kind, const std::vector<bool>& needs);

// The forward rule of a primitive op. Ops with attributes (scale's constant,
// split_heads' and merge_heads' batch and heads) read them from `op`. Every
// output is a new tensor except name's, which is its input itself (the same
// buffer): an engine that frees or evicts values one buffer at a time must
// treat the two as one.
Tensor Forward(Kernels& k, const Op& op, const std::vector<Tensor>& inputs);

// The backward rule: from the saved inputs (others undefined), the saved
// output (or undefined), the output cotangent `dout` and the input shapes,
// returns the cotangent of each input with needs[i] true (others undefined).
// A cotangent may alias `dout` (add and name pass it through).
// `into` (BackwardArgs::into): where the rule may write each input's
// cotangent; null for nowhere.
std::vector<Tensor> Backward(Kernels& k, const Op& op, const std::vector<Tensor>& saved_inputs,
                             const Tensor& saved_output, const Tensor& dout,
                             const std::vector<Shape>& input_shapes,
                             const std::vector<bool>& needs,
                             std::span<const Tensor> into = {});

// The same rules by kind alone, for the ops without attributes; an op that
// has attributes (kScale, kSplitHeads, kMergeHeads) throws remat::Error
// asking for the overload that takes the Op.
Tensor Forward(Kernels& k, OpKind kind, const std::vector<Tensor>& inputs);
std::vector<Tensor> Backward(Kernels& k, OpKind kind, const std::vector<Tensor>& saved_inputs,
                             const Tensor& saved_output, const Tensor& dout,
                             const std::vector<Shape>& input_shapes,
                             const std::vector<bool>& needs);

// True for the ops whose rules read attributes of the Op.
bool HasAttributes(OpKind kind);
// The FLOPs Kernels counts for one forward pass of `program`, from shapes
// alone (the FLOP model of engines/api/kernels.h): what schedules weigh.
int64_t ForwardFlops(const Program& program);

// True for the ops Forward and Backward handle.
bool IsPrimitive(OpKind kind);

}  // namespace remat

#endif  // REMAT_ENGINES_API_RULES_H_
