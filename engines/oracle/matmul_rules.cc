// The oracle's rules for matmul and the layout changes around it in
// attention: transpose (the last two axes), split_heads and merge_heads.
#include <utility>
#include <vector>

#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// Element (b, i, j) of a tensor of `batch` matrices of `rows` x `cols`.
int64_t At(int64_t b, int64_t i, int64_t j, int64_t rows, int64_t cols) {
  return (b * rows + i) * cols + j;
}

// split_heads maps x (B*S, H*Dh) to (B*H, S, Dh): x[b*S + s, h*Dh + j] goes
// to out[b*H + h, s, j]. Calls f(index in x, index in out) for every element;
// merge_heads is the same map read the other way.
template <typename F>
void ForEachHeadElement(int64_t batch, int64_t heads, int64_t seq, int64_t head_width, F f) {
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t j = 0; j < head_width; ++j) {
          const int64_t flat = (b * seq + s) * (heads * head_width) + h * head_width + j;
          const int64_t split = ((b * heads + h) * seq + s) * head_width + j;
          f(flat, split);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// matmul

Shape MatMulShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  const int r = in[0].rank();
  if ((r != 2 && r != 3) || in[1].rank() != r) {
    throw ShapeError(op, in, "needs two rank-2 or two rank-3 operands");
  }
  if (r == 3 && in[0].dim(0) != in[1].dim(0)) throw ShapeError(op, in, "batch sizes differ");
  if (in[0].dim(r - 1) != in[1].dim(r - 2)) throw ShapeError(op, in, "contracting dimensions differ");
  if (r == 2) return Shape({in[0].dim(0), in[1].dim(1)});
  return Shape({in[0].dim(0), in[0].dim(1), in[1].dim(2)});
}

void MatMulForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                   int64_t* flops) {
  // C[b,i,j] = sum_p A[b,i,p] B[b,p,j].
  const double* x = in[0]->f64();
  double* y = out.f64();
  const Shape& a = in[0]->shape();
  const Shape& bs = in[1]->shape();
  const int r = a.rank() - 2;
  const int64_t batch = r == 1 ? a.dim(0) : 1, m = a.dim(r), k = a.dim(r + 1),
                cols_b = bs.dim(r + 1);
  const double* b = in[1]->f64();
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < cols_b; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += x[At(t, i, q, m, k)] * b[At(t, q, j, k, cols_b)];
        y[At(t, i, j, m, cols_b)] = acc;
      }
    }
  }
  *flops += 2 * batch * m * k * cols_b;
}

void MatMulVjp(const VjpArgs& a) {
  // C = A B, so dC . dC' = tr(dC^T (dA B + A dB)):
  //   dA[b,i,p] = sum_j dC[b,i,j] B[b,p,j]   (dC B^T)
  //   dB[b,p,j] = sum_i A[b,i,p] dC[b,i,j]   (A^T dC)
  const Shape& xs = a.in[0]->shape();
  const double* x = a.in[0]->f64();
  const double* dy = a.dy.f64();
  const Tensor& b_tensor = *a.in[1];
  const double* b = b_tensor.f64();
  const int r = xs.rank() - 2;
  const int64_t batch = r == 1 ? xs.dim(0) : 1, m = xs.dim(r), k = xs.dim(r + 1),
                cols_b = b_tensor.shape().dim(r + 1);
  Tensor da = a.NewGradient(xs);
  Tensor db = a.NewGradient(b_tensor.shape());
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = 0; q < k; ++q) {
        double acc = 0;
        for (int64_t j = 0; j < cols_b; ++j) {
          acc += dy[At(t, i, j, m, cols_b)] * b[At(t, q, j, k, cols_b)];
        }
        da.f64()[At(t, i, q, m, k)] = acc;
      }
    }
    for (int64_t q = 0; q < k; ++q) {
      for (int64_t j = 0; j < cols_b; ++j) {
        double acc = 0;
        for (int64_t i = 0; i < m; ++i) {
          acc += x[At(t, i, q, m, k)] * dy[At(t, i, j, m, cols_b)];
        }
        db.f64()[At(t, q, j, k, cols_b)] = acc;
      }
    }
  }
  *a.flops += 4 * batch * m * k * cols_b;
  a.Contribute(0, std::move(da));
  a.Contribute(1, std::move(db));
}

// ---------------------------------------------------------------------------
// transpose

Shape TransposeShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  const int r = in[0].rank();
  if (r != 2 && r != 3) {
    throw ShapeError(op, in, "swaps the last two axes of a rank-2 or rank-3 operand");
  }
  std::vector<int64_t> dims(in[0].dims().begin(), in[0].dims().end());
  std::swap(dims[r - 2], dims[r - 1]);
  return Shape(dims);
}

