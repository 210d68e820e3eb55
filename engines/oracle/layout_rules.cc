// The oracle's rules for the ops that copy their input or move its
// elements: name (a checkpoint_name label), state (a parameter's new
// value), reshape and permute.
#include <algorithm>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// permute: the index in the output of each input element, by its
// multi-index (output axis i is input axis perm[i]).
std::vector<int64_t> PermutedPositions(const Shape& in, const std::vector<int64_t>& perm) {
  const int r = in.rank();
  std::vector<int64_t> out_dims(static_cast<size_t>(r));
  for (int i = 0; i < r; ++i) out_dims[i] = in.dim(static_cast<int>(perm[i]));
  std::vector<int64_t> where(static_cast<size_t>(in.num_elements()));
  std::vector<int64_t> idx(static_cast<size_t>(r));
  for (int64_t flat = 0; flat < in.num_elements(); ++flat) {
    int64_t rest = flat;
    for (int a = r - 1; a >= 0; --a) {
      idx[a] = rest % in.dim(a);
      rest /= in.dim(a);
    }
    int64_t o = 0;
    for (int i = 0; i < r; ++i) o = o * out_dims[i] + idx[static_cast<size_t>(perm[i])];
    where[flat] = o;
  }
  return where;
}

// name, state and reshape: y = x, element by element (reshape: under
// another shape, the elements in their order).
void CopyForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  UnaryForward(in, out, 0, flops, [](double x) { return x; });
}

void IdentityVjp(const VjpArgs& a) {
  // The identity: dx = dy (reshape: the elements keep their order, so dx =
  // dy under x's shape).
  UnaryVjp(a, 0, [](double, double dy) { return dy; });
}

Shape StateShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.name.empty()) throw ShapeError(op, in, "needs the name of the parameter it updates");
  return in[0];
}

Shape ReshapeShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  int64_t count = 1;
  for (int64_t d : op.ints) {
    if (d < 0) throw ShapeError(op, in, "reshape's dims must be >= 0");
    count *= d;
  }
  if (count != in[0].num_elements()) throw ShapeError(op, in, "reshape keeps the element count");
  return Shape(op.ints);
}

Shape PermuteShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  const std::vector<int64_t> sorted = [&] {
    std::vector<int64_t> s = op.ints;
    std::sort(s.begin(), s.end());
    return s;
  }();
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) {
      throw ShapeError(op, in, "ints must be a permutation of the axes");
    }
  }
  if (static_cast<int>(op.ints.size()) != in[0].rank()) {
    throw ShapeError(op, in, "ints must name every axis once");
  }
  std::vector<int64_t> dims;
  for (int64_t p : op.ints) dims.push_back(in[0].dim(static_cast<int>(p)));
  return Shape(dims);
}

void PermuteForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                    int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const std::vector<int64_t> where = PermutedPositions(in[0]->shape(), op.ints);
  for (int64_t i = 0; i < in[0]->num_elements(); ++i) y[where[i]] = x[i];
}

void PermuteVjp(const VjpArgs& a) {
  // A permutation: each x element's adjoint is its image's.
  const Shape& xs = a.in[0]->shape();
  const double* dy = a.dy.f64();
  const std::vector<int64_t> where = PermutedPositions(xs, a.op.ints);
  Tensor dx = a.NewGradient(xs);
  for (int64_t i = 0; i < xs.num_elements(); ++i) dx.f64()[i] = dy[where[i]];
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& LayoutRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kName, {SameShape, CopyForward, IdentityVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kState,
       {StateShape, CopyForward, IdentityVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kReshape,
       {ReshapeShape, CopyForward, IdentityVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kPermute,
       {PermuteShape, PermuteForward, PermuteVjp, SameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
