#include "engines/oracle/oracle.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/kernels.h"  // Kernels::kLayerNormEps: the op's definition, no arithmetic
#include "engines/api/memory_tracker.h"
#include "engines/api/philox.h"  // the contract's generator (CONTRACT.md, randomness)

namespace remat {
namespace {

// Dropout keeps element i of op `op` when its bits under the seed (a
// scalar, held as f64 here: every i32 is exact) clear the threshold of p.
// Integer input element i as an index below `bound`, or an error naming the
// op, the position and the value.
int64_t Index(const Op& op, const Tensor& ids, int64_t i, int64_t bound) {
  const double v = ids.at(i);
  if (!(v >= 0 && v < static_cast<double>(bound))) {
    throw Error(StrCat(Program::Describe(op), ": index ", v, " at position ", i,
                       " is outside [0, ", bound, ")"));
  }
  return static_cast<int64_t>(v);
}

bool Kept(const Op& op, const Tensor& seed, int64_t i) {
  const int64_t key = op.ints.empty() ? 0 : op.ints[0];
  return RandomBits(static_cast<int32_t>(seed.at(0)), key, i) >= DropThreshold(op.scalar);
}

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---------------------------------------------------------------------------
// Shapes. Written here rather than taken from Kernels' helpers so that the
// oracle's reading of each op is its own; a program whose recorded shapes
// disagree with it is refused.

// The output shape of primitive `op` on inputs of `in` shapes, or
// remat::Error naming the op and the shapes.
Shape PrimitiveShape(const Op& op, const std::vector<Shape>& in) {
  auto fail = [&](const std::string& why) -> Error {
    std::string shapes;
    for (const Shape& s : in) shapes += (shapes.empty() ? "" : ", ") + s.ToString();
    return Error(StrCat("oracle: ", Program::Describe(op), ": ", why, " (operands ", shapes, ")"));
  };
  auto want_inputs = [&](size_t n) {
    if (in.size() != n) throw fail(StrCat("takes ", n, " operands, got ", in.size()));
  };
  switch (op.kind) {
    case OpKind::kMatMul: {
      want_inputs(2);
      const int r = in[0].rank();
      if ((r != 2 && r != 3) || in[1].rank() != r) {
        throw fail("needs two rank-2 or two rank-3 operands");
      }
      if (r == 3 && in[0].dim(0) != in[1].dim(0)) throw fail("batch sizes differ");
      if (in[0].dim(r - 1) != in[1].dim(r - 2)) throw fail("contracting dimensions differ");
      if (r == 2) return Shape({in[0].dim(0), in[1].dim(1)});
      return Shape({in[0].dim(0), in[0].dim(1), in[1].dim(2)});
    }
    case OpKind::kRelu:
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kSquare:
    case OpKind::kName:
    case OpKind::kGelu:
    case OpKind::kScale:
    case OpKind::kNeg:
    case OpKind::kExp:
    case OpKind::kLog:
      want_inputs(1);
      return in[0];
    case OpKind::kAdd:
    case OpKind::kMul:
    case OpKind::kSub:
      want_inputs(2);
      if (in[0] != in[1]) throw fail("operand shapes differ");
      return in[0];
    case OpKind::kSum:
      want_inputs(1);
      return Shape();
    case OpKind::kDropout:
      want_inputs(2);
      if (in[1].rank() != 0) throw fail("takes a scalar seed");
      return in[0];
    case OpKind::kEmbedding: {
      want_inputs(2);
      if (in[0].rank() != 2) throw fail("takes a (V, D) table");
      std::vector<int64_t> dims(in[1].dims().begin(), in[1].dims().end());
      dims.push_back(in[0].dim(1));
      return Shape(dims);
    }
    case OpKind::kMaskedFill:
      want_inputs(2);
      if (in[0] != in[1]) throw fail("takes a mask of x's shape");
      return in[0];
    case OpKind::kCrossEntropy:
      want_inputs(2);
      if (in[0].rank() != 2 || in[1] != Shape({in[0].dim(0)})) {
        throw fail("takes logits (N, C) and targets (N)");
      }
      return Shape();
    case OpKind::kSilu:
    case OpKind::kGeluErf:
      want_inputs(1);
      return in[0];
    case OpKind::kLogSoftmax:
      want_inputs(1);
      if (in[0].rank() == 0) throw fail("works over the last axis of a rank >= 1 operand");
      return in[0];
    case OpKind::kRmsNorm:
      want_inputs(2);
      if (in[0].rank() == 0 || in[1] != Shape({in[0].dim(in[0].rank() - 1)})) {
        throw fail("takes x of rank >= 1 and gamma (C), C the last axis");
      }
      if (!(op.scalar > 0) || !std::isfinite(op.scalar)) throw fail("needs eps > 0");
      return in[0];
    case OpKind::kSoftmax:
      want_inputs(1);
      if (in[0].rank() == 0) throw fail("works over the last axis of a rank >= 1 operand");
      return in[0];
    case OpKind::kLayerNorm: {
      want_inputs(3);
      if (in[0].rank() == 0) throw fail("works over the last axis of a rank >= 1 operand");
      const Shape c({in[0].dim(in[0].rank() - 1)});
      if (in[1] != c || in[2] != c) throw fail("gamma and beta must be (C), C the last axis");
      return in[0];
    }
    case OpKind::kTranspose: {
      want_inputs(1);
      const int r = in[0].rank();
      if (r != 2 && r != 3) throw fail("swaps the last two axes of a rank-2 or rank-3 operand");
      std::vector<int64_t> dims(in[0].dims().begin(), in[0].dims().end());
      std::swap(dims[r - 2], dims[r - 1]);
      return Shape(dims);
    }
    case OpKind::kSplitHeads: {
      want_inputs(1);
      if (op.ints.size() != 2) throw fail("needs ints = {batch, heads}");
      const int64_t batch = op.ints[0], heads = op.ints[1];
      if (in[0].rank() != 2 || batch <= 0 || heads <= 0 || in[0].dim(0) % batch != 0 ||
          in[0].dim(1) % heads != 0) {
        throw fail(StrCat("(batch*seq, D) with batch=", batch, " and heads=", heads,
                          " dividing its axes"));
      }
      return Shape({batch * heads, in[0].dim(0) / batch, in[0].dim(1) / heads});
    }
    case OpKind::kMergeHeads: {
      want_inputs(1);
      if (op.ints.size() != 1) throw fail("needs ints = {batch}");
      const int64_t batch = op.ints[0];
      if (in[0].rank() != 3 || batch <= 0 || in[0].dim(0) % batch != 0) {
        throw fail(StrCat("(batch*heads, seq, Dh) with batch=", batch, " dividing its first axis"));
      }
      return Shape({batch * in[0].dim(1), in[0].dim(0) / batch * in[0].dim(2)});
    }
    case OpKind::kBiasAdd: {
      want_inputs(2);
      if (in[0].rank() == 0) throw fail("adds the bias to the rows of a rank >= 1 operand");
      if (in[1] != Shape({in[0].dim(in[0].rank() - 1)})) {
        throw fail("the bias must be (C), C the last axis of x");
      }
      return in[0];
    }
    case OpKind::kReshape: {
      want_inputs(1);
      int64_t count = 1;
      for (int64_t d : op.ints) {
        if (d < 0) throw fail("reshape's dims must be >= 0");
        count *= d;
      }
      if (count != in[0].num_elements()) throw fail("reshape keeps the element count");
      return Shape(op.ints);
    }
    case OpKind::kPermute: {
      want_inputs(1);
      const std::vector<int64_t> sorted = [&] {
        std::vector<int64_t> s = op.ints;
        std::sort(s.begin(), s.end());
        return s;
      }();
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i] != static_cast<int64_t>(i)) throw fail("ints must be a permutation of the axes");
      }
      if (static_cast<int>(op.ints.size()) != in[0].rank()) throw fail("ints must name every axis once");
      std::vector<int64_t> dims;
      for (int64_t p : op.ints) dims.push_back(in[0].dim(static_cast<int>(p)));
      return Shape(dims);
    }
    case OpKind::kTopKSoftmax:
      want_inputs(1);
      if (in[0].rank() == 0 || op.ints.size() != 1 || op.ints[0] < 1 ||
          op.ints[0] > in[0].dim(in[0].rank() - 1)) {
        throw fail("needs ints = {k}, 1 <= k <= the last axis");
      }
      return in[0];
    case OpKind::kConv2d: {
      want_inputs(2);
      if (op.ints.size() != 2) throw fail("needs ints = {stride, padding}");
      const int64_t stride = op.ints[0], pad = op.ints[1];
      if (in[0].rank() != 4 || in[1].rank() != 4 || in[0].dim(1) != in[1].dim(1)) {
        throw fail("takes x (N, C, H, W) and w (O, C, KH, KW)");
      }
      if (stride < 1 || pad < 0 || in[0].dim(2) + 2 * pad < in[1].dim(2) ||
          in[0].dim(3) + 2 * pad < in[1].dim(3)) {
        throw fail("needs stride >= 1, padding >= 0 and a kernel within the padded image");
      }
      return Shape({in[0].dim(0), in[1].dim(0), (in[0].dim(2) + 2 * pad - in[1].dim(2)) / stride + 1,
                    (in[0].dim(3) + 2 * pad - in[1].dim(3)) / stride + 1});
    }
    case OpKind::kMaxPool2d: {
      want_inputs(1);
      if (op.ints.size() != 3) throw fail("needs ints = {kernel, stride, padding}");
      const int64_t k = op.ints[0], stride = op.ints[1], pad = op.ints[2];
      if (in[0].rank() != 4 || k < 1 || stride < 1 || pad < 0 || 2 * pad > k ||
          in[0].dim(2) + 2 * pad < k || in[0].dim(3) + 2 * pad < k) {
        throw fail("takes x (N, C, H, W), a kernel within the padded image, stride >= 1, 0 <= padding <= k/2");
      }
      return Shape({in[0].dim(0), in[0].dim(1), (in[0].dim(2) + 2 * pad - k) / stride + 1,
                    (in[0].dim(3) + 2 * pad - k) / stride + 1});
    }
    case OpKind::kGlobalAvgPool:
      want_inputs(1);
      if (in[0].rank() != 4) throw fail("takes x (N, C, H, W)");
      return Shape({in[0].dim(0), in[0].dim(1)});
    case OpKind::kBatchNorm:
      want_inputs(3);
      if ((in[0].rank() != 2 && in[0].rank() != 4) || in[1] != Shape({in[0].dim(1)}) || in[2] != in[1]) {
        throw fail("takes x (N, C) or (N, C, H, W), gamma and beta (C)");
      }
      if (!(op.scalar > 0)) throw fail("needs eps > 0");
      return in[0];
    case OpKind::kBatchNormRunningMean:
    case OpKind::kBatchNormRunningVar:
      want_inputs(2);
      if ((in[0].rank() != 2 && in[0].rank() != 4) || in[1] != Shape({in[0].dim(1)})) {
        throw fail("takes x (N, C) or (N, C, H, W) and a running statistic (C)");
      }
      if (in[0].num_elements() / std::max<int64_t>(1, in[0].dim(1)) < 2) {
        throw fail("needs at least 2 values a channel");
      }
      if (!(op.scalar >= 0 && op.scalar <= 1)) throw fail("needs a momentum in [0, 1]");
      return in[1];
    case OpKind::kState:
      want_inputs(1);
      if (op.name.empty()) throw fail("needs the name of the parameter it updates");
      return in[0];
    case OpKind::kSlice: {
      want_inputs(1);
      if (op.ints.size() != 3) throw fail("needs ints = {axis, start, length}");
      const int64_t axis = op.ints[0], start = op.ints[1], length = op.ints[2];
      if (axis < 0 || axis >= in[0].rank() || start < 0 || length < 0 ||
          start + length > in[0].dim(static_cast<int>(axis))) {
        throw fail("slices outside x");
      }
      std::vector<int64_t> dims;
      for (int i = 0; i < in[0].rank(); ++i) dims.push_back(i == axis ? length : in[0].dim(i));
      return Shape(dims);
    }
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      break;  // structural: not a primitive
  }
  throw Error(StrCat("oracle: no rule for op kind ", static_cast<int>(op.kind), " (",
                     Program::Describe(op), ")"));
}

// ---------------------------------------------------------------------------
// Index maps of the ops that move elements.

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