void TransposeForward(const Op&, const std::vector<const Tensor*>& in, const Tensor& out,
                      int64_t*) {
  // y[b,j,i] = x[b,i,j].
  const double* x = in[0]->f64();
  double* y = out.f64();
  const Shape& s = in[0]->shape();
  const int r = s.rank() - 2;
  const int64_t batch = r == 1 ? s.dim(0) : 1, m = s.dim(r), c = s.dim(r + 1);
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < c; ++j) y[At(t, j, i, c, m)] = x[At(t, i, j, m, c)];
    }
  }
}

void TransposeVjp(const VjpArgs& a) {
  // A permutation: each x element's adjoint is its image's, dx[b,i,j] = dy[b,j,i].
  const Shape& xs = a.in[0]->shape();
  const double* dy = a.dy.f64();
  const int r = xs.rank() - 2;
  const int64_t batch = r == 1 ? xs.dim(0) : 1, m = xs.dim(r), c = xs.dim(r + 1);
  Tensor dx = a.NewGradient(xs);
  for (int64_t t = 0; t < batch; ++t) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < c; ++j) dx.f64()[At(t, i, j, m, c)] = dy[At(t, j, i, c, m)];
    }
  }
  a.Contribute(0, std::move(dx));
}

// ---------------------------------------------------------------------------
// split_heads, merge_heads

Shape SplitHeadsShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.ints.size() != 2) throw ShapeError(op, in, "needs ints = {batch, heads}");
  const int64_t batch = op.ints[0], heads = op.ints[1];
  if (in[0].rank() != 2 || batch <= 0 || heads <= 0 || in[0].dim(0) % batch != 0 ||
      in[0].dim(1) % heads != 0) {
    throw ShapeError(op, in, StrCat("(batch*seq, D) with batch=", batch, " and heads=", heads,
                                    " dividing its axes"));
  }
  return Shape({batch * heads, in[0].dim(0) / batch, in[0].dim(1) / heads});
}

void SplitHeadsForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                       int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t batch = op.ints[0], heads = op.ints[1];
  const Shape& s = in[0]->shape();
  ForEachHeadElement(batch, heads, s.dim(0) / batch, s.dim(1) / heads,
                     [&](int64_t flat, int64_t split) { y[split] = x[flat]; });
}

void SplitHeadsVjp(const VjpArgs& a) {
  // A permutation: dx[flat] = dy[split] over the same index map.
  const Shape& xs = a.in[0]->shape();
  const double* dy = a.dy.f64();
  const int64_t batch = a.op.ints[0], heads = a.op.ints[1];
  Tensor dx = a.NewGradient(xs);
  ForEachHeadElement(batch, heads, xs.dim(0) / batch, xs.dim(1) / heads,
                     [&](int64_t flat, int64_t split) { dx.f64()[flat] = dy[split]; });
  a.Contribute(0, std::move(dx));
}

Shape MergeHeadsShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  if (op.ints.size() != 1) throw ShapeError(op, in, "needs ints = {batch}");
  const int64_t batch = op.ints[0];
  if (in[0].rank() != 3 || batch <= 0 || in[0].dim(0) % batch != 0) {
    throw ShapeError(op, in,
                     StrCat("(batch*heads, seq, Dh) with batch=", batch, " dividing its first axis"));
  }
  return Shape({batch * in[0].dim(1), in[0].dim(0) / batch * in[0].dim(2)});
}

void MergeHeadsForward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
                       int64_t*) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t batch = op.ints[0];
  const Shape& s = in[0]->shape();
  ForEachHeadElement(batch, s.dim(0) / batch, s.dim(1), s.dim(2),
                     [&](int64_t flat, int64_t split) { y[flat] = x[split]; });
}

void MergeHeadsVjp(const VjpArgs& a) {
  // The inverse permutation: dx[split] = dy[flat].
  const Shape& xs = a.in[0]->shape();
  const double* dy = a.dy.f64();
  const int64_t batch = a.op.ints[0];
  Tensor dx = a.NewGradient(xs);
  ForEachHeadElement(batch, xs.dim(0) / batch, xs.dim(1), xs.dim(2),
                     [&](int64_t flat, int64_t split) { dx.f64()[split] = dy[flat]; });
  a.Contribute(0, std::move(dx));
}

}  // namespace

const std::vector<OpEntry>& MatMulRules() {
  static const std::vector<OpEntry> rules = {
      {OpKind::kMatMul,
       {MatMulShape, MatMulForward, MatMulVjp, ProductMagnitude, ProductGradMagnitude}},
      {OpKind::kTranspose,
       {TransposeShape, TransposeForward, TransposeVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kSplitHeads,
       {SplitHeadsShape, SplitHeadsForward, SplitHeadsVjp, SameOpMagnitude, LinearGradMagnitude}},
      {OpKind::kMergeHeads,
       {MergeHeadsShape, MergeHeadsForward, MergeHeadsVjp, SameOpMagnitude, LinearGradMagnitude}},
  };
  return rules;
}

}  // namespace oracle
}  // namespace remat
