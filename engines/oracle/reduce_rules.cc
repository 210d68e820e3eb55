// The oracle's rules for the reductions over chosen axes: sum, mean and
// amax (engines/api/program.h: attr `ints` the axes, negative from the end,
// none for every axis; `scalar` 1 keeps them with size 1). amax's gradient
// goes to every element equal to the maximum, split evenly among them
// (PyTorch's amax; CONTRACT.md's tie rule).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// Whether axis d of the input is reduced.
std::vector<bool> ReducedAxes(const Op& op, const std::vector<Shape>& in) {
  const int rank = in[0].rank();
  std::vector<bool> reduced(static_cast<size_t>(rank), op.ints.empty());
  for (int64_t a : op.ints) {
    const int64_t d = a < 0 ? a + rank : a;
    if (d < 0 || d >= rank) throw ShapeError(op, in, StrCat("axis ", a, " is outside the rank ", rank));
    if (reduced[static_cast<size_t>(d)]) throw ShapeError(op, in, StrCat("axis ", a, " is given twice"));
    reduced[static_cast<size_t>(d)] = true;
  }
  return reduced;
}

Shape ReduceShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.scalar != 0 && op.scalar != 1) throw ShapeError(op, in, "keepdim is neither 0 nor 1");
  const std::vector<bool> reduced = ReducedAxes(op, in);
  std::vector<int64_t> dims;
  for (int d = 0; d < in[0].rank(); ++d) {
    if (reduced[static_cast<size_t>(d)] && op.kind == OpKind::kAmax && in[0].dim(d) == 0) {
      throw ShapeError(op, in, StrCat("amax over the empty axis ", d));
    }
    if (!reduced[static_cast<size_t>(d)]) {
      dims.push_back(in[0].dim(d));
    } else if (op.scalar == 1) {
      dims.push_back(1);
    }
  }
  return Shape(std::move(dims));
}

// The output element (flat index) that input element i reduces into.
int64_t Target(const std::vector<bool>& reduced, const Shape& x, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int d = x.rank() - 1; d >= 0; --d) {
    const int64_t coordinate = i % x.dim(d);
    i /= x.dim(d);
    if (reduced[static_cast<size_t>(d)]) continue;
    index += coordinate * stride;
    stride *= x.dim(d);
  }
  return index;
}

// The target of every input element, and how many reduce into each output.
struct Map {
  std::vector<int64_t> target;
  std::vector<int64_t> count;
};
Map MapOf(const Op& op, const Tensor& x, int64_t outputs) {
  Map m{std::vector<int64_t>(static_cast<size_t>(x.num_elements())),
        std::vector<int64_t>(static_cast<size_t>(outputs), 0)};
  const std::vector<bool> reduced = ReducedAxes(op, {x.shape()});
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    m.target[static_cast<size_t>(i)] = Target(reduced, x.shape(), i);
    ++m.count[static_cast<size_t>(m.target[static_cast<size_t>(i)])];
  }
  return m;
}

void SumForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  const Map m = MapOf(op, *in[0], out.num_elements());
  for (int64_t i = 0; i < in[0]->num_elements(); ++i) {
    out.f64()[m.target[static_cast<size_t>(i)]] += in[0]->f64()[i];
  }
  if (op.kind == OpKind::kMean) {
    for (int64_t o = 0; o < out.num_elements(); ++o) out.f64()[o] /= static_cast<double>(m.count[static_cast<size_t>(o)]);
  }
  *flops += in[0]->num_elements();
}

void AmaxForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                 int64_t* flops) {
  const Map m = MapOf(op, *in[0], out.num_elements());
  for (int64_t o = 0; o < out.num_elements(); ++o) out.f64()[o] = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < in[0]->num_elements(); ++i) {
    double& y = out.f64()[m.target[static_cast<size_t>(i)]];
    const double v = in[0]->f64()[i];
    if (std::isnan(v) || std::isnan(y)) {
      y = std::numeric_limits<double>::quiet_NaN();  // a NaN propagates
    } else if (v > y) {
      y = v;
    }
  }
  *flops += in[0]->num_elements();
}

void SumVjp(const VjpArgs& a) {
  // y_o = sum of x_i over the i reducing into o: dx_i = dy_o; a mean's
  // terms are divided by their count.
  const Tensor& x = *a.in[0];
  const Map m = MapOf(a.op, x, a.dy.num_elements());
  Tensor dx = a.NewGradient(x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const int64_t o = m.target[static_cast<size_t>(i)];
    dx.f64()[i] = a.op.kind == OpKind::kMean
                      ? a.dy.f64()[o] / static_cast<double>(m.count[static_cast<size_t>(o)])
                      : a.dy.f64()[o];
  }
  a.Contribute(0, std::move(dx));
}

void AmaxVjp(const VjpArgs& a) {
  // The tie rule: y_o = max x_i; every i with x_i == y_o gets dy_o / t_o,
  // t_o the number of them, and every other i nothing.
  const Tensor& x = *a.in[0];
  const int64_t outputs = a.dy.num_elements();
  Tensor y = Tensor::Zeros(DType::kF64, a.dy.shape(), a.tracker, Category::kGradients);
  int64_t uncounted = 0;
  AmaxForward(a.op, {&x}, y, &uncounted);
  const Map m = MapOf(a.op, x, outputs);
  std::vector<int64_t> ties(static_cast<size_t>(outputs), 0);
  auto tie = [&](int64_t i) {
    const double v = x.f64()[i], top = y.f64()[m.target[static_cast<size_t>(i)]];
    return v == top || (std::isnan(v) && std::isnan(top));
  };
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    if (tie(i)) ++ties[static_cast<size_t>(m.target[static_cast<size_t>(i)])];
  }
  Tensor dx = a.NewGradient(x.shape());
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const int64_t o = m.target[static_cast<size_t>(i)];
    if (tie(i)) dx.f64()[i] = a.dy.f64()[o] / static_cast<double>(ties[static_cast<size_t>(o)]);
  }
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& ReduceRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kSum, {ReduceShape, SumForward, SumVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kMean, {ReduceShape, SumForward, SumVjp, MeanMagnitude, LinearGradMagnitude}},
      {OpKind::kAmax, {ReduceShape, AmaxForward, AmaxVjp, SameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