// conv2d's geometry: x (N, C, H, W), w (O, C, KH, KW), y (N, O, OH, OW).
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, stride, pad;
  ConvGeometry(const Shape& x, const Shape& wt, const Shape& y, const std::vector<int64_t>& ints)
      : n(x.dim(0)), c(x.dim(1)), h(x.dim(2)), w(x.dim(3)), o(wt.dim(0)), kh(wt.dim(2)),
        kw(wt.dim(3)), oh(y.dim(2)), ow(y.dim(3)), stride(ints[0]), pad(ints[1]) {}
  int64_t X(int64_t b, int64_t ch, int64_t r, int64_t s) const { return ((b * c + ch) * h + r) * w + s; }
  int64_t W(int64_t oc, int64_t ch, int64_t p, int64_t q) const { return ((oc * c + ch) * kh + p) * kw + q; }
  int64_t Y(int64_t b, int64_t oc, int64_t i, int64_t j) const { return ((b * o + oc) * oh + i) * ow + j; }
};

// max_pool2d's choice for output (b, ch, i, j) of x (N, C, H, W): the
// window's valid pixel first in "greater first, NaN above every number,
// equal values by lower index", as a flat index into x.
int64_t PoolChoice(const Tensor& x, const std::vector<int64_t>& ints, int64_t plane, int64_t i,
                   int64_t j) {
  const int64_t k = ints[0], stride = ints[1], pad = ints[2];
  const int64_t h = x.shape().dim(2), w = x.shape().dim(3);
  std::vector<int64_t> taps;
  for (int64_t r = i * stride - pad; r < i * stride - pad + k; ++r) {
    for (int64_t s = j * stride - pad; s < j * stride - pad + k; ++s) {
      if (r >= 0 && r < h && s >= 0 && s < w) taps.push_back((plane * h + r) * w + s);
    }
  }
  const double* v = x.f64();
  return *std::min_element(taps.begin(), taps.end(), [v](int64_t a, int64_t b) {
    const bool na = std::isnan(v[a]), nb = std::isnan(v[b]);
    if (na != nb) return na;
    if (!na && v[a] != v[b]) return v[a] > v[b];
    return a < b;
  });
}

// batch_norm's per-channel statistics in f64: mean and 1 / sqrt(var + eps)
// over the channel's N H W elements.
void ChannelMoments(const double* x, const Shape& s, int64_t ch, double eps, double* mean,
                    double* rstd) {
  const int64_t n = s.dim(0), c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
  double sum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) sum += x[(b * c + ch) * hw + i];
  *mean = sum / static_cast<double>(n * hw);
  double var = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < hw; ++i) var += std::pow(x[(b * c + ch) * hw + i] - *mean, 2);
  *rstd = 1.0 / std::sqrt(var / static_cast<double>(n * hw) + eps);
}

// top_k_softmax's choice in a row: the k positions first in the order
// "greater first, NaN above every number, equal values by lower index".
std::vector<bool> TopKChoice(const double* xr, int64_t cols, int64_t k) {
  std::vector<int64_t> order(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(), [xr](int64_t a, int64_t b) {
    const bool na = std::isnan(xr[a]), nb = std::isnan(xr[b]);
    if (na != nb) return na;
    return !na && xr[a] > xr[b];
  });
  std::vector<bool> chosen(static_cast<size_t>(cols), false);
  for (int64_t t = 0; t < k; ++t) chosen[order[t]] = true;
  return chosen;
}

// top_k_softmax's row from x: softmax over the chosen, 0 elsewhere.
// log(sum_j e^(x_j)) of a row, with its max subtracted before the
// exponentials (log_softmax's and cross-entropy's normalizer).
double RowLogSumExp(const double* xr, int64_t cols) {
  double m = xr[0];
  for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
  double s = 0;
  for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
  return m + std::log(s);
}

void TopKSoftmaxRow(const double* xr, int64_t cols, int64_t k, double* yr) {
  const std::vector<bool> chosen = TopKChoice(xr, cols, k);
  double m = -std::numeric_limits<double>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < cols; ++j) {
    if (!chosen[j]) continue;
    nan = nan || std::isnan(xr[j]);
    m = std::max(m, xr[j]);
  }
  if (nan) m = std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (int64_t j = 0; j < cols; ++j) s += chosen[j] ? std::exp(xr[j] - m) : 0.0;
  for (int64_t j = 0; j < cols; ++j) yr[j] = chosen[j] ? std::exp(xr[j] - m) / s : 0.0;
}

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

// The groups a norm normalizes together, as flat indices into x: rows of
// the last axis (layer_norm, rms_norm; gamma by column), or each channel's
// N H W (batch_norm; gamma by channel).
std::vector<std::vector<int64_t>> NormGroups(const Op& op, const Shape& s) {
  std::vector<std::vector<int64_t>> groups;
  if (op.kind == OpKind::kBatchNorm) {
    const int64_t c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
    for (int64_t ch = 0; ch < c; ++ch) {
      std::vector<int64_t>& at = groups.emplace_back();
      for (int64_t b = 0; b < s.dim(0); ++b)
        for (int64_t i = 0; i < hw; ++i) at.push_back((b * c + ch) * hw + i);
    }
    return groups;
  }
  const int64_t cols = s.rank() > 0 ? s.dim(s.rank() - 1) : 1;
  for (int64_t r = 0; cols > 0 && r < s.num_elements() / cols; ++r) {
    std::vector<int64_t>& at = groups.emplace_back();
    for (int64_t j = 0; j < cols; ++j) at.push_back(r * cols + j);
  }
  return groups;
}

// The constants of gelu's tanh form: sqrt(2/pi) and 0.044715.
const double kGeluC = std::sqrt(2.0 / std::numbers::pi);
constexpr double kGeluA = 0.044715;

// One primitive application on the list.
struct Entry {
  const Op* op = nullptr;  // the program op; for a scan step's slice, the scan op
  bool slice = false;      // step `step` of the scan's input `scan_input` (a view)
  int64_t step = 0;
  int scan_input = 0;
  std::vector<int> inputs;  // slots
  int output = -1;          // slot
};

// Counts a caller's f64 argument as live input bytes for the run without
// owning it (the contract's "counted, not owned").
class CountedArgument {
 public:
  CountedArgument(std::shared_ptr<MemoryTracker> tracker, int64_t bytes)
      : tracker_(std::move(tracker)), bytes_(bytes) {
    tracker_->Allocate(bytes_, Category::kInputs);
  }
  ~CountedArgument() { tracker_->Release(bytes_, Category::kInputs); }
  CountedArgument(const CountedArgument&) = delete;
  CountedArgument& operator=(const CountedArgument&) = delete;

 private:
  std::shared_ptr<MemoryTracker> tracker_;
  int64_t bytes_;
};

class PlainReverseMode {
 public:
  explicit PlainReverseMode(const OracleOptions& options)
      : options_(options), tracker_(std::make_shared<MemoryTracker>()) {
    tracker_->set_limit_bytes(options.max_memory_bytes);
    if (options.on_tracker) options.on_tracker(tracker_);
  }

  Result Run(const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt);

  // With magnitudes on, every slot gets a magnitude beside its value
  // (OracleRoundingMagnitudes): call before Run; Run then fills `out`.
  void TrackMagnitudes(OracleMagnitudes* out) { magnitudes_out_ = out; }

 private:
  // The forward pass: appends `p`'s primitives to the list with `params` the
  // slots of its parameters; returns the slot of its output.
  int Evaluate(const Program& p, const std::vector<int>& params);
  int Primitive(const Program& p, const Op& op, const std::vector<int>& inputs);
  int Scan(const Op& op, const std::vector<int>& inputs);
  void Compute(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out);
  int NewSlot(Tensor t) {
    slots_.push_back(std::move(t));
    integer_.push_back(false);
    return static_cast<int>(slots_.size()) - 1;
  }
  // The magnitude of a primitive's output (OracleRoundingMagnitudes), from
  // its inputs' values and magnitudes.
  Tensor Magnitude(const Op& op, const std::vector<int>& inputs, const Tensor& out);
  bool tracking() const { return magnitudes_out_ != nullptr; }

  // The backward pass: adds entry e's vector-Jacobian products, for the
  // adjoint dy of its output, to its inputs' adjoints.
  void Vjp(const Entry& e, const Tensor& dy);
  void Contribute(const Entry& e, int input, Tensor contribution);

  // The gradients' magnitudes (OracleRoundingMagnitudes): adds entry e's
  // contributions to its inputs' adjoint magnitudes, for its output's
  // adjoint dy and that adjoint's magnitude mdy.
  void MagnitudeVjp(const Entry& e, const Tensor& dy, const Tensor& mdy);
  // Vjp's contributions for adjoint `dy` with each non-integer input's value
  // v (magnitude m) replaced by substitute(v, m), one per input (undefined
  // where Vjp gives none); nothing is added to any adjoint or counted.
  std::vector<Tensor> VjpWith(const Entry& e,
                              const std::function<Tensor(const Tensor&, const Tensor&)>& substitute,
                              const Tensor& dy);
  Tensor NewGradient(const Shape& shape) const {
    return Tensor::Zeros(DType::kF64, shape, tracker_, Category::kGradients);
  }

  void Record(const char* phase, const Entry& e);
  std::vector<Residual> Residuals(const Program& program, int64_t* bytes) const;

  const OracleOptions& options_;
  std::shared_ptr<MemoryTracker> tracker_;
  std::vector<Tensor> slots_;
  // By slot: an i32 argument's values (or a view of one), which no
  // magnitude replaces (VjpWith): they are indices, masks, seeds.
  std::vector<bool> integer_;
  // By slot, with TrackMagnitudes: each value's rounding magnitude.
  std::vector<Tensor> mags_;
  OracleMagnitudes* magnitudes_out_ = nullptr;
  std::vector<Entry> list_;
  std::map<int, Tensor> adjoints_;  // by slot
  // With TrackMagnitudes and a gradient asked for: each adjoint's magnitude.
  std::map<int, Tensor> adjoint_magnitudes_;  // by slot
  // Set inside VjpWith: Contribute hands each contribution here instead.
  std::vector<Tensor>* captured_ = nullptr;
  int64_t flops_forward_ = 0;
  int64_t flops_backward_ = 0;
  std::map<std::string, int64_t> op_runs_;
  std::vector<std::string>* schedule_ = nullptr;
};

