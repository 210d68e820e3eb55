// The oracle's rules for the ops that pick elements by position or by an
// integer input: slice (with a step) and select, embedding (rows of a
// table by id) and masked_fill.
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// ---------------------------------------------------------------------------
// slice

// slice: ints {axis, start, length[, step]}; select: {axis, index}, a
// slice of length 1 without its axis. Element j of the axis is x's start +
// j step.
struct Taken {
  int64_t axis, start, length, step;
};
Taken TakenBy(const Op& op, const std::vector<Shape>& in) {
  const bool select = op.kind == OpKind::kSelect;
  const size_t n = op.ints.size();
  if (select ? n != 2 : n != 3 && n != 4) {
    throw ShapeError(op, in, select ? "needs ints = {axis, index}" : "needs ints = {axis, start, length[, step]}");
  }
  const Taken t{op.ints[0], op.ints[1], select ? 1 : op.ints[2], n == 4 ? op.ints[3] : 1};
  if (t.axis < 0 || t.axis >= in[0].rank() || t.start < 0 || t.length < 0 || t.step < 1) {
    throw ShapeError(op, in, "takes elements outside x");
  }
  const int64_t size = in[0].dim(static_cast<int>(t.axis));
  const int64_t last = t.start + (t.length - 1) * t.step;  // the last element taken
  if (t.length == 0 ? t.start > size : last >= size) throw ShapeError(op, in, "takes elements outside x");
  return t;
}

Shape SliceShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  const Taken t = TakenBy(op, in);
  std::vector<int64_t> dims;
  for (int i = 0; i < in[0].rank(); ++i) {
    if (i != t.axis) dims.push_back(in[0].dim(i));
    if (i == t.axis && op.kind == OpKind::kSlice) dims.push_back(t.length);
  }
  return Shape(dims);
}

// Calls f(index in y, index in x) for every element y of slice or select
// `op` of x.
template <typename F>
void ForEachSliceElement(const Op& op, const Shape& s, int64_t out_elements, const F& f) {
  // y[p, j, q] = x[p, start + j step, q], p over the axes before, q after.
  const Taken t = TakenBy(op, {s});
  const int axis = static_cast<int>(t.axis);
  int64_t inner = 1;
  for (int i = axis + 1; i < s.rank(); ++i) inner *= s.dim(i);
  const int64_t size = s.dim(axis);
  for (int64_t o = 0; o < out_elements; ++o) {
    const int64_t q = o % inner, j = (o / inner) % t.length, p = o / inner / t.length;
    f(o, (p * size + t.start + j * t.step) * inner + q);
  }
}

void SliceForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                  int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  ForEachSliceElement(op, in[0]->shape(), out.num_elements(),
                      [&](int64_t o, int64_t from) { y[o] = x[from]; });
}

void SliceVjp(const VjpArgs& a) {
  // dx = dy where the slice took x's elements, 0 elsewhere.
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(a.in[0]->shape());
  ForEachSliceElement(a.op, a.in[0]->shape(), a.dy.num_elements(),
                      [&](int64_t o, int64_t from) { dx.f64()[from] = dy[o]; });
  a.Contribute(0, std::move(dx));
}

// ---------------------------------------------------------------------------
// embedding

Shape EmbeddingShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0].rank() != 2) throw ShapeError(op, in, "takes a (V, D) table");
  if (op.ints.size() > 1 || (op.ints.size() == 1 && (op.ints[0] < 0 || op.ints[0] >= in[0].dim(0)))) {
    throw ShapeError(op, in, "takes ints=[PADDING_IDX] with 0 <= PADDING_IDX < V, or no ints");
  }
  std::vector<int64_t> dims(in[1].dims().begin(), in[1].dims().end());
  dims.push_back(in[0].dim(1));
  return Shape(dims);
}

void EmbeddingForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                      int64_t*) {
  // y[p, :] = table[ids[p], :].
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t v = in[0]->shape().dim(0), d = in[0]->shape().dim(1);
  for (int64_t p = 0; p < in[1]->num_elements(); ++p) {
    const int64_t id = Index(op, *in[1], p, v);
    for (int64_t j = 0; j < d; ++j) y[p * d + j] = x[id * d + j];
  }
}

void EmbeddingVjp(const VjpArgs& a) {
  // Each position's row of dy goes to its id's row of the table, but the
  // padding_idx's row (op.ints[0], if given), whose gradient is zero.
  const Shape& xs = a.in[0]->shape();
  const double* dy = a.dy.f64();
  const Tensor& ids = *a.in[1];
  const int64_t v = xs.dim(0), d = xs.dim(1);
  Tensor dtable = a.NewGradient(xs);
  for (int64_t p = 0; p < ids.num_elements(); ++p) {
    const int64_t id = Index(a.op, ids, p, v);
    if (a.op.ints.size() == 1 && id == a.op.ints[0]) continue;
    for (int64_t j = 0; j < d; ++j) dtable.f64()[id * d + j] += dy[p * d + j];
  }
  *a.flops += ids.num_elements() * d;
  a.Contribute(0, std::move(dtable));
}

// ---------------------------------------------------------------------------
// masked_fill

Shape MaskedFillShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0] != in[1]) throw ShapeError(op, in, "takes a mask of x's shape");
  return in[0];
}

void MaskedFillForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                       int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  for (int64_t i = 0; i < in[0]->num_elements(); ++i) y[i] = in[1]->at(i) != 0 ? op.scalar : x[i];
}

void MaskedFillVjp(const VjpArgs& a) {
  // Filled elements do not depend on x.
  const Tensor& mask = *a.in[1];
  const double* dy = a.dy.f64();
  Tensor dx = a.NewGradient(a.in[0]->shape());
  for (int64_t i = 0; i < a.in[0]->num_elements(); ++i) dx.f64()[i] = mask.at(i) != 0 ? 0.0 : dy[i];
  a.Contribute(0, std::move(dx));
}

Tensor MaskedFillMagnitude(const MagnitudeArgs& a) {
  Tensor m = SameOpMagnitude(a);
  double* mo = m.f64();
  for (int64_t i = 0; i < a.in[0]->num_elements(); ++i) {
    if (a.in[1]->at(i) != 0) mo[i] = 0;  // the fill is a constant, exact
  }
  return m;
}

}  // namespace

const std::vector<OpEntry>& IndexingRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kSlice, {SliceShape, SliceForward, SliceVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kSelect, {SliceShape, SliceForward, SliceVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kEmbedding,
       {EmbeddingShape, EmbeddingForward, EmbeddingVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kMaskedFill,
       {MaskedFillShape, MaskedFillForward, MaskedFillVjp, MaskedFillMagnitude,
        LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
