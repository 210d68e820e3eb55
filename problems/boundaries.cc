// boundaries: the contract's boundary cases put where a gradient sees them
// (CONTRACT.md R2.6 and R2.8). Engines written against the contract alone
// passed every other problem while routing a max-pool tie's gradient to the
// last of the equal taps, or keeping a dropout element with `>` rather than
// `>=`: no other problem lets a tie reach a gradient (resnet pools relu's
// output, whose ties are zeros that relu's backward zeroes anyway) or puts
// an element's random bits exactly on the threshold.
//
//   x (N, C, H, H) ─max_pool2d 3x3 stride 1 padding 1─> p
//     ─mul w─> h ─dropout(seed; P, key 1)─> d ─square─sum─> loss
// with pool, mul, dropout and square one checkpoint region, so that
// recomputing engines choose and draw twice (square's backward reads d).
//
// Ties (ties=1, the default): x is fixed by the problem (FixedInput), not
// drawn, to a quantized image of 2x2 blocks of equal values in {0.25, 0.5,
// 0.75, 1}: nearly every window's largest value is held by several taps, all
// away from zero. Each output's cotangent (its own w, times the dropout
// scale) must go to the first tap in row-major window order (the lowest
// index); x's gradient shows which tap got it. ties=0 draws x (gradcheck's
// central differences are meaningless at a tie).
//
// The threshold: the seed is fixed (kSeed) and P is the bits of the first
// element whose bits fall in [1/4, 1/2) of the range, divided by 2^32
// (exact in double), so that DropThreshold(P) equals that element's bits:
// the contract keeps it (`>=`). Both hold for every case seed.
//
// Inputs: x (N, C, H, H), w (N, C, H, H), seed (i32[]). Gradients: x, w.

#include <cmath>
#include <cstdint>
#include <string>

#include "engines/api/philox.h"
#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

constexpr int32_t kSeed = 20261206;
constexpr int64_t kDropoutKey = 1;

// The first element index whose bits under (kSeed, kDropoutKey) lie in
// [2^30, 2^31), and P = bits / 2^32 for it.
double ThresholdProbability(int64_t elements) {
  for (int64_t i = 0; i < elements; ++i) {
    const uint32_t bits = RandomBits(kSeed, kDropoutKey, i);
    if (bits >= (uint32_t{1} << 30) && bits < (uint32_t{1} << 31)) {
      return std::ldexp(static_cast<double>(bits), -32);
    }
  }
  // A quarter of all bits lie there: a run of misses this long is 2^-50
  // likely per 100 elements; the smallest image (1 element) may miss.
  return std::ldexp(static_cast<double>(RandomBits(kSeed, kDropoutKey, 0) >> 2), -32);
}

class Boundaries : public Problem {
 public:
  std::string name() const override { return "boundaries"; }
  std::string description() const override {
    return "the contract's boundaries where a gradient sees them: max pooling over an image whose "
           "windows tie away from zero, and dropout with an element's bits exactly on the "
           "threshold";
  }
  std::vector<ParamSpec> params() const override {
    return {{"N", 8, 2, 1, 1 << 16, "images"},
            {"C", 16, 3, 1, 1 << 16, "channels"},
            {"H", 32, 6, 1, 1 << 12, "the image's height and width"},
            {"ties", 1, 1, 0, 1, "1: x is a quantized image whose windows tie; 0: x is drawn"}};
  }
  Program Build(const ParamValues& p) const override {
    const Shape image({p.at("N"), p.at("C"), p.at("H"), p.at("H")});
    const double drop = ThresholdProbability(image.num_elements());
    return Trace("boundaries",
                 {{"x", image}, {"w", image}, {"seed", Shape({}), DType::kI32}},
                 [drop](const std::vector<Var>& in) {
                   const Var d = checkpoint_n(
                       [drop](const std::vector<Var>& a) {
                         const Var pooled = apply("max_pool2d", {a[0]}, {.ints = {3, 1, 1}});
                         return square(apply("dropout", {mul(pooled, a[1]), a[2]},
                                             {.scalar = drop, .ints = {kDropoutKey}}));
                       },
                       {in[0], in[1], in[2]}, Policy(), "block");
                   return sum(d);
                 });
  }
  std::vector<std::string> wrt() const override { return {"x", "w"}; }
  Tensor FixedInput(const std::string& input, const Shape& shape,
                    const ParamValues& p) const override {
    if (input == "seed") {
      Tensor seed = Tensor::Zeros(DType::kI32, shape);
      seed.i32()[0] = kSeed;
      return seed;
    }
    if (input != "x" || p.at("ties") == 0) return Tensor();
    Tensor x = Tensor::Zeros(DType::kF32, shape);
    const int64_t channels = shape.dim(1), side = shape.dim(2);
    float* out = x.f32();
    for (int64_t n = 0; n < shape.dim(0); ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t h = 0; h < side; ++h) {
          for (int64_t w = 0; w < side; ++w) {
            const int64_t level = (5 * (h / 2) + 3 * (w / 2) + 7 * c + 11 * n) % 4;
            *out++ = 0.25f * static_cast<float>(level + 1);
          }
        }
      }
    }
    return x;
  }
};

}  // namespace

std::unique_ptr<Problem> MakeBoundaries() { return std::make_unique<Boundaries>(); }

}  // namespace remat