Result PlainReverseMode::Run(const Program& program, const std::vector<Tensor>& args,
                             const std::vector<int>& wrt) {
  ValidateArguments(program, args, wrt);
  for (int i = 0; i < program.num_params(); ++i) {
    if (args[i].dry()) {
      throw Error(StrCat("oracle: program ", program.name, ": argument ", program.param_names[i],
                         " has shape but no data; the oracle runs, it does not plan"));
    }
  }
  if (program.output < 0 || program.output >= program.num_values() ||
      program.shapes[program.output].rank() != 0) {
    throw Error(StrCat("oracle: program ", program.name,
                       " must return a rank-0 value (value_and_grad differentiates a scalar)"));
  }
  Result result;
  result.tracker = tracker_;
  schedule_ = options_.record_schedule ? &result.schedule : nullptr;

  // Arguments: f64 ones in place, counted; f32 ones converted (exactly).
  int64_t counted_bytes = 0;
  {
    ScopedSite site(tracker_.get(), Category::kInputs, "arguments");
    for (int i = 0; i < program.num_params(); ++i) {
      if (args[i].dtype() == DType::kF64) {
        NewSlot(args[i]);
        counted_bytes += args[i].bytes();
      } else {
        NewSlot(Cast(args[i], DType::kF64, tracker_));
      }
      integer_.back() = program.dtype(i) == DType::kI32;
      if (tracking()) {
        // An argument is exact: no error to carry, magnitude 0. An
        // integer's (ids, targets, a seed, a mask) is its value, so that the
        // rules that read it as an index read the same index.
        mags_.push_back(program.dtype(i) == DType::kI32
                            ? Copy(slots_.back(), tracker_)
                            : Tensor::Zeros(DType::kF64, slots_.back().shape(), tracker_));
      }
    }
  }
  CountedArgument counted(tracker_, counted_bytes);
  std::vector<int> params(program.num_params());
  for (int i = 0; i < program.num_params(); ++i) params[i] = i;

  const Clock::time_point forward_start = Clock::now();
  const int output = Evaluate(program, params);
  {
    ScopedSite site(tracker_.get(), Category::kActivations, "value");
    result.value = Copy(slots_[output], tracker_);
  }
  // The new state: each state op's value, as the forward pass computed it.
  for (const Entry& e : list_) {
    if (e.op->kind != OpKind::kState || e.slice) continue;
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(*e.op));
    result.state[e.op->name] = Copy(slots_[e.output], tracker_);
  }
  result.stats.seconds_forward = SecondsSince(forward_start);
  result.stats.residuals = Residuals(program, &result.stats.residual_bytes);
  if (tracking()) {
    magnitudes_out_->value = mags_[output];
    for (const Entry& e : list_) {
      if (e.op->kind == OpKind::kState && !e.slice) magnitudes_out_->state[e.op->name] = mags_[e.output];
    }
  }

  // The backward pass: d value / d value = 1, then every entry from the last
  // to the first. An entry's output adjoint is complete when it is reached:
  // every reader of its output comes later in the list. With no gradient
  // asked for (a loss evaluated for central differences) there is none.
  const Clock::time_point backward_start = Clock::now();
  if (!wrt.empty()) {
    {
      ScopedSite site(tracker_.get(), Category::kGradients, "seed");
      Tensor seed = NewGradient(Shape());
      seed.f64()[0] = 1.0;
      adjoints_[output] = seed;
    }
    for (auto e = list_.rbegin(); e != list_.rend(); ++e) {
      auto dy = adjoints_.find(e->output);
      if (dy == adjoints_.end()) continue;  // the value does not reach the output
      ScopedSite site(tracker_.get(), Category::kGradients, Program::Describe(*e->op));
      Record("backward", *e);
      Vjp(*e, dy->second);
    }
  }
  // The gradients' magnitudes: the same walk over the adjoints' magnitudes.
  if (tracking() && !wrt.empty()) {
    {
      Tensor seed = Tensor::Zeros(DType::kF64, Shape(), tracker_, Category::kGradients);
      seed.f64()[0] = 1.0;
      adjoint_magnitudes_[output] = seed;
    }
    for (auto e = list_.rbegin(); e != list_.rend(); ++e) {
      auto mdy = adjoint_magnitudes_.find(e->output);
      auto dy = adjoints_.find(e->output);
      if (mdy == adjoint_magnitudes_.end() || dy == adjoints_.end()) continue;
      MagnitudeVjp(*e, dy->second, mdy->second);
    }
    for (int w : wrt) {
      auto found = adjoint_magnitudes_.find(w);
      magnitudes_out_->grads.push_back(found != adjoint_magnitudes_.end()
                                           ? found->second
                                           : Tensor::Zeros(DType::kF64, program.shapes[w], tracker_,
                                                           Category::kGradients));
    }
  }
  for (int w : wrt) {
    auto adjoint = adjoints_.find(w);
    if (adjoint != adjoints_.end()) {
      result.grads.push_back(adjoint->second);
    } else {
      ScopedSite site(tracker_.get(), Category::kGradients, "unreached gradient");
      result.grads.push_back(NewGradient(program.shapes[w]));
    }
  }
  result.stats.seconds_backward = SecondsSince(backward_start);

  Stats& s = result.stats;
  s.peak_bytes = tracker_->peak_bytes();
  s.peak_site = tracker_->peak_site();
  for (int c = 0; c < kNumCategories; ++c) {
    s.peak_bytes_by_category[c] = tracker_->peak_bytes(static_cast<Category>(c));
    s.high_water_bytes_by_category[c] = tracker_->high_water_bytes(static_cast<Category>(c));
  }
  s.host_peak_bytes = tracker_->peak_host_bytes();
  s.predicted_peak_bytes = -1;
  s.flops_forward = flops_forward_;
  s.flops_recomputed = 0;
  s.flops_backward = flops_backward_;
  s.op_runs = op_runs_;
  // No kernels: all of the oracle's time is its own loops.
  s.seconds_in_kernels = 0;
  return result;
}

int PlainReverseMode::Evaluate(const Program& p, const std::vector<int>& params) {
  if (static_cast<int>(params.size()) != p.num_params()) {
    throw Error(StrCat("oracle: program ", p.name, " takes ", p.num_params(), " parameters, got ",
                       params.size()));
  }
  std::vector<int> env(p.num_values(), -1);  // value id -> slot
  for (int i = 0; i < p.num_params(); ++i) {
    if (slots_[params[i]].shape() != p.shapes[i]) {
      throw Error(StrCat("oracle: program ", p.name, ": parameter ", p.param_names[i], " is ",
                         p.shapes[i].ToString(), ", given ", slots_[params[i]].TypeString()));
    }
    env[i] = params[i];
  }
  for (const Op& op : p.ops) {
    std::vector<int> inputs;
    for (int v : op.inputs) {
      if (v < 0 || v >= p.num_values() || env[v] < 0) {
        throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " reads value ",
                           v, ", which is not defined before it"));
      }
      inputs.push_back(env[v]);
    }
    if (op.output < p.num_params() || op.output >= p.num_values() || env[op.output] >= 0) {
      throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " writes value ",
                         op.output, ", which is not a fresh value"));
    }
    int out = -1;
    switch (op.kind) {
      case OpKind::kCheckpoint:
      case OpKind::kChain:
        // Inline: a policy or a schedule changes what is kept, not the math.
        if (!op.body) throw Error(StrCat("oracle: ", Program::Describe(op), " has no body"));
        out = Evaluate(*op.body, inputs);
        break;
      case OpKind::kScan:
        out = Scan(op, inputs);
        break;
      default:
        // Every primitive; Primitive's own switch names each op, so a new
        // op without an oracle rule fails to compile there (-Werror=switch).
        out = Primitive(p, op, inputs);
        break;
    }
    if (slots_[out].shape() != p.shapes[op.output]) {
      throw Error(StrCat("oracle: program ", p.name, ": ", Program::Describe(op), " gives ",
                         slots_[out].TypeString(), " where the program says ",
                         p.shapes[op.output].ToString()));
    }
    env[op.output] = out;
  }
  if (p.output < 0 || p.output >= p.num_values() || env[p.output] < 0) {
    throw Error(StrCat("oracle: program ", p.name, " has no output value"));
  }
  return env[p.output];
}

int PlainReverseMode::Scan(const Op& op, const std::vector<int>& inputs) {
  if (!op.body) throw Error(StrCat("oracle: ", Program::Describe(op), " has no body"));
  if (inputs.size() < 2) {
    throw Error(StrCat("oracle: ", Program::Describe(op), " needs a carry and at least one xs"));
  }
  const Shape& first = slots_[inputs[1]].shape();
  const int64_t length = first.rank() > 0 ? first.dim(0) : 0;
  for (size_t k = 1; k < inputs.size(); ++k) {
    if (IsScanConst(op, k)) continue;
    const Shape& xs = slots_[inputs[k]].shape();
    if (xs.rank() == 0 || xs.dim(0) != length || length == 0) {
      throw Error(StrCat("oracle: ", Program::Describe(op),
                         ": every xs needs the same non-empty leading axis; input ", k, " is ",
                         xs.ToString()));
    }
  }
  // Unrolled: step i runs the body on the carry and views of slice i.
  int carry = inputs[0];
  for (int64_t i = 0; i < length; ++i) {
    std::vector<int> params = {carry};
    for (size_t k = 1; k < inputs.size(); ++k) {
      if (IsScanConst(op, k)) {  // every step sees it whole (program.h)
        params.push_back(inputs[k]);
        continue;
      }
      Entry e;
      e.op = &op;
      e.slice = true;
      e.step = i;
      e.scan_input = static_cast<int>(k);
      e.inputs = {inputs[k]};
      e.output = NewSlot(slots_[inputs[k]].Slice(i));
      integer_.back() = integer_[inputs[k]];
      if (tracking()) mags_.push_back(mags_[inputs[k]].Slice(i));
      list_.push_back(e);
      Record("forward", e);
      params.push_back(e.output);
    }
    carry = Evaluate(*op.body, params);
  }
  return carry;
}

int PlainReverseMode::Primitive(const Program& p, const Op& op, const std::vector<int>& inputs) {
  std::vector<Shape> shapes;
  std::vector<const Tensor*> in;
  for (int s : inputs) {
    shapes.push_back(slots_[s].shape());
    in.push_back(&slots_[s]);
  }
  const Shape shape = PrimitiveShape(op, shapes);
  if (shape != p.shapes[op.output]) {
    throw Error(StrCat("oracle: ", Program::Describe(op), " gives ", shape.ToString(),
                       " where the program says ", p.shapes[op.output].ToString()));
  }
  Tensor out;
  {
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
    out = Tensor::Zeros(DType::kF64, shape, tracker_, Category::kActivations);
  }
  Compute(op, in, out);
  if (tracking()) {
    ScopedSite site(tracker_.get(), Category::kActivations, Program::Describe(op));
    mags_.push_back(Magnitude(op, inputs, out));
  }
  ++op_runs_[Program::Describe(op)];
  Entry e;
  e.op = &op;
  e.inputs = inputs;
  e.output = NewSlot(out);
  list_.push_back(e);
  Record("forward", e);
  return e.output;
}

// ---------------------------------------------------------------------------
// The forward rules. FLOPs follow engines/api/kernels.h's model, so that the
// oracle's forward count can be read next to an engine's.

