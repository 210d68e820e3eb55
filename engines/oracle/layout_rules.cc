// The oracle's rules for the ops that copy their input or move its
// elements: name (a checkpoint_name label), state (a parameter's new
// value), reshape, permute, expand (whose adjoint sums the copies') and
// cat.
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

// expand: numpy broadcasting of x to the dims in ints (x's axes aligned
// with the last ones, each 1 or equal).
Shape ExpandShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  const Shape& x = in[0];
  const int lead = static_cast<int>(op.ints.size()) - x.rank();
  if (lead < 0) throw ShapeError(op, in, "expands to fewer axes than x has");
  for (int64_t d : op.ints) {
    if (d < 0) throw ShapeError(op, in, "expand's dims must be >= 0");
  }
  for (int i = 0; i < x.rank(); ++i) {
    if (x.dim(i) != 1 && x.dim(i) != op.ints[static_cast<size_t>(lead + i)]) {
      throw ShapeError(op, in, "x's axes must be 1 or the output's");
    }
  }
  return Shape(op.ints);
}

// The element of x that each element of expand's output reads.
std::vector<int64_t> ExpandSources(const Shape& x, const Shape& out) {
  const int lead = out.rank() - x.rank();
  std::vector<int64_t> from(static_cast<size_t>(out.num_elements()));
  for (int64_t o = 0; o < out.num_elements(); ++o) {
    int64_t rest = o, k = 0, stride = 1;
    for (int a = out.rank() - 1; a >= lead; --a) {
      const int64_t i = rest % out.dim(a);
      rest /= out.dim(a);
      const int64_t xd = x.dim(a - lead);
      k += (xd == 1 ? 0 : i) * stride;
      stride *= xd;
    }
    from[static_cast<size_t>(o)] = k;
  }
  return from;
}

void ExpandForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out, int64_t*) {
  const std::vector<int64_t> from = ExpandSources(in[0]->shape(), out.shape());
  for (size_t o = 0; o < from.size(); ++o) out.f64()[o] = in[0]->f64()[from[o]];
}

void ExpandVjp(const VjpArgs& a) {
  // Each x element's adjoint is the sum of its copies'.
  const std::vector<int64_t> from = ExpandSources(a.in[0]->shape(), a.dy.shape());
  Tensor dx = a.NewGradient(a.in[0]->shape());
  for (size_t o = 0; o < from.size(); ++o) dx.f64()[from[o]] += a.dy.f64()[o];
  *a.flops += a.dy.num_elements();
  a.Contribute(0, std::move(dx));
}

// cat: a then b on axis ints[0]; one rank, every other axis equal.
Shape CatShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (op.ints.size() != 1) throw ShapeError(op, in, "needs ints = {axis}");
  const int64_t axis = op.ints[0];
  if (in[0].rank() != in[1].rank() || axis < 0 || axis >= in[0].rank()) {
    throw ShapeError(op, in, "joins two operands of one rank on one of their axes");
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in[0].rank(); ++i) {
    if (i != axis && in[0].dim(i) != in[1].dim(i)) throw ShapeError(op, in, "other axes must be equal");
    dims.push_back(in[0].dim(i) + (i == axis ? in[1].dim(i) : 0));
  }
  return Shape(dims);
}

// Calls f(operand, index in it, index in y) for every element of cat's
// output y.
template <typename F>
void ForEachCatElement(const Op& op, const Shape& a, const Shape& y, const F& f) {
  const int axis = static_cast<int>(op.ints[0]);
  int64_t inner = 1;
  for (int i = axis + 1; i < y.rank(); ++i) inner *= y.dim(i);
  const int64_t na = a.dim(axis), n = y.dim(axis), nb = n - na;
  for (int64_t o = 0; o < y.num_elements(); ++o) {
    const int64_t q = o % inner, j = (o / inner) % n, p = o / inner / n;
    if (j < na) {
      f(0, (p * na + j) * inner + q, o);
    } else {
      f(1, (p * nb + j - na) * inner + q, o);
    }
  }
}

void CatForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out, int64_t*) {
  ForEachCatElement(op, in[0]->shape(), out.shape(),
                    [&](int k, int64_t i, int64_t o) { out.f64()[o] = in[static_cast<size_t>(k)]->f64()[i]; });
}

void CatVjp(const VjpArgs& a) {
  // Each operand's adjoint is its part of dy's.
  Tensor d[2] = {a.NewGradient(a.in[0]->shape()), a.NewGradient(a.in[1]->shape())};
  ForEachCatElement(a.op, a.in[0]->shape(), a.dy.shape(),
                    [&](int k, int64_t i, int64_t o) { d[k].f64()[i] = a.dy.f64()[o]; });
  a.Contribute(0, std::move(d[0]));
  a.Contribute(1, std::move(d[1]));
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
      {OpKind::kExpand, {ExpandShape, ExpandForward, ExpandVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kCat, {CatShape, CatForward, CatVjp, SameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
