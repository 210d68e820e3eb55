// The pieces several families' OpDef entries share (op_defs_shared.h).
#include "engines/api/op_defs_shared.h"

#include <algorithm>

#include "engines/api/error.h"

namespace remat {
namespace op_defs {

// The integer attribute i of `op`, or an error naming the op.
int64_t Int(const Op& op, size_t i) {
  if (op.ints.size() <= i) {
    throw Error(StrCat(Program::Describe(op), ": missing integer attribute ", i, " (has ",
                       op.ints.size(), ")"));
  }
  return op.ints[i];
}

std::string IntsText(const std::vector<int64_t>& ints) {
  std::string list;
  for (int64_t v : ints) list += StrCat(list.empty() ? "" : ",", v);
  return "[" + list + "]";
}

Shape SameAsFirst(const Op&, const Shapes& in) { return in[0]; }

Shape SameShapes(const Op& op, const Shapes& in) {
  if (in[0] != in[1]) {
    throw Error(StrCat("operand shapes differ: ", in[0].ToString(), " and ", in[1].ToString(), " (",
                       OpKindName(op.kind), " takes operands of one shape)"));
  }
  return in[0];
}

void SavesNothing(const Needs&, Saves&) {}
// The backward rule reads input 0 (the elementwise ops' x).
void SavesInput0(const Needs& needs, Saves& s) { s.inputs[0] = needs[0]; }
// Each input's cotangent reads the other input (matmul, mul).
void SavesOther(const Needs& needs, Saves& s) {
  s.inputs[1] = needs[0];
  s.inputs[0] = needs[1];
}

int64_t NoFlops(const Shapes&, const Shape&) { return 0; }
int64_t OnePerOutput(const Shapes&, const Shape& out) { return out.num_elements(); }

int64_t LastDim(const Shape& s) { return s.rank() == 0 ? 1 : s.dim(s.rank() - 1); }
int64_t Rows(const Shape& s) {
  const int64_t c = LastDim(s);
  return c == 0 ? 0 : s.num_elements() / c;
}

// Rounding depths shared by several ops (harness/rounding_depth.h).
// Exact ops (copies, relu, name): no rounding, the cotangent passes through.
double ExactDepth(const DepthArgs& a) { return a.deepest(); }
void PassThrough(const DepthArgs&, double dy, std::vector<double>& k) {
  for (double& x : k) x = dy;
}
// One rounding forward; dx = dy * f'(x): max(dy, Kf(x)) + 2.
double OneRounding(const DepthArgs& a) { return a.deepest() + 1; }
void TimesDerivative(const DepthArgs& a, double dy, std::vector<double>& k) {
  k[0] = std::max(dy, a.kf_inputs[0]) + 2;
}

Shapes Unary34(Op&) { return {Shape({3, 4})}; }
Shapes Binary34(Op&) { return {Shape({3, 4}), Shape({3, 4})}; }

}  // namespace op_defs
}  // namespace remat