void PlainReverseMode::Compute(const Op& op, const std::vector<const Tensor*>& in,
                               const Tensor& out) {
  const double* x = in[0]->f64();
  double* y = out.f64();
  const int64_t n = in[0]->num_elements();
  // Rows and the last axis, for the ops over the last axis.
  const int64_t cols =
      in[0]->shape().rank() > 0 ? in[0]->shape().dim(in[0]->shape().rank() - 1) : 1;
  const int64_t rows = cols > 0 ? n / cols : 0;
  switch (op.kind) {
    case OpKind::kMatMul: {
      // C[b,i,j] = sum_p A[b,i,p] B[b,p,j].
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
      flops_forward_ += 2 * batch * m * k * cols_b;
      return;
    }
    case OpKind::kRelu:
      // max(x, 0); NaN stays NaN, as jnp.maximum keeps it.
      for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0 || std::isnan(x[i])) ? x[i] : 0.0;
      flops_forward_ += n;
      return;
    case OpKind::kSin:
      for (int64_t i = 0; i < n; ++i) y[i] = std::sin(x[i]);
      flops_forward_ += n;
      return;
    case OpKind::kCos:
      for (int64_t i = 0; i < n; ++i) y[i] = std::cos(x[i]);
      flops_forward_ += n;
      return;
    case OpKind::kSquare:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * x[i];
      flops_forward_ += n;
      return;
    case OpKind::kAdd:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] + in[1]->f64()[i];
      flops_forward_ += n;
      return;
    case OpKind::kMul:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * in[1]->f64()[i];
      flops_forward_ += n;
      return;
    case OpKind::kSum: {
      double acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += x[i];
      y[0] = acc;
      flops_forward_ += n;
      return;
    }
    case OpKind::kName:
    case OpKind::kState:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    case OpKind::kSlice: {
      // y[p, j, q] = x[p, start + j, q], p over the axes before, q after.
      const Shape& s = in[0]->shape();
      const int axis = static_cast<int>(op.ints[0]);
      int64_t inner = 1;
      for (int i = axis + 1; i < s.rank(); ++i) inner *= s.dim(i);
      const int64_t len = op.ints[2], size = s.dim(axis);
      for (int64_t o = 0; o < out.num_elements(); ++o) {
        const int64_t q = o % inner, j = (o / inner) % len, p = o / inner / len;
        y[o] = x[(p * size + op.ints[1] + j) * inner + q];
      }
      return;
    }
    case OpKind::kBatchNormRunningMean:
    case OpKind::kBatchNormRunningVar: {
      // r' = (1 - m) r + m s per channel, s the batch's mean or its
      // unbiased variance (sum of squares of deviations / (M - 1)).
      const Shape& s = in[0]->shape();
      const int64_t c = s.dim(1), m = s.num_elements() / c;
      for (int64_t ch = 0; ch < c; ++ch) {
        double mean, rstd;
        ChannelMoments(x, s, ch, 1.0, &mean, &rstd);
        double stat = mean;
        if (op.kind == OpKind::kBatchNormRunningVar) {
          // The squares of the deviations summed again (rstd's variance is
          // the biased one, with eps).
          double v = 0;
          for (int64_t b = 0; b < s.dim(0); ++b)
            for (int64_t i = 0; i < m / s.dim(0); ++i) {
              v += std::pow(x[(b * c + ch) * (m / s.dim(0)) + i] - mean, 2);
            }
          stat = v / static_cast<double>(m - 1);
        }
        y[ch] = (1 - op.scalar) * in[1]->f64()[ch] + op.scalar * stat;
      }
      flops_forward_ += op.kind == OpKind::kBatchNormRunningMean ? n + 4 * c : 4 * n + 5 * c;
      return;
    }
    case OpKind::kEmbedding: {
      // y[p, :] = table[ids[p], :].
      const int64_t v = in[0]->shape().dim(0), d = in[0]->shape().dim(1);
      for (int64_t p = 0; p < in[1]->num_elements(); ++p) {
        const int64_t id = Index(op, *in[1], p, v);
        for (int64_t j = 0; j < d; ++j) y[p * d + j] = x[id * d + j];
      }
      return;
    }
    case OpKind::kMaskedFill:
      for (int64_t i = 0; i < n; ++i) y[i] = in[1]->at(i) != 0 ? op.scalar : x[i];
      return;
    case OpKind::kLogSoftmax:
      // Per row: y_j = x_j - log(sum_k e^(x_k - m)) - m, m the row's max.
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const double lse = RowLogSumExp(xr, cols);
        for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] - lse;
      }
      flops_forward_ += 5 * n;
      return;
    case OpKind::kReshape:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      return;
    case OpKind::kPermute: {
      const std::vector<int64_t> where = PermutedPositions(in[0]->shape(), op.ints);
      for (int64_t i = 0; i < n; ++i) y[where[i]] = x[i];
      return;
    }
    case OpKind::kTopKSoftmax:
      for (int64_t r = 0; r < rows; ++r) TopKSoftmaxRow(x + r * cols, cols, op.ints[0], y + r * cols);
      flops_forward_ += 4 * n;
      return;
    case OpKind::kMaxPool2d: {
      const Shape& s = out.shape();
      for (int64_t pl = 0; pl < s.dim(0) * s.dim(1); ++pl)
        for (int64_t i = 0; i < s.dim(2); ++i)
          for (int64_t j = 0; j < s.dim(3); ++j) {
            y[(pl * s.dim(2) + i) * s.dim(3) + j] = x[PoolChoice(*in[0], op.ints, pl, i, j)];
          }
      return;
    }
    case OpKind::kGlobalAvgPool: {
      const int64_t hw = in[0]->shape().dim(2) * in[0]->shape().dim(3);
      for (int64_t pl = 0; pl < out.num_elements(); ++pl) {
        double acc = 0;
        for (int64_t i = 0; i < hw; ++i) acc += x[pl * hw + i];
        y[pl] = acc / static_cast<double>(hw);
      }
      flops_forward_ += n + out.num_elements();
      return;
    }
    case OpKind::kBatchNorm: {
      // Per channel: (x - mean) / sqrt(var + eps) * gamma + beta, the batch's
      // mean and biased variance over N H W.
      const Shape& s = in[0]->shape();
      const int64_t c = s.dim(1), hw = s.rank() == 4 ? s.dim(2) * s.dim(3) : 1;
      for (int64_t ch = 0; ch < c; ++ch) {
        double mean, rstd;
        ChannelMoments(x, s, ch, op.scalar, &mean, &rstd);
        for (int64_t b = 0; b < s.dim(0); ++b)
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t at = (b * c + ch) * hw + i;
            y[at] = (x[at] - mean) * rstd * in[1]->f64()[ch] + in[2]->f64()[ch];
          }
      }
      flops_forward_ += 7 * n;
      return;
    }
    case OpKind::kConv2d: {
      // y[b,o,i,j] = sum over c, p, q of x[b, c, i s + p - pad, j s + q - pad]
      // w[o,c,p,q], the image zero outside.
      const ConvGeometry g(in[0]->shape(), in[1]->shape(), out.shape(), op.ints);
      const double* wt = in[1]->f64();
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t oc = 0; oc < g.o; ++oc)
          for (int64_t i = 0; i < g.oh; ++i)
            for (int64_t j = 0; j < g.ow; ++j) {
              double acc = 0;
              for (int64_t ch = 0; ch < g.c; ++ch)
                for (int64_t p = 0; p < g.kh; ++p)
                  for (int64_t q = 0; q < g.kw; ++q) {
                    const int64_t r = i * g.stride + p - g.pad, s = j * g.stride + q - g.pad;
                    if (r >= 0 && r < g.h && s >= 0 && s < g.w) acc += x[g.X(b, ch, r, s)] * wt[g.W(oc, ch, p, q)];
                  }
              y[g.Y(b, oc, i, j)] = acc;
            }
      flops_forward_ += 2 * out.num_elements() * g.c * g.kh * g.kw;
      return;
    }
    case OpKind::kGeluErf:
      // x Phi(x), Phi the standard normal CDF = erfc(-x / sqrt 2) / 2.
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
      flops_forward_ += n;
      return;
    case OpKind::kSilu:
      // x / (1 + e^-x).
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0 + std::exp(-x[i]));
      flops_forward_ += n;
      return;
    case OpKind::kRmsNorm: {
      // Per row: y_j = x_j gamma_j / sqrt(mean of x^2 + eps).
      const double* gamma = in[1]->f64();
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        double ms = 0;
        for (int64_t j = 0; j < cols; ++j) ms += xr[j] * xr[j];
        ms /= static_cast<double>(cols);
        const double inv_rms = 1.0 / std::sqrt(ms + op.scalar);
        for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = xr[j] * inv_rms * gamma[j];
      }
      flops_forward_ += 4 * n;
      return;
    }
    case OpKind::kCrossEntropy: {
      // The mean over rows of -log p(target), p the row's softmax.
      double total = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const int64_t t = Index(op, *in[1], r, cols);
        total += RowLogSumExp(xr, cols) - xr[t];
      }
      y[0] = total / static_cast<double>(rows);
      flops_forward_ += 4 * n;
      return;
    }
    case OpKind::kDropout:
      // Element i kept when its bits clear p's threshold; kept ones divided
      // by 1 - p (the kernels multiply by its reciprocal: a rounding apart).
      for (int64_t i = 0; i < n; ++i) y[i] = Kept(op, *in[1], i) ? x[i] / (1 - op.scalar) : 0.0;
      flops_forward_ += n;
      return;
    case OpKind::kSoftmax:
      // Per row: y_j = exp(x_j - m) / sum_l exp(x_l - m), m the row's max.
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        double* yr = y + r * cols;
        double m = xr[0];
        for (int64_t j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
        for (int64_t j = 0; j < cols; ++j) yr[j] = std::exp(xr[j] - m) / s;
      }
      flops_forward_ += 5 * n;
      return;
    case OpKind::kLayerNorm: {
      // Per row: y_j = (x_j - mean) / sqrt(var + eps) * gamma_j + beta_j, var
      // the biased variance (mean of squared deviations).
      const double* gamma = in[1]->f64();
      const double* beta = in[2]->f64();
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        double* yr = y + r * cols;
        double mean = 0;
        for (int64_t j = 0; j < cols; ++j) mean += xr[j];
        mean /= static_cast<double>(cols);
        double var = 0;
        for (int64_t j = 0; j < cols; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        var /= static_cast<double>(cols);
        const double inv_std = 1.0 / std::sqrt(var + Kernels::kLayerNormEps);
        for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * inv_std * gamma[j] + beta[j];
      }
      flops_forward_ += 7 * n;
      return;
    }
    case OpKind::kGelu:
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
      for (int64_t i = 0; i < n; ++i) {
        const double u = kGeluC * (x[i] + kGeluA * x[i] * x[i] * x[i]);
        y[i] = 0.5 * x[i] * (1.0 + std::tanh(u));
      }
      flops_forward_ += n;
      return;
    case OpKind::kScale:
      for (int64_t i = 0; i < n; ++i) y[i] = op.scalar * x[i];
      flops_forward_ += n;
      return;
    case OpKind::kNeg:
      for (int64_t i = 0; i < n; ++i) y[i] = -x[i];
      flops_forward_ += n;
      return;
    case OpKind::kExp:
      for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
      flops_forward_ += n;
      return;
    case OpKind::kLog:
      for (int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
      flops_forward_ += n;
      return;
    case OpKind::kSub: {
      const double* b = in[1]->f64();
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] - b[i];
      flops_forward_ += n;
      return;
    }
    case OpKind::kTranspose: {
      // y[b,j,i] = x[b,i,j].
      const Shape& s = in[0]->shape();
      const int r = s.rank() - 2;
      const int64_t batch = r == 1 ? s.dim(0) : 1, m = s.dim(r), c = s.dim(r + 1);
      for (int64_t t = 0; t < batch; ++t) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < c; ++j) y[At(t, j, i, c, m)] = x[At(t, i, j, m, c)];
        }
      }
      return;
    }
    case OpKind::kSplitHeads: {
      const int64_t batch = op.ints[0], heads = op.ints[1];
      const Shape& s = in[0]->shape();
      ForEachHeadElement(batch, heads, s.dim(0) / batch, s.dim(1) / heads,
                         [&](int64_t flat, int64_t split) { y[split] = x[flat]; });
      return;
    }
    case OpKind::kMergeHeads: {
      const int64_t batch = op.ints[0];
      const Shape& s = in[0]->shape();
      ForEachHeadElement(batch, s.dim(0) / batch, s.dim(1), s.dim(2),
                         [&](int64_t flat, int64_t split) { y[flat] = x[split]; });
      return;
    }
    case OpKind::kBiasAdd: {
      // y[r,j] = x[r,j] + b[j]: the bias repeats down the rows.
      const double* b = in[1]->f64();
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < cols; ++j) y[r * cols + j] = x[r * cols + j] + b[j];
      }
      flops_forward_ += n;
      return;
    }
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      break;
  }
  throw Error(StrCat("oracle: no rule for op kind ", static_cast<int>(op.kind), " (",
                     Program::Describe(op), ")"));
}

// ---------------------------------------------------------------------------
// The rounding magnitudes (OracleRoundingMagnitudes, oracle.h). M(v) bounds,
// element by element, what an f32 computation of v errs by, in units of
// 2^-24 per rounding on the way (the rounding depth K counts those): a
// rounding of a quantity q errs by at most |q| 2^-24, and an error d in an
// input moves the output by at most |f'| d. So for y = f(x), with K(y) at
// least K(x) + 1:
//   M(y) = max(|f'(x)| M(x), |y|)   (the input's error carried; y's own rounding)
// (a maximum, not a sum: K already counts one unit per rounding).
// For a sum or a product (add, sum, the bias, the average pool; matmul,
// mul, conv2d) the sum of the absolute values of its terms, which is what a
// cancelling sum rounds relative to (not its small result), plus the
// inputs' errors carried in quadrature (see the rule). A copy, a layout
// change, a selection or a constant factor: the same op on the magnitudes. Ops over a row (softmax, the norms,
// cross-entropy) carry the row's largest input magnitude times the op's
// sensitivity to its inputs (at most 2 for softmax's shifts; 1/std for a
// normalization). First order, and an estimate where errors add in
// quadrature: they decide a tolerance, not an answer.

