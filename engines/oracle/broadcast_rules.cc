// The oracle's rules for the broadcasting ops: add, sub, mul, div and
// where, numpy's broadcasting written out here on its own terms (an output
// element's multi-index, each operand's axis taken modulo its size), with no
// code shared with the engines' kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// The broadcast shape of `in`, or a ShapeError naming the axis.
Shape BroadcastShape(const Op& op, const std::vector<Shape>& in) {
  int rank = 0;
  for (const Shape& s : in) rank = std::max(rank, s.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank), 1);
  for (const Shape& s : in) {
    for (int j = 0; j < s.rank(); ++j) {
      int64_t& d = dims[static_cast<size_t>(rank - s.rank() + j)];
      const int64_t e = s.dim(j);
      if (e == d || e == 1) continue;
      if (d != 1) {
        throw ShapeError(op, in, StrCat("the operands do not broadcast on axis ", j - s.rank(),
                                        ": sizes ", d, " and ", e));
      }
      d = e;
    }
  }
  return Shape(std::move(dims));
}

Shape BinaryShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  return BroadcastShape(op, in);
}

Shape WhereShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 3);
  return BroadcastShape(op, in);
}

// The flat index in an operand of shape `s` of the output element `i` of
// shape `out` (s broadcast to out).
int64_t SourceIndex(const Shape& out, const Shape& s, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    const int64_t coordinate = i % out.dim(d);
    i /= out.dim(d);
    const int j = d - (out.rank() - s.rank());
    if (j < 0) continue;
    index += (coordinate % s.dim(j)) * stride;
    stride *= s.dim(j);
  }
  return index;
}

template <typename F>
void BinaryForward(const std::vector<const Tensor*>& in, const Tensor& out, int64_t* flops,
                   const F& f) {
  const Tensor& a = *in[0];
  const Tensor& b = *in[1];
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    out.f64()[i] = f(a.f64()[SourceIndex(out.shape(), a.shape(), i)],
                     b.f64()[SourceIndex(out.shape(), b.shape(), i)]);
  }
  *flops += out.num_elements();
}

void AddForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a + b; });
}

void SubForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a - b; });
}

void MulForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a * b; });
}

void DivForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                int64_t* flops) {
  BinaryForward(in, out, flops, [](double a, double b) { return a / b; });
}

void WhereForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                  int64_t*) {
  const Shape& s = out.shape();
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    const bool pick_a = in[0]->at(SourceIndex(s, in[0]->shape(), i)) != 0;
    const Tensor& t = pick_a ? *in[1] : *in[2];
    out.f64()[i] = t.f64()[SourceIndex(s, t.shape(), i)];
  }
}

// The vector-Jacobian product of y = f(a, b), broadcast: every output
// element i adds da_of(a, b, dy_i) to the element of a it read, and
// db_of(...) to b's (a broadcast operand sums the output elements it
// reached).
template <typename F, typename G>
void BinaryVjp(const VjpArgs& args, int64_t flops_per_element, const F& da_of, const G& db_of) {
  const Tensor& a = *args.in[0];
  const Tensor& b = *args.in[1];
  const Shape& s = args.dy.shape();
  Tensor da = args.NewGradient(a.shape());
  Tensor db = args.NewGradient(b.shape());
  for (int64_t i = 0; i < args.dy.num_elements(); ++i) {
    const int64_t ia = SourceIndex(s, a.shape(), i), ib = SourceIndex(s, b.shape(), i);
    const double x = a.f64()[ia], y = b.f64()[ib], g = args.dy.f64()[i];
    da.f64()[ia] += da_of(x, y, g);
    db.f64()[ib] += db_of(x, y, g);
  }
  *args.flops += flops_per_element * args.dy.num_elements();
  args.Contribute(0, std::move(da));
  args.Contribute(1, std::move(db));
}

void AddVjp(const VjpArgs& a) {
  // y = a + b: da = dy, db = dy, each summed where broadcast.
  BinaryVjp(
      a, 0, [](double, double, double g) { return g; }, [](double, double, double g) { return g; });
}

void SubVjp(const VjpArgs& a) {
  // y = a - b: da = dy, db = -dy.
  BinaryVjp(
      a, 1, [](double, double, double g) { return g; }, [](double, double, double g) { return -g; });
}

void MulVjp(const VjpArgs& a) {
  // y = a b: da = dy b, db = dy a.
  BinaryVjp(
      a, 2, [](double, double y, double g) { return g * y; },
      [](double x, double, double g) { return g * x; });
}

void DivVjp(const VjpArgs& a) {
  // y = a / b: dy/da = 1 / b, dy/db = -a / b^2.
  BinaryVjp(
      a, 3, [](double, double y, double g) { return g / y; },
      [](double x, double y, double g) { return -g * x / (y * y); });
}

void WhereVjp(const VjpArgs& args) {
  // y = a where cond, else b: dy reaches the side it was read from; the
  // condition is an integer input and gets nothing.
  const Tensor& cond = *args.in[0];
  const Tensor& a = *args.in[1];
  const Tensor& b = *args.in[2];
  const Shape& s = args.dy.shape();
  Tensor da = args.NewGradient(a.shape());
  Tensor db = args.NewGradient(b.shape());
  for (int64_t i = 0; i < args.dy.num_elements(); ++i) {
    if (cond.at(SourceIndex(s, cond.shape(), i)) != 0) {
      da.f64()[SourceIndex(s, a.shape(), i)] += args.dy.f64()[i];
    } else {
      db.f64()[SourceIndex(s, b.shape(), i)] += args.dy.f64()[i];
    }
  }
  args.Contribute(1, std::move(da));
  args.Contribute(2, std::move(db));
}

// y = a / b: a quotient's own rounding (|y|) and its inputs' errors carried
// through its partial derivatives, in quadrature as a product's are:
// sqrt((M(a) / |b|)^2 + (|y| M(b) / |b|)^2).
Tensor DivMagnitude(const MagnitudeArgs& a) {
  Tensor m = a.NewMagnitude();
  const Shape& s = a.out.shape();
  for (int64_t i = 0; i < m.num_elements(); ++i) {
    const double ma = a.mags[0]->f64()[SourceIndex(s, a.in[0]->shape(), i)];
    const int64_t ib = SourceIndex(s, a.in[1]->shape(), i);
    const double b = std::abs(a.in[1]->f64()[ib]), mb = a.mags[1]->f64()[ib];
    const double y = std::abs(a.out.f64()[i]);
    m.f64()[i] = y + std::sqrt((ma / b) * (ma / b) + (y * mb / b) * (y * mb / b));
  }
  return m;
}

}  // namespace

const std::vector<OpEntry>& BroadcastRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kAdd, {BinaryShape, AddForward, AddVjp, SumMagnitude, LinearGradMagnitude}},
      {OpKind::kSub, {BinaryShape, SubForward, SubVjp, SubMagnitude, LinearGradMagnitude}},
      {OpKind::kMul, {BinaryShape, MulForward, MulVjp, ProductMagnitude, ProductGradMagnitude}},
      {OpKind::kDiv, {BinaryShape, DivForward, DivVjp, DivMagnitude, LinearGradMagnitude}},
      {OpKind::kWhere, {WhereShape, WhereForward, WhereVjp, SameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
