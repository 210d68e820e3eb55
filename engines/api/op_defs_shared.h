// The pieces several families' OpDef entries share (op_defs_*.cc): the
// common shape, saves, FLOP and rounding-depth rules, the integer-attribute
// accessor and the usual examples. Internal to engines/api's op definitions;
// op_def.h is the interface.
#ifndef REMAT_ENGINES_API_OP_DEFS_SHARED_H_
#define REMAT_ENGINES_API_OP_DEFS_SHARED_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/op_def.h"
#include "engines/api/program.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {
namespace op_defs {

using Shapes = std::vector<Shape>;
using Tensors = std::vector<Tensor>;
using Needs = std::vector<bool>;

// The integer attribute i of `op`, or an error naming the op.
int64_t Int(const Op& op, size_t i);
// An ints list as program text writes it: "[1,2]".
std::string IntsText(const std::vector<int64_t>& ints);

// The output has the first input's shape.
Shape SameAsFirst(const Op&, const Shapes& in);
// The two inputs have one shape, the output's; else an error naming the op.
Shape SameShapes(const Op& op, const Shapes& in);

void SavesNothing(const Needs&, Saves&);
// The backward rule reads input 0 (the elementwise ops' x).
void SavesInput0(const Needs& needs, Saves& s);
// Each input's cotangent reads the other input (matmul, mul).
void SavesOther(const Needs& needs, Saves& s);

int64_t NoFlops(const Shapes&, const Shape&);
int64_t OnePerOutput(const Shapes&, const Shape& out);
// A table kernel's FLOPs: kFlops per element of its first operand, x.
template <int kFlops>
int64_t PerElementOfX(std::span<const Tensor* const> in, const Shape&) {
  return kFlops * in[0]->num_elements();
}

// The last axis' size (1 for a scalar), and the number of rows along it
// (0 when the last axis is empty).
int64_t LastDim(const Shape& s);
int64_t Rows(const Shape& s);

// Rounding depths shared by several ops (harness/rounding_depth.h).
// Exact ops (copies, relu, name): no rounding, the cotangent passes through.
double ExactDepth(const DepthArgs& a);
void PassThrough(const DepthArgs&, double dy, std::vector<double>& k);
// One rounding forward; dx = dy * f'(x): max(dy, Kf(x)) + 2.
double OneRounding(const DepthArgs& a);
void TimesDerivative(const DepthArgs& a, double dy, std::vector<double>& k);

// Examples: one (3, 4) input, or two.
Shapes Unary34(Op&);
Shapes Binary34(Op&);

}  // namespace op_defs
}  // namespace remat

#endif  // REMAT_ENGINES_API_OP_DEFS_SHARED_H_