Tensor PlainReverseMode::Magnitude(const Op& op, const std::vector<int>& inputs, const Tensor& out) {
  const Tensor& xv = slots_[inputs[0]];
  const double* x = xv.f64();
  const double* mx = mags_[inputs[0]].f64();
  const double* y = out.f64();
  Tensor m = Tensor::Zeros(DType::kF64, out.shape(), tracker_, Category::kActivations);
  double* mo = m.f64();
  const int64_t n = xv.num_elements();
  const int64_t cols = xv.shape().rank() > 0 ? xv.shape().dim(xv.shape().rank() - 1) : 1;
  const int64_t rows = cols > 0 ? n / cols : 0;
  const auto row_max = [&](int64_t r) {
    double best = 0;
    for (int64_t j = 0; j < cols; ++j) best = std::max(best, mx[r * cols + j]);
    return best;
  };
  // `op` (its own forward rule) on other inputs, into a new tensor.
  const auto apply = [&](const std::vector<const Tensor*>& in) {
    Tensor t = Tensor::Zeros(DType::kF64, out.shape(), tracker_, Category::kActivations);
    const int64_t flops = flops_forward_;
    Compute(op, in, t);
    flops_forward_ = flops;  // the magnitudes are no part of the run's work
    return t;
  };
  const auto elementwise = [&](const Tensor& t, double (*f)(double)) {
    Tensor r = Copy(t, tracker_);
    for (int64_t i = 0; i < r.num_elements(); ++i) r.f64()[i] = f(r.f64()[i]);
    return r;
  };
  switch (op.kind) {
    // A product of two inputs (matmul, mul, conv2d: bilinear), C = B(a, b):
    // its own rounding relative to B(|a|, |b|), the sum of the absolute
    // values of its terms; and each input's error carried by the other
    // input's values, added in quadrature, sqrt(B(a^2, M(b)^2) +
    // B(M(a)^2, b^2)): rounding errors of many terms have random signs, and
    // carrying them by |a| |b| instead would grow like a product of absolute
    // matrices, layer after layer, far past any error an f32 run makes.
    case OpKind::kMatMul:
    case OpKind::kMul:
    case OpKind::kConv2d: {
      const Tensor& b = slots_[inputs[1]];
      const auto abs = [](double v) { return std::abs(v); };
      const auto sq = [](double v) { return v * v; };
      const Tensor abs_a = elementwise(xv, +abs), abs_b = elementwise(b, +abs);
      const Tensor sq_a = elementwise(xv, +sq), sq_b = elementwise(b, +sq);
      const Tensor sq_ma = elementwise(mags_[inputs[0]], +sq);
      const Tensor sq_mb = elementwise(mags_[inputs[1]], +sq);
      const Tensor terms = apply({&abs_a, &abs_b});
      const Tensor via_b = apply({&sq_a, &sq_mb});
      const Tensor via_a = apply({&sq_ma, &sq_b});
      for (int64_t i = 0; i < m.num_elements(); ++i) {
        mo[i] = terms.f64()[i] + std::sqrt(via_b.f64()[i] + via_a.f64()[i]);
      }
      return m;
    }
    // A sum (add, sum, the bias, the average pool): its own rounding
    // relative to the sum of its terms' absolute values, and its terms'
    // errors added in quadrature, as a product's are.
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kSum:
    case OpKind::kBiasAdd:
    case OpKind::kGlobalAvgPool:
    case OpKind::kBatchNormRunningMean: {
      const auto abs = [](double v) { return std::abs(v); };
      const auto sq = [](double v) { return v * v; };
      std::vector<Tensor> abs_in, sq_m;
      for (int s : inputs) {
        abs_in.push_back(elementwise(slots_[s], +abs));
        sq_m.push_back(elementwise(mags_[s], +sq));
      }
      std::vector<const Tensor*> a, q;
      for (size_t i = 0; i < inputs.size(); ++i) {
        a.push_back(&abs_in[i]);
        q.push_back(&sq_m[i]);
      }
      // sub's terms are |a| + |b|: on absolute values, add's rule.
      Op as_add;
      as_add.kind = OpKind::kAdd;
      const Op& terms_op = op.kind == OpKind::kSub ? as_add : op;
      Tensor terms = Tensor::Zeros(DType::kF64, out.shape(), tracker_, Category::kActivations);
      const int64_t flops = flops_forward_;
      Compute(terms_op, a, terms);
      flops_forward_ = flops;
      const Tensor carried = op.kind == OpKind::kSub ? [&] {
        Tensor t = Tensor::Zeros(DType::kF64, out.shape(), tracker_, Category::kActivations);
        Compute(as_add, q, t);
        flops_forward_ = flops;
        return t;
      }()
                                                     : apply(q);
      for (int64_t i = 0; i < m.num_elements(); ++i) {
        mo[i] = terms.f64()[i] + std::sqrt(carried.f64()[i]);
      }
      if (op.kind == OpKind::kGlobalAvgPool) {  // a mean: the squares were divided once, not twice
        const double hw = static_cast<double>(xv.shape().dim(2) * xv.shape().dim(3));
        for (int64_t i = 0; i < m.num_elements(); ++i) {
          mo[i] = terms.f64()[i] + std::sqrt(carried.f64()[i] / hw);
        }
      }
      return m;
    }
    // The same op on the magnitudes (a copy, a layout, a selection, a
    // constant factor), then its absolute value (a negative scale, a
    // negation).
    case OpKind::kName:
    case OpKind::kState:
    case OpKind::kSlice:
    case OpKind::kEmbedding:
    case OpKind::kReshape:
    case OpKind::kPermute:
    case OpKind::kMaxPool2d:  // the largest magnitude in the window: whichever is chosen
    case OpKind::kDropout:
    case OpKind::kScale:
    case OpKind::kNeg:
    case OpKind::kTranspose:
    case OpKind::kSplitHeads:
    case OpKind::kMergeHeads:
    case OpKind::kMaskedFill: {
      std::vector<const Tensor*> in;
      for (int s : inputs) in.push_back(&mags_[s]);
      m = apply(in);
      mo = m.f64();
      for (int64_t i = 0; i < m.num_elements(); ++i) mo[i] = std::abs(mo[i]);
      if (op.kind == OpKind::kScale || op.kind == OpKind::kDropout) {  // a rounded product
        for (int64_t i = 0; i < m.num_elements(); ++i) mo[i] = std::max(mo[i], std::abs(y[i]));
      }
      if (op.kind == OpKind::kMaskedFill) {  // the fill is a constant, exact
        for (int64_t i = 0; i < n; ++i) {
          if (slots_[inputs[1]].at(i) != 0) mo[i] = 0;
        }
      }
      return m;
    }
    // Elementwise: max(|f'(x)| M(x), |y|). relu's derivative is 0 or 1 and its
    // choice may flip within the error: M(x) covers both.
    case OpKind::kRelu:
      for (int64_t i = 0; i < n; ++i) mo[i] = mx[i];
      return m;
    case OpKind::kSin:
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(std::abs(std::cos(x[i])) * mx[i], std::abs(y[i]));
      return m;
    case OpKind::kCos:
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(std::abs(std::sin(x[i])) * mx[i], std::abs(y[i]));
      return m;
    case OpKind::kSquare:
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(2 * std::abs(x[i]) * mx[i], std::abs(y[i]));
      return m;
    case OpKind::kExp:
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(y[i] * mx[i], y[i]);
      return m;
    case OpKind::kLog:
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(mx[i] / std::abs(x[i]), std::abs(y[i]));
      return m;
    case OpKind::kGelu:
    case OpKind::kGeluErf:
    case OpKind::kSilu:
      // |gelu'| < 1.13 (both forms), |silu'| < 1.1.
      for (int64_t i = 0; i < n; ++i) mo[i] = std::max(1.13 * mx[i], std::abs(y[i]));
      return m;
    // Over a row.
    case OpKind::kSoftmax:
    case OpKind::kTopKSoftmax:
      // dy_i = y_i (dx_i - sum_j y_j dx_j): at most 2 y_i max|dx|.
      for (int64_t r = 0; r < rows; ++r) {
        const double mr = row_max(r);
        for (int64_t j = 0; j < cols; ++j) mo[r * cols + j] = y[r * cols + j] * std::max(2 * mr, 1.0);
      }
      return m;
    case OpKind::kLogSoftmax:
      // dy_i = dx_i - sum_j p_j dx_j; x_i - lse cancels relative to |x|.
      for (int64_t r = 0; r < rows; ++r) {
        const double mr = row_max(r);
        for (int64_t j = 0; j < cols; ++j) mo[r * cols + j] = std::max(2 * mr, std::abs(y[r * cols + j]));
      }
      return m;
    case OpKind::kCrossEntropy: {
      // The mean over rows of lse - x_t: each row as log_softmax's.
      double total = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const int64_t t = Index(op, slots_[inputs[1]], r, cols);
        total += std::max(2 * row_max(r), std::abs(RowLogSumExp(xr, cols) - xr[t]));
      }
      mo[0] = rows > 0 ? total / static_cast<double>(rows) : 0;
      return m;
    }
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
    case OpKind::kBatchNorm: {
      // y = xhat gamma (+ beta), xhat = (x - mean) / std over a row (over
      // a channel's N H W for batch_norm; rms_norm: x / rms, no mean). An
      // error d in x moves xhat_i by (d_i - mean d - xhat_i mean(xhat d)) /
      // std: in quadrature, sqrt(M_i^2 + (1 + xhat_i^2) mean(M^2)) / std
      // (rms: without the mean's term). x - mean cancels relative to |x|
      // and |mean|, both within sqrt(mean(M^2)).
      const bool rms = op.kind == OpKind::kRmsNorm;
      const double* g = slots_[inputs[1]].f64();
      const double* mg = mags_[inputs[1]].f64();
      const double* mb = rms ? nullptr : mags_[inputs[2]].f64();
      const Shape& s = xv.shape();
      const bool by_channel = op.kind == OpKind::kBatchNorm;
      const std::vector<std::vector<int64_t>> groups = NormGroups(op, s);
      for (int64_t grp = 0; grp < static_cast<int64_t>(groups.size()); ++grp) {
        const std::vector<int64_t>& at = groups[grp];
        const double count = static_cast<double>(at.size());
        double mean = 0, sq = 0, msq = 0;
        for (int64_t i : at) mean += x[i];
        mean = rms ? 0 : mean / count;
        for (int64_t i : at) {
          sq += (x[i] - mean) * (x[i] - mean);
          msq += mx[i] * mx[i];
        }
        const double eps = op.kind == OpKind::kLayerNorm ? Kernels::kLayerNormEps : op.scalar;
        const double std = std::sqrt(sq / count + eps);
        msq /= count;
        for (size_t k = 0; k < at.size(); ++k) {
          const int64_t i = at[k];
          const int64_t gi = by_channel ? grp : static_cast<int64_t>(k);  // gamma's index
          const double xhat = std::abs(x[i] - mean) / std;
          const double carried =
              std::abs(g[gi]) * std::sqrt(mx[i] * mx[i] + ((rms ? 0 : 1) + xhat * xhat) * msq) / std;
          mo[i] = std::max(carried + xhat * mg[gi] + (rms ? 0 : mb[gi]), std::abs(y[i]));
        }
      }
      return m;
    }
    case OpKind::kBatchNormRunningVar: {
      // (1 - m) r + m var, var = sum (x - mean)^2 / (M - 1): its error is
      // at most 2 mean|x - mean| max|dx| M/(M-1), and its own rounding
      // relative to itself.
      const Shape& s = xv.shape();
      const int64_t c = s.dim(1), per = s.num_elements() / c, inner = per / s.dim(0);
      const double* mr = mags_[inputs[1]].f64();
      for (int64_t ch = 0; ch < c; ++ch) {
        double mean, rstd;
        ChannelMoments(x, s, ch, 1.0, &mean, &rstd);
        double dev = 0, sq = 0, mc = 0;
        for (int64_t b = 0; b < s.dim(0); ++b)
          for (int64_t i = 0; i < inner; ++i) {
            const int64_t at = (b * c + ch) * inner + i;
            dev += std::abs(x[at] - mean);
            sq += (x[at] - mean) * (x[at] - mean);
            mc = std::max(mc, mx[at]);
          }
        const double var_m = std::max(2 * mc * dev, sq) / static_cast<double>(per - 1);
        mo[ch] = (1 - op.scalar) * mr[ch] + op.scalar * var_m;
      }
      return m;
    }
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      break;
  }
  throw Error(StrCat("oracle: no magnitude rule for ", Program::Describe(op)));
}

// ---------------------------------------------------------------------------
// The vector-Jacobian products, each derived here from the forward rule
// above. dy is the adjoint of the entry's output; each contribution is a new
// tensor of its input's shape. FLOPs: this oracle's own count of the loops
// below (and one per element for each addition into an adjoint), only so
// that a run reports its backward work; it is not an engine's count.

void PlainReverseMode::Vjp(const Entry& e, const Tensor& dy_tensor) {
  const Op& op = *e.op;
  const double* dy = dy_tensor.f64();
  if (e.slice) {
    // out = xs[step]: the step's adjoint goes to slice `step` of xs.
    Tensor c = NewGradient(dy_tensor.shape());
    std::memcpy(c.f64(), dy, dy_tensor.bytes());
    Contribute(e, 0, std::move(c));
    return;
  }
  const Tensor& x_tensor = slots_[e.inputs[0]];
  const double* x = x_tensor.f64();
  const int64_t n = x_tensor.num_elements();
  const Shape& xs = x_tensor.shape();
  const int64_t cols = xs.rank() > 0 ? xs.dim(xs.rank() - 1) : 1;
  const int64_t rows = cols > 0 ? n / cols : 0;
  switch (op.kind) {
    case OpKind::kMatMul: {
      // C = A B, so dC . dC' = tr(dC^T (dA B + A dB)):
      //   dA[b,i,p] = sum_j dC[b,i,j] B[b,p,j]   (dC B^T)
      //   dB[b,p,j] = sum_i A[b,i,p] dC[b,i,j]   (A^T dC)
      const Tensor& b_tensor = slots_[e.inputs[1]];
      const double* b = b_tensor.f64();
      const int r = xs.rank() - 2;
      const int64_t batch = r == 1 ? xs.dim(0) : 1, m = xs.dim(r), k = xs.dim(r + 1),
                    cols_b = b_tensor.shape().dim(r + 1);
      Tensor da = NewGradient(xs);
      Tensor db = NewGradient(b_tensor.shape());
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
      flops_backward_ += 4 * batch * m * k * cols_b;
      Contribute(e, 0, std::move(da));
      Contribute(e, 1, std::move(db));
      return;
    }
    case OpKind::kRelu: {
      // y = x for x > 0, else 0: dx = dy where x > 0 and 0 elsewhere, x = 0
      // included (relu'(0) = 0, as JAX and PyTorch).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = x[i] > 0 ? dy[i] : 0.0;
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSin: {
      // d sin(x) / dx = cos(x).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i] * std::cos(x[i]);
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kCos: {
      // d cos(x) / dx = -sin(x).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = -dy[i] * std::sin(x[i]);
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSquare: {
      // d x^2 / dx = 2x.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i] * 2.0 * x[i];
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kAdd: {
      // y = a + b: da = dy, db = dy.
      for (int input = 0; input < 2; ++input) {
        Tensor d = NewGradient(xs);
        for (int64_t i = 0; i < n; ++i) d.f64()[i] = dy[i];
        Contribute(e, input, std::move(d));
      }
      return;
    }
    case OpKind::kMul: {
      // y = a * b: da = dy * b, db = dy * a.
      const double* b = slots_[e.inputs[1]].f64();
      Tensor da = NewGradient(xs);
      Tensor db = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        da.f64()[i] = dy[i] * b[i];
        db.f64()[i] = dy[i] * x[i];
      }
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(da));
      Contribute(e, 1, std::move(db));
      return;
    }
    case OpKind::kSum: {
      // y = sum_i x_i: dx_i = dy for every i.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[0];
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kEmbedding: {
      // Each position's row of dy goes to its id's row of the table.
      const Tensor& ids = slots_[e.inputs[1]];
      const int64_t v = xs.dim(0), d = xs.dim(1);
      Tensor dtable = NewGradient(xs);
      for (int64_t p = 0; p < ids.num_elements(); ++p) {
        const int64_t id = Index(op, ids, p, v);
        for (int64_t j = 0; j < d; ++j) dtable.f64()[id * d + j] += dy[p * d + j];
      }
      flops_backward_ += ids.num_elements() * d;
      Contribute(e, 0, std::move(dtable));
      return;
    }
    case OpKind::kLogSoftmax: {
      // y_j = x_j - lse(x): dx_j = dy_j - p_j sum_k dy_k, p the row's softmax
      // (recomputed from x here, not read from y).
      Tensor dx = NewGradient(xs);
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const double* dyr = dy + r * cols;
        double m = xr[0];
        for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
        double s = 0, total = 0;
        for (int64_t j = 0; j < cols; ++j) {
          s += std::exp(xr[j] - m);
          total += dyr[j];
        }
        for (int64_t j = 0; j < cols; ++j) {
          dx.f64()[r * cols + j] = dyr[j] - std::exp(xr[j] - m) / s * total;
        }
      }
      flops_backward_ += 4 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kReshape: {
      // The elements keep their order: dx = dy under x's shape.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i];
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kPermute: {
      // A permutation: each x element's adjoint is its image's.
      const std::vector<int64_t> where = PermutedPositions(xs, op.ints);
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[where[i]];
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kMaxPool2d: {
      // Each output's adjoint goes to the pixel it chose.
      Tensor dx = NewGradient(xs);
      const Shape& s = dy_tensor.shape();
      for (int64_t pl = 0; pl < s.dim(0) * s.dim(1); ++pl)
        for (int64_t i = 0; i < s.dim(2); ++i)
          for (int64_t j = 0; j < s.dim(3); ++j) {
            dx.f64()[PoolChoice(x_tensor, op.ints, pl, i, j)] += dy[(pl * s.dim(2) + i) * s.dim(3) + j];
          }
      flops_backward_ += dy_tensor.num_elements();
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kGlobalAvgPool: {
      // y = mean of the plane: each pixel gets dy / (H W).
      Tensor dx = NewGradient(xs);
      const int64_t hw = xs.dim(2) * xs.dim(3);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i / hw] / static_cast<double>(hw);
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kBatchNorm: {
      // xhat = (x - mean) rstd, y = xhat gamma + beta, mean and rstd
      // functions of the whole channel. Per channel, with g = dy gamma and M
      // elements: dx = rstd (g - mean(g) - xhat mean(g xhat)) (the chain
      // rule through mean and var), dgamma = sum dy xhat, dbeta = sum dy.
      const double* gamma = slots_[e.inputs[1]].f64();
      const int64_t c = xs.dim(1), hw = xs.rank() == 4 ? xs.dim(2) * xs.dim(3) : 1;
      const double m = static_cast<double>(xs.dim(0) * hw);
      Tensor dx = NewGradient(xs);
      Tensor dgamma = NewGradient(Shape({c}));
      Tensor dbeta = NewGradient(Shape({c}));
      for (int64_t ch = 0; ch < c; ++ch) {
        double mean, rstd;
        ChannelMoments(x, xs, ch, op.scalar, &mean, &rstd);
        double sum_g = 0, sum_gx = 0;
        for (int64_t b = 0; b < xs.dim(0); ++b)
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t at = (b * c + ch) * hw + i;
            const double xhat = (x[at] - mean) * rstd;
            sum_g += dy[at] * gamma[ch];
            sum_gx += dy[at] * gamma[ch] * xhat;
            dgamma.f64()[ch] += dy[at] * xhat;
            dbeta.f64()[ch] += dy[at];
          }
        for (int64_t b = 0; b < xs.dim(0); ++b)
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t at = (b * c + ch) * hw + i;
            const double xhat = (x[at] - mean) * rstd;
            dx.f64()[at] = rstd * (dy[at] * gamma[ch] - sum_g / m - xhat * sum_gx / m);
          }
      }
      flops_backward_ += 14 * n;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(dgamma));
      Contribute(e, 2, std::move(dbeta));
      return;
    }
    case OpKind::kConv2d: {
      // Each input element's adjoint gathers the outputs it reached: x[b,c,r,s]
      // reached y[b,o,i,j] through tap (p, q) where r = i s + p - pad, so
      // dx[b,c,r,s] = sum over o, p, q with (r + pad - p) / s a whole i in
      // range (and j likewise) of dy[b,o,i,j] w[o,c,p,q];
      // dw[o,c,p,q] = sum over b, i, j of x[b, c, i s + p - pad, ...] dy[b,o,i,j].
      const Tensor& w_tensor = slots_[e.inputs[1]];
      const double* wt = w_tensor.f64();
      const ConvGeometry g(xs, w_tensor.shape(), dy_tensor.shape(), op.ints);
      Tensor dx = NewGradient(xs);
      Tensor dw = NewGradient(w_tensor.shape());
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t ch = 0; ch < g.c; ++ch)
          for (int64_t r = 0; r < g.h; ++r)
            for (int64_t s = 0; s < g.w; ++s) {
              double acc = 0;
              for (int64_t oc = 0; oc < g.o; ++oc)
                for (int64_t p = 0; p < g.kh; ++p)
                  for (int64_t q = 0; q < g.kw; ++q) {
                    const int64_t ti = r + g.pad - p, tj = s + g.pad - q;
                    if (ti < 0 || tj < 0 || ti % g.stride != 0 || tj % g.stride != 0) continue;
                    const int64_t i = ti / g.stride, j = tj / g.stride;
                    if (i < g.oh && j < g.ow) acc += dy[g.Y(b, oc, i, j)] * wt[g.W(oc, ch, p, q)];
                  }
              dx.f64()[g.X(b, ch, r, s)] = acc;
            }
      for (int64_t oc = 0; oc < g.o; ++oc)
        for (int64_t ch = 0; ch < g.c; ++ch)
          for (int64_t p = 0; p < g.kh; ++p)
            for (int64_t q = 0; q < g.kw; ++q) {
              double acc = 0;
              for (int64_t b = 0; b < g.n; ++b)
                for (int64_t i = 0; i < g.oh; ++i)
                  for (int64_t j = 0; j < g.ow; ++j) {
                    const int64_t r = i * g.stride + p - g.pad, s = j * g.stride + q - g.pad;
                    if (r >= 0 && r < g.h && s >= 0 && s < g.w) acc += x[g.X(b, ch, r, s)] * dy[g.Y(b, oc, i, j)];
                  }
              dw.f64()[g.W(oc, ch, p, q)] = acc;
            }
      flops_backward_ += 4 * dy_tensor.num_elements() * g.c * g.kh * g.kw;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(dw));
      return;
    }
    case OpKind::kTopKSoftmax: {
      // The choice held fixed, y is softmax over the chosen: dx_j =
      // y_j (dy_j - sum_l y_l dy_l), y recomputed from x; 0 off the choice.
      Tensor dx = NewGradient(xs);
      std::vector<double> yr(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        TopKSoftmaxRow(x + r * cols, cols, op.ints[0], yr.data());
        const double* dyr = dy + r * cols;
        double total = 0;
        for (int64_t j = 0; j < cols; ++j) total += yr[j] * dyr[j];
        for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = yr[j] * (dyr[j] - total);
      }
      flops_backward_ += 4 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kGeluErf: {
      // d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = e^(-x^2 / 2) / sqrt(2 pi).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        const double cdf = 0.5 * std::erfc(-x[i] / std::sqrt(2.0));
        const double pdf = std::exp(-0.5 * x[i] * x[i]) / std::sqrt(2.0 * std::numbers::pi);
        dx.f64()[i] = dy[i] * (cdf + x[i] * pdf);
      }
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSilu: {
      // y = x s, s = 1 / (1 + e^-x), ds/dx = s (1 - s): dy/dx = s + x s (1 - s).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        const double s = 1.0 / (1.0 + std::exp(-x[i]));
        dx.f64()[i] = dy[i] * (s + x[i] * s * (1.0 - s));
      }
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kRmsNorm: {
      // Back through the row's steps (q = sum x_j^2 / C, r = (q + eps)^(-1/2),
      // y_j = x_j r gamma_j):
      //   dgamma_j += dy_j x_j r                      (summed over rows)
      //   g_j = dy_j gamma_j;  dx_j = g_j r;  dr = sum_j g_j x_j
      //   through r:  dq = dr * (-1/2) (q + eps)^(-3/2)
      //   through q:  dx_j += dq * 2 x_j / C
      const double* gamma = slots_[e.inputs[1]].f64();
      Tensor dx = NewGradient(xs);
      Tensor dgamma = NewGradient(slots_[e.inputs[1]].shape());
      const double c = static_cast<double>(cols);
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const double* dyr = dy + r * cols;
        double q = 0;
        for (int64_t j = 0; j < cols; ++j) q += xr[j] * xr[j];
        q /= c;
        const double rs = 1.0 / std::sqrt(q + op.scalar);
        double dr = 0;
        for (int64_t j = 0; j < cols; ++j) {
          dgamma.f64()[j] += dyr[j] * xr[j] * rs;
          const double g = dyr[j] * gamma[j];
          dx.f64()[r * cols + j] = g * rs;
          dr += g * xr[j];
        }
        const double dq = dr * -0.5 * rs * rs * rs;
        for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] += dq * 2.0 * xr[j] / c;
      }
      flops_backward_ += 14 * n;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(dgamma));
      return;
    }
    case OpKind::kMaskedFill: {
      // Filled elements do not depend on x.
      const Tensor& mask = slots_[e.inputs[1]];
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = mask.at(i) != 0 ? 0.0 : dy[i];
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kCrossEntropy: {
      // d/dx[r, j] of (lse_r - x[r, t]) / N = (p_rj - [j == t]) / N.
      const Tensor& targets = slots_[e.inputs[1]];
      Tensor dx = NewGradient(xs);
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const int64_t t = Index(op, targets, r, cols);
        double m = xr[0];
        for (int64_t j = 1; j < cols; ++j) m = std::max(m, xr[j]);
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) s += std::exp(xr[j] - m);
        for (int64_t j = 0; j < cols; ++j) {
          const double p = std::exp(xr[j] - m) / s;
          dx.f64()[r * cols + j] = (p - (j == t ? 1.0 : 0.0)) * dy[0] / static_cast<double>(rows);
        }
      }
      flops_backward_ += 4 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kDropout: {
      // y_i = x_i keep_i / (1 - p): dx_i = dy_i keep_i / (1 - p), the
      // forward's mask redrawn from the seed. The seed gets no gradient.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        dx.f64()[i] = Kept(op, slots_[e.inputs[1]], i) ? dy[i] / (1 - op.scalar) : 0.0;
      }
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kBatchNormRunningMean:
    case OpKind::kBatchNormRunningVar: {
      // r' = (1 - m) r + m s: dr = (1 - m) dy; through the mean, each
      // element gets m dy / M; through the unbiased variance, m dy 2 (x -
      // mean) / (M - 1) (the mean's own term sums to zero).
      const int64_t c = xs.dim(1), m = xs.num_elements() / c, hw = m / xs.dim(0);
      Tensor dx = NewGradient(xs);
      Tensor dr = NewGradient(Shape({c}));
      for (int64_t ch = 0; ch < c; ++ch) {
        double mean, rstd;
        ChannelMoments(x, xs, ch, 1.0, &mean, &rstd);
        dr.f64()[ch] = (1 - op.scalar) * dy[ch];
        for (int64_t b = 0; b < xs.dim(0); ++b)
          for (int64_t i = 0; i < hw; ++i) {
            const int64_t at = (b * c + ch) * hw + i;
            dx.f64()[at] = op.kind == OpKind::kBatchNormRunningMean
                               ? op.scalar * dy[ch] / static_cast<double>(m)
                               : op.scalar * dy[ch] * 2 * (x[at] - mean) / static_cast<double>(m - 1);
          }
      }
      flops_backward_ += 3 * n + c;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(dr));
      return;
    }
    case OpKind::kSlice: {
      // dx = dy where the slice took x's elements, 0 elsewhere.
      const int axis = static_cast<int>(op.ints[0]);
      int64_t inner = 1;
      for (int i = axis + 1; i < xs.rank(); ++i) inner *= xs.dim(i);
      const int64_t len = op.ints[2], size = xs.dim(axis);
      Tensor dx = NewGradient(xs);
      for (int64_t o = 0; o < dy_tensor.num_elements(); ++o) {
        const int64_t q = o % inner, j = (o / inner) % len, p = o / inner / len;
        dx.f64()[(p * size + op.ints[1] + j) * inner + q] = dy[o];
      }
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kState:
    case OpKind::kName: {
      // The identity: dx = dy.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i];
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSoftmax: {
      // Back through the row's steps (m = max x, e_j = exp(x_j - m),
      // s = sum_j e_j, y_j = e_j / s), from x, not from the closed form:
      //   through y_j = e_j / s:  de_j = dy_j / s,  ds = -sum_j dy_j e_j / s^2
      //   through s = sum e:      de_j += ds
      //   through e_j = exp(..):  dx_j = de_j e_j
      // m's path contributes sum_j dm e_j (dy_j / s - sum_l dy_l e_l / s^2),
      // which is exactly zero (y does not depend on the shift), so it is left out.
      Tensor dx = NewGradient(xs);
      std::vector<double> ex(cols);
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const double* dyr = dy + r * cols;
        double m = xr[0];
        for (int64_t j = 1; j < cols; ++j) m = xr[j] > m ? xr[j] : m;
        double s = 0;
        for (int64_t j = 0; j < cols; ++j) {
          ex[j] = std::exp(xr[j] - m);
          s += ex[j];
        }
        double ds = 0;
        for (int64_t j = 0; j < cols; ++j) ds -= dyr[j] * ex[j] / (s * s);
        for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = (dyr[j] / s + ds) * ex[j];
      }
      flops_backward_ += 9 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kLayerNorm: {
      // Back through the row's steps (mu = sum x / C, d_j = x_j - mu,
      // v = sum d_j^2 / C, r = (v + eps)^(-1/2), xh_j = d_j r,
      // y_j = xh_j gamma_j + beta_j):
      //   dbeta_j += dy_j,  dgamma_j += dy_j xh_j        (summed over rows)
      //   dxh_j = dy_j gamma_j
      //   through xh_j = d_j r:    dd_j = dxh_j r,  dr = sum_j dxh_j d_j
      //   through r:               dv = dr * (-1/2) (v + eps)^(-3/2)
      //   through v:               dd_j += dv * 2 d_j / C
      //   through d_j = x_j - mu:  dx_j = dd_j,  dmu = -sum_j dd_j
      //   through mu:              dx_j += dmu / C
      const double* gamma = slots_[e.inputs[1]].f64();
      Tensor dx = NewGradient(xs);
      Tensor dgamma = NewGradient(slots_[e.inputs[1]].shape());
      Tensor dbeta = NewGradient(slots_[e.inputs[2]].shape());
      const double c = static_cast<double>(cols);
      std::vector<double> d(cols), dd(cols);
      for (int64_t r = 0; r < rows; ++r) {
        const double* xr = x + r * cols;
        const double* dyr = dy + r * cols;
        double mu = 0;
        for (int64_t j = 0; j < cols; ++j) mu += xr[j];
        mu /= c;
        double v = 0;
        for (int64_t j = 0; j < cols; ++j) {
          d[j] = xr[j] - mu;
          v += d[j] * d[j];
        }
        v /= c;
        const double rs = 1.0 / std::sqrt(v + Kernels::kLayerNormEps);
        double drs = 0;
        for (int64_t j = 0; j < cols; ++j) {
          dbeta.f64()[j] += dyr[j];
          dgamma.f64()[j] += dyr[j] * d[j] * rs;
          const double dxh = dyr[j] * gamma[j];
          dd[j] = dxh * rs;
          drs += dxh * d[j];
        }
        const double dv = drs * -0.5 * rs * rs * rs;
        double dmu = 0;
        for (int64_t j = 0; j < cols; ++j) {
          dd[j] += dv * 2.0 * d[j] / c;
          dmu -= dd[j];
        }
        for (int64_t j = 0; j < cols; ++j) dx.f64()[r * cols + j] = dd[j] + dmu / c;
      }
      flops_backward_ += 20 * n;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(dgamma));
      Contribute(e, 2, std::move(dbeta));
      return;
    }
    case OpKind::kGelu: {
      // y = x g(x) / 2 with g = 1 + tanh(u), u = c (x + a x^3):
      //   dy/dx = g / 2 + x / 2 * (1 - tanh(u)^2) * c (1 + 3 a x^2).
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        const double t = std::tanh(kGeluC * (x[i] + kGeluA * x[i] * x[i] * x[i]));
        const double du = kGeluC * (1.0 + 3.0 * kGeluA * x[i] * x[i]);
        dx.f64()[i] = dy[i] * (0.5 * (1.0 + t) + 0.5 * x[i] * (1.0 - t * t) * du);
      }
      flops_backward_ += 2 * n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSub: {
      // y = a - b: da = dy, db = -dy.
      Tensor da = NewGradient(xs);
      Tensor db = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) {
        da.f64()[i] = dy[i];
        db.f64()[i] = -dy[i];
      }
      flops_backward_ += n;
      Contribute(e, 0, std::move(da));
      Contribute(e, 1, std::move(db));
      return;
    }
    case OpKind::kLog: {
      // y = ln x: dx = dy / x.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i] / x[i];
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kExp: {
      // y = e^x: dx = dy e^x.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i] * std::exp(x[i]);
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kNeg: {
      // y = -x: dx = -dy.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = -dy[i];
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kScale: {
      // y = c x: dx = c dy.
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = op.scalar * dy[i];
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kTranspose: {
      // A permutation: each x element's adjoint is its image's, dx[b,i,j] = dy[b,j,i].
      const int r = xs.rank() - 2;
      const int64_t batch = r == 1 ? xs.dim(0) : 1, m = xs.dim(r), c = xs.dim(r + 1);
      Tensor dx = NewGradient(xs);
      for (int64_t t = 0; t < batch; ++t) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < c; ++j) dx.f64()[At(t, i, j, m, c)] = dy[At(t, j, i, c, m)];
        }
      }
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kSplitHeads: {
      // A permutation: dx[flat] = dy[split] over the same index map.
      const int64_t batch = op.ints[0], heads = op.ints[1];
      Tensor dx = NewGradient(xs);
      ForEachHeadElement(batch, heads, xs.dim(0) / batch, xs.dim(1) / heads,
                         [&](int64_t flat, int64_t split) { dx.f64()[flat] = dy[split]; });
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kMergeHeads: {
      // The inverse permutation: dx[split] = dy[flat].
      const int64_t batch = op.ints[0];
      Tensor dx = NewGradient(xs);
      ForEachHeadElement(batch, xs.dim(0) / batch, xs.dim(1), xs.dim(2),
                         [&](int64_t flat, int64_t split) { dx.f64()[split] = dy[flat]; });
      Contribute(e, 0, std::move(dx));
      return;
    }
    case OpKind::kBiasAdd: {
      // y[r,j] = x[r,j] + b[j]: dy/dx[r,j] = 1, so dx = dy; b[j] reaches
      // every row's column j, so db[j] = sum_r dy[r,j].
      Tensor dx = NewGradient(xs);
      for (int64_t i = 0; i < n; ++i) dx.f64()[i] = dy[i];
      Tensor db = NewGradient(Shape({cols}));
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < cols; ++j) db.f64()[j] += dy[r * cols + j];
      }
      flops_backward_ += n;
      Contribute(e, 0, std::move(dx));
      Contribute(e, 1, std::move(db));
      return;
    }
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      break;
  }
  throw Error(StrCat("oracle: no rule for op kind ", static_cast<int>(op.kind), " (",
                     Program::Describe(op), ")"));
}

void PlainReverseMode::Contribute(const Entry& e, int input, Tensor contribution) {
  if (captured_ != nullptr) {
    (*captured_)[input] = std::move(contribution);
    return;
  }
  if (options_.mutate_contribution) {
    options_.mutate_contribution(*e.op, e.slice ? e.scan_input : input, contribution);
  }
  const int slot = e.inputs[input];
  auto found = adjoints_.find(slot);
  if (e.slice) {
    // Into slice `step` of the stacked input's adjoint.
    if (found == adjoints_.end()) {
      found = adjoints_.emplace(slot, NewGradient(slots_[slot].shape())).first;
    }
    double* to = found->second.f64() + e.step * contribution.num_elements();
    for (int64_t i = 0; i < contribution.num_elements(); ++i) to[i] += contribution.f64()[i];
    flops_backward_ += contribution.num_elements();
    return;
  }
  if (found == adjoints_.end()) {
    adjoints_.emplace(slot, std::move(contribution));
    return;
  }
  double* to = found->second.f64();
  for (int64_t i = 0; i < contribution.num_elements(); ++i) to[i] += contribution.f64()[i];
  flops_backward_ += contribution.num_elements();
}

// ---------------------------------------------------------------------------
// The gradients' rounding magnitudes (OracleRoundingMagnitudes, oracle.h):
// the backward pass is sums and products too, and an adjoint that cancels
// (a sum over a batch, a row's softmax) rounds relative to its terms, not to
// its small result. M(dx) is built from the adjoint dy of the output and its
// magnitude M(dy) (at least |dy|; 1 for the seed), by the forward rules'
// reasoning applied to each vector-Jacobian product:
// - A product of the adjoint and an input (matmul, mul, conv2d): as the
//   forward product, the terms' absolute values B(|dy|, |v|) plus the
//   errors of dy and of v carried in quadrature.
// - A single term per element, or a sum of terms of one sign (the
//   elementwise ops, the selections, the layout changes, the sums and their
//   broadcasts): the same product on M(dy), in absolute value. A smooth
//   elementwise op also carries its input's error through its derivative,
//   |dy| |f''(x)| M(x), f'' by a central difference of the rule itself. A
//   selection's choice (relu, max_pool2d) is held fixed.
// - The ops over a row or a channel whose product subtracts a mean (softmax,
//   log_softmax, cross-entropy, the norms): each term's absolute value, the
//   subtraction made an addition. The inputs' own errors are not carried
//   there (first order they move the terms, not their count).
// Contributions to one value add up. An estimate that decides a tolerance,
// as the forward rules are; never below the gradient's own |value|.

std::vector<Tensor> PlainReverseMode::VjpWith(
    const Entry& e, const std::function<Tensor(const Tensor&, const Tensor&)>& substitute,
    const Tensor& dy) {
  std::vector<Tensor> saved;
  std::map<int, bool> replaced;  // a slot read twice (mul(x, x)) is replaced once
  for (int slot : e.inputs) {
    saved.push_back(slots_[slot]);
    if (integer_[slot] || replaced[slot]) continue;
    replaced[slot] = true;
    slots_[slot] = substitute(slots_[slot], mags_[slot]);
  }
  std::vector<Tensor> out(e.inputs.size());
  const int64_t flops = flops_backward_;
  captured_ = &out;
  try {
    Vjp(e, dy);
  } catch (...) {
    captured_ = nullptr;
    for (size_t k = 0; k < e.inputs.size(); ++k) slots_[e.inputs[k]] = saved[k];
    throw;
  }
  captured_ = nullptr;
  flops_backward_ = flops;  // the magnitudes are no part of the run's work
  for (size_t k = 0; k < e.inputs.size(); ++k) slots_[e.inputs[k]] = saved[k];
  return out;
}

void PlainReverseMode::MagnitudeVjp(const Entry& e, const Tensor& dy, const Tensor& mdy) {
  const auto map = [&](const Tensor& t, const auto& f) {
    Tensor r = Tensor::Zeros(DType::kF64, t.shape(), tracker_, Category::kGradients);
    for (int64_t i = 0; i < t.num_elements(); ++i) r.f64()[i] = f(t.f64()[i], i);
    return r;
  };
  const auto add = [&](int slot, const Tensor& m, int64_t step) {
    auto found = adjoint_magnitudes_.find(slot);
    if (found == adjoint_magnitudes_.end()) {
      found = adjoint_magnitudes_
                  .emplace(slot, Tensor::Zeros(DType::kF64, slots_[slot].shape(), tracker_,
                                               Category::kGradients))
                  .first;
    }
    double* to = found->second.f64() + (step >= 0 ? step * m.num_elements() : 0);
    for (int64_t i = 0; i < m.num_elements(); ++i) to[i] += std::abs(m.f64()[i]);
  };
  if (e.slice) {  // a step's slice of a stacked input: its magnitude goes to slice `step`
    add(e.inputs[0], mdy, e.step);
    return;
  }
  const Op& op = *e.op;
  const auto same = [](const Tensor& v, const Tensor&) { return v; };
  std::vector<Tensor> m(e.inputs.size());
  switch (op.kind) {
    case OpKind::kMatMul:
    case OpKind::kMul:
    case OpKind::kConv2d: {
      const Tensor abs_dy = map(dy, [](double v, int64_t) { return std::abs(v); });
      const Tensor sq_dy = map(dy, [](double v, int64_t) { return v * v; });
      const Tensor sq_mdy = map(mdy, [](double v, int64_t) { return v * v; });
      const auto abs_v = [&](const Tensor& v, const Tensor&) {
        return map(v, [](double x, int64_t) { return std::abs(x); });
      };
      const auto sq_v = [&](const Tensor& v, const Tensor&) {
        return map(v, [](double x, int64_t) { return x * x; });
      };
      const auto sq_m = [&](const Tensor&, const Tensor& mv) {
        return map(mv, [](double x, int64_t) { return x * x; });
      };
      const std::vector<Tensor> terms = VjpWith(e, abs_v, abs_dy);
      const std::vector<Tensor> via_dy = VjpWith(e, sq_v, sq_mdy);
      const std::vector<Tensor> via_v = VjpWith(e, sq_m, sq_dy);
      for (size_t k = 0; k < m.size(); ++k) {
        if (!terms[k].defined()) continue;
        m[k] = map(terms[k], [&](double t, int64_t i) {
          return std::abs(t) + std::sqrt(std::abs(via_dy[k].f64()[i]) + std::abs(via_v[k].f64()[i]));
        });
      }
      break;
    }
    case OpKind::kSin:
    case OpKind::kCos:
    case OpKind::kSquare:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kGelu:
    case OpKind::kGeluErf:
    case OpKind::kSilu: {
      // |f'(x)| M(dy) + |dy| |f''(x)| M(x): f''(x) |dy| by a central
      // difference of the rule, at a step that keeps x's sign (log).
      m = VjpWith(e, same, mdy);
      const Tensor abs_dy = map(dy, [](double v, int64_t) { return std::abs(v); });
      const Tensor& xv = slots_[e.inputs[0]];
      const Tensor step = map(xv, [](double x, int64_t) {
        return x != 0 ? std::min(1e-5 * std::max(std::abs(x), 1e-3), std::abs(x) / 2) : 1e-8;
      });
      const auto shifted = [&](double sign) {
        return [&, sign](const Tensor& v, const Tensor&) {
          return map(v, [&](double x, int64_t i) { return x + sign * step.f64()[i]; });
        };
      };
      const Tensor up = VjpWith(e, shifted(1), abs_dy)[0];
      const Tensor down = VjpWith(e, shifted(-1), abs_dy)[0];
      const double* mx = mags_[e.inputs[0]].f64();
      m[0] = map(m[0], [&](double t, int64_t i) {
        const double carried = std::abs(up.f64()[i] - down.f64()[i]) / (2 * step.f64()[i]) * mx[i];
        return std::abs(t) + (std::isfinite(carried) ? carried : 0.0);
      });
      break;
    }
    case OpKind::kRelu:
    case OpKind::kMaxPool2d:
    case OpKind::kDropout:
    case OpKind::kMaskedFill:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kNeg:
    case OpKind::kScale:
    case OpKind::kSum:
    case OpKind::kBiasAdd:
    case OpKind::kGlobalAvgPool:
    case OpKind::kEmbedding:
    case OpKind::kName:
    case OpKind::kState:
    case OpKind::kSlice:
    case OpKind::kReshape:
    case OpKind::kPermute:
    case OpKind::kTranspose:
    case OpKind::kSplitHeads:
    case OpKind::kMergeHeads:
    case OpKind::kBatchNormRunningMean:
    case OpKind::kBatchNormRunningVar:
      m = VjpWith(e, same, mdy);
      break;
    case OpKind::kSoftmax:
    case OpKind::kTopKSoftmax:
    case OpKind::kLogSoftmax: {
      // softmax: dx_j = y_j (dy_j - sum_l y_l dy_l), as y_j (M_j + sum_l
      // y_l M_l); log_softmax: dx_j = dy_j - p_j sum_l dy_l, as M_j + p_j
      // sum_l M_l (p = e^y).
      const bool log = op.kind == OpKind::kLogSoftmax;
      const Tensor& yv = slots_[e.output];
      const int64_t cols = yv.shape().rank() > 0 ? yv.shape().dim(yv.shape().rank() - 1) : 1;
      m[0] = map(yv, [](double, int64_t) { return 0.0; });
      for (int64_t r = 0; cols > 0 && r < yv.num_elements() / cols; ++r) {
        const double* y = yv.f64() + r * cols;
        const double* md = mdy.f64() + r * cols;
        double total = 0;
        for (int64_t j = 0; j < cols; ++j) total += (log ? 1.0 : y[j]) * md[j];
        for (int64_t j = 0; j < cols; ++j) {
          m[0].f64()[r * cols + j] = log ? md[j] + std::exp(y[j]) * total : y[j] * (md[j] + total);
        }
      }
      break;
    }
    case OpKind::kCrossEntropy: {
      // dx_rj = (p_rj - [j == t_r]) dy / N, as (p_rj + [j == t_r]) M(dy) / N.
      const Tensor& xv = slots_[e.inputs[0]];
      const int64_t cols = xv.shape().dim(1), rows = xv.shape().dim(0);
      m[0] = map(xv, [](double, int64_t) { return 0.0; });
      for (int64_t r = 0; r < rows; ++r) {
        const double* x = xv.f64() + r * cols;
        const double lse = RowLogSumExp(x, cols);
        const int64_t t = Index(op, slots_[e.inputs[1]], r, cols);
        for (int64_t j = 0; j < cols; ++j) {
          m[0].f64()[r * cols + j] =
              (std::exp(x[j] - lse) + (j == t ? 1.0 : 0.0)) * mdy.f64()[0] / static_cast<double>(rows);
        }
      }
      break;
    }
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm:
    case OpKind::kBatchNorm: {
      // Per group (a row; a channel's N H W for batch_norm), g = dy gamma:
      // dx = (g - mean(g) - xhat mean(g xhat)) / std (rms_norm: without
      // mean(g)), as (M(g) + mean(M(g)) + |xhat| mean(M(g) |xhat|)) / std;
      // dgamma = sum dy xhat and dbeta = sum dy, as sums of M(dy) |xhat| and
      // of M(dy).
      const bool rms = op.kind == OpKind::kRmsNorm;
      const bool by_channel = op.kind == OpKind::kBatchNorm;
      const Tensor& xv = slots_[e.inputs[0]];
      const double* x = xv.f64();
      const double* gamma = slots_[e.inputs[1]].f64();
      const double* md = mdy.f64();
      m[0] = map(xv, [](double, int64_t) { return 0.0; });
      m[1] = map(slots_[e.inputs[1]], [](double, int64_t) { return 0.0; });
      if (!rms) m[2] = map(slots_[e.inputs[2]], [](double, int64_t) { return 0.0; });
      const double eps = op.kind == OpKind::kLayerNorm ? Kernels::kLayerNormEps : op.scalar;
      const std::vector<std::vector<int64_t>> groups = NormGroups(op, xv.shape());
      for (int64_t grp = 0; grp < static_cast<int64_t>(groups.size()); ++grp) {
        const std::vector<int64_t>& at = groups[grp];
        const double count = static_cast<double>(at.size());
        double mean = 0, sq = 0;
        for (int64_t i : at) mean += x[i];
        mean = rms ? 0 : mean / count;
        for (int64_t i : at) sq += (x[i] - mean) * (x[i] - mean);
        const double std = std::sqrt(sq / count + eps);
        double mean_g = 0, mean_gx = 0;
        for (size_t k = 0; k < at.size(); ++k) {
          const int64_t i = at[k], gi = by_channel ? grp : static_cast<int64_t>(k);
          const double g = md[i] * std::abs(gamma[gi]);
          mean_g += g / count;
          mean_gx += g * std::abs(x[i] - mean) / std / count;
        }
        for (size_t k = 0; k < at.size(); ++k) {
          const int64_t i = at[k], gi = by_channel ? grp : static_cast<int64_t>(k);
          const double xhat = std::abs(x[i] - mean) / std;
          m[0].f64()[i] = (md[i] * std::abs(gamma[gi]) + (rms ? 0 : mean_g) + xhat * mean_gx) / std;
          m[1].f64()[gi] += md[i] * xhat;
          if (!rms) m[2].f64()[gi] += md[i];
        }
      }
      break;
    }
    case OpKind::kCheckpoint:
    case OpKind::kScan:
    case OpKind::kChain:
      throw Error(StrCat("oracle: no gradient magnitude rule for ", Program::Describe(op)));
  }
  for (size_t k = 0; k < m.size(); ++k) {
    if (m[k].defined() && !integer_[e.inputs[k]]) add(e.inputs[k], m[k], -1);
  }
}

void PlainReverseMode::Record(const char* phase, const Entry& e) {
  if (schedule_ == nullptr) return;
  schedule_->push_back(StrCat(phase, " ", Program::Describe(*e.op),
                              e.slice ? StrCat(" step ", e.step, " of input ", e.scan_input) : "",
                              " -> ", slots_[e.output].TypeString()));
}

// Every value the list keeps: the arguments, then one line per op and type
// (the steps of a scan stacked into one). Views (a scan step's slice) share
// their stacked input's storage and are not counted again.
std::vector<Residual> PlainReverseMode::Residuals(const Program& program, int64_t* bytes) const {
  std::vector<Residual> out;
  for (int i = 0; i < program.num_params(); ++i) {
    Residual r;
    r.type = slots_[i].TypeString();
    r.source = StrCat("from the argument ", program.param_names[i]);
    r.bytes = slots_[i].bytes();
    r.is_argument = true;
    out.push_back(r);
  }
  *bytes = 0;
  std::map<std::string, size_t> line;  // source and type -> index in out
  for (const Entry& e : list_) {
    if (e.slice) continue;
    const Tensor& t = slots_[e.output];
    const std::string source = StrCat("output of ", Program::Describe(*e.op));
    const std::string key = StrCat(source, "|", t.TypeString());
    auto found = line.find(key);
    if (found == line.end()) {
      line.emplace(key, out.size());
      Residual r;
      r.type = t.TypeString();
      r.source = source;
      r.bytes = t.bytes();
      out.push_back(r);
    } else {
      Residual& r = out[found->second];
      r.bytes += t.bytes();
      r.count += 1;
      r.type =
          StrCat("f64[", r.count, t.shape().rank() > 0 ? "," : "", t.shape().ToString().substr(1));
    }
    *bytes += t.bytes();
  }
  return out;
}

}  // namespace

OracleMagnitudes OracleRoundingMagnitudes(const Program& program, const std::vector<Tensor>& args,
                                          const std::vector<int>& wrt) {
  OracleOptions options;
  PlainReverseMode mode(options);
  OracleMagnitudes out;
  mode.TrackMagnitudes(&out);
  mode.Run(program, args, wrt);
  return out;
}

Result OracleValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                          const std::vector<int>& wrt, const OracleOptions& options) {
  PlainReverseMode reverse_mode(options);
  return reverse_mode.Run(program, args, wrt);
}

Result OracleEngine::ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                                  const std::vector<int>& wrt, const RunOptions& options) {
  if (options.plan_only) {
    throw Error(StrCat("oracle: program ", program.name,
                       ": the oracle makes no plan (RunOptions::plan_only); it only runs"));
  }
  OracleOptions oracle_options;
  oracle_options.max_memory_bytes = options.max_memory_bytes;
  oracle_options.record_schedule = options.record_schedule;
  oracle_options.on_tracker = options.on_tracker;
  return OracleValueAndGrad(program, args, wrt, oracle_options);
}

}  // namespace remat
