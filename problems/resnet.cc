// resnet: torchvision's ResNet with BasicBlocks (ResNet-18's layout), the
// convolutional model people checkpoint: a stem (conv K x K stride 2, batch
// norm, relu, max pooling 3 x 3 stride 2), S stages of N BasicBlocks (conv
// 3 x 3, batch norm, relu, conv 3 x 3, batch norm, the shortcut added, relu;
// the first block of stages 2.. halves the image and doubles the width, its
// shortcut a 1 x 1 stride-2 conv and batch norm), global average pooling, a
// linear head with bias, cross-entropy on integer targets. Each block is a
// checkpoint region (torch.utils.checkpoint around each BasicBlock), so the
// blocks form a chain that the schedules reverse (--schedule).
//
// Batch norm runs in training mode (the batch's statistics) and updates its
// running statistics as nn.BatchNorm2d does (momentum 0.1, the variance
// unbiased): every batch norm <m> has buffers <m>.running_mean and
// <m>.running_var, inputs that are never differentiated, and the program's
// state ops give their new values (CONTRACT.md, state): engines return them
// in Result::state, from the forward pass, however often they recompute a
// block.
//
// Inputs: x (B, 3, R, R) and targets (i32 (B), in [0, C)), not
// differentiated; conv1.weight (W, 3, K, K), bn1.weight and .bias (W); per
// block layer<s>.<b>.conv1.weight, .bn1.weight, .bn1.bias, .conv2.weight,
// .bn2.weight, .bn2.bias and, where it downsamples, .downsample.0.weight
// (1 x 1 conv), .downsample.1.weight and .bias; fc.weight (W 2^(S-1), C) and
// fc.bias (C) (torchvision's names; fc.weight is stored transposed); after
// each batch norm's bias, its .running_mean and .running_var.
// Convolution weights are uniform with Kaiming's scale sqrt(6 / fan_in);
// batch norm weights 1 +- 0.1 and biases +- 0.1.
//
// ResNet-18 (11.7M parameters) on ImageNet's shape, for dry runs:
//   --param B=32 --param R=224 --param W=64 --param S=4 --param N=2 --param K=7 --param C=1000

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "engines/api/tracer.h"
#include "problems/problems.h"

namespace remat {
namespace {

constexpr double kBatchNormEps = 1e-5;     // nn.BatchNorm2d's defaults
constexpr double kBatchNormMomentum = 0.1;

Var Conv(Var x, Var w, int64_t stride, int64_t pad) {
  return apply("conv2d", {x, w}, {.ints = {stride, pad}});
}
// nn.BatchNorm2d in training mode: `bn` = {weight, bias, running_mean,
// running_var} and `name` its module path ("layer1.0.bn1"): the running
// statistics' new values are the state of <name>.running_mean and
// <name>.running_var.
Var BatchNorm(Var x, const Var* bn, const std::string& name) {
  apply("state", {apply("batch_norm_running_mean", {x, bn[2]}, {.scalar = kBatchNormMomentum})},
        {.name = name + ".running_mean"});
  apply("state", {apply("batch_norm_running_var", {x, bn[3]}, {.scalar = kBatchNormMomentum})},
        {.name = name + ".running_var"});
  return apply("batch_norm", {x, bn[0], bn[1]}, {.scalar = kBatchNormEps});
}

// A batch norm's inputs, after its module path.
const char* const kNormInputs[] = {".weight", ".bias", ".running_mean", ".running_var"};

// BasicBlock: args = {x, conv1, bn1 (4), conv2, bn2 (4)[, downsample.0,
// downsample.1 (4)]}; `prefix` its module path ("layer1.0.").
Var BasicBlock(const std::vector<Var>& a, int64_t stride, const std::string& prefix) {
  const Var x = a[0];
  Var out = relu(BatchNorm(Conv(x, a[1], stride, 1), &a[2], prefix + "bn1"));
  out = BatchNorm(Conv(out, a[6], 1, 1), &a[7], prefix + "bn2");
  const Var shortcut =
      a.size() > 11 ? BatchNorm(Conv(x, a[11], stride, 0), &a[12], prefix + "downsample.1") : x;
  return relu(add(out, shortcut));
}

// The fan-in of a convolution or of the head, from its name: what one
// output element sums over.
int64_t FanIn(const std::string& input, const ParamValues& p) {
  const int64_t width = p.at("W"), stem = p.at("K");
  if (input == "conv1.weight") return 3 * stem * stem;
  if (input.rfind("fc.", 0) == 0) return width << (p.at("S") - 1);
  int stage = 0, block = 0;
  char rest[64] = {0};
  if (std::sscanf(input.c_str(), "layer%d.%d.%63s", &stage, &block, rest) != 3 || stage < 1) {
    return 1;
  }
  const int64_t out_width = width << (stage - 1);
  const int64_t in_width = block > 0 ? out_width : stage == 1 ? width : out_width / 2;
  const std::string what = rest;
  if (what == "conv1.weight") return in_width * 9;
  if (what == "conv2.weight") return out_width * 9;
  if (what == "downsample.0.weight") return in_width;
  return 1;
}

class ResNet : public Problem {
 public:
  std::string name() const override { return "resnet"; }
  std::string description() const override {
    return "torchvision ResNet (BasicBlock, ResNet-18's layout): conv, batch norm (training "
           "mode), relu, max pooling, S stages of N blocks (each a checkpoint region), global "
           "average pooling, linear head, cross-entropy";
  }
  std::vector<ParamSpec> params() const override {
    return {{"B", 8, 3, 1, 1 << 12, "batch"},
            {"R", 32, 16, 4, 1 << 12, "image height and width (tests: 16, so that stage 2's batch norm sees 3 x 2 x 2 values per channel, not 2: with two the normalized values are +-1 and every gradient through it a cancellation)"},
            {"W", 16, 4, 1, 1 << 12, "stage 1's width (ResNet-18: 64), doubled per stage"},
            {"S", 4, 2, 1, 8, "stages"},
            {"N", 2, 1, 1, 64, "BasicBlocks per stage (ResNet-18: 2)"},
            {"K", 3, 3, 1, 15, "the stem's kernel (ResNet-18: 7; padding K / 2)"},
            {"C", 10, 5, 2, 1 << 16, "classes"}};
  }
  Program Build(const ParamValues& p) const override {
    const int64_t batch = p.at("B"), res = p.at("R"), width = p.at("W"), stages = p.at("S");
    const int64_t blocks = p.at("N"), stem = p.at("K"), classes = p.at("C");
    std::vector<ParamDecl> params = {{"x", Shape({batch, 3, res, res})},
                                     {"targets", Shape({batch}), DType::kI32},
                                     {"conv1.weight", Shape({width, 3, stem, stem})}};
    auto norm = [&params](const std::string& path, int64_t channels) {
      for (const char* what : kNormInputs) params.push_back({path + what, Shape({channels})});
    };
    norm("bn1", width);
    // Per block: its stride, module path and the range of its inputs in
    // `params`.
    struct BlockPlan {
      int64_t stride;
      std::string prefix;
      size_t first, count;
    };
    std::vector<BlockPlan> plan;
    int64_t in_width = width;
    for (int64_t s = 0; s < stages; ++s) {
      const int64_t out_width = width << s;
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t stride = s > 0 && b == 0 ? 2 : 1;
        const bool downsample = stride != 1 || in_width != out_width;
        const std::string prefix = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
        BlockPlan bp{stride, prefix, params.size(), 0};
        params.push_back({prefix + "conv1.weight", Shape({out_width, in_width, 3, 3})});
        norm(prefix + "bn1", out_width);
        params.push_back({prefix + "conv2.weight", Shape({out_width, out_width, 3, 3})});
        norm(prefix + "bn2", out_width);
        if (downsample) {
          params.push_back({prefix + "downsample.0.weight", Shape({out_width, in_width, 1, 1})});
          norm(prefix + "downsample.1", out_width);
        }
        bp.count = params.size() - bp.first;
        plan.push_back(bp);
        in_width = out_width;
      }
    }
    const size_t fc = params.size();
    params.push_back({"fc.weight", Shape({in_width, classes})});
    params.push_back({"fc.bias", Shape({classes})});
    return Trace("resnet", params, [&](const std::vector<Var>& in) {
      Var x = relu(BatchNorm(Conv(in[0], in[2], 2, stem / 2), &in[3], "bn1"));
      x = apply("max_pool2d", {x}, {.ints = {3, 2, 1}});
      for (const BlockPlan& bp : plan) {
        std::vector<Var> args = {x};
        for (size_t i = 0; i < bp.count; ++i) args.push_back(in[bp.first + i]);
        const int64_t stride = bp.stride;
        const std::string prefix = bp.prefix;
        x = checkpoint_n(
            [stride, prefix](const std::vector<Var>& a) { return BasicBlock(a, stride, prefix); },
            args, Policy(), "block");
      }
      const Var features = apply("global_avg_pool", {x});
      const Var logits = bias_add(matmul(features, in[fc]), in[fc + 1]);
      return apply("cross_entropy", {logits, in[1]});
    });
  }
  std::vector<std::string> wrt() const override {
    return {"conv1.weight", "bn1.weight", "bn1.bias", "layer*", "fc.weight", "fc.bias"};
  }
  double InputScale(const std::string& input, const ParamValues& p) const override {
    if (input == "x") return 1.0;
    if (input.find("bn") != std::string::npos || input.find("downsample.1") != std::string::npos) {
      return 0.1;
    }
    return std::sqrt(6.0 / static_cast<double>(FanIn(input, p)));
  }
  // Batch norm weights and running variances around 1, biases and running
  // means around 0.
  double InputOffset(const std::string& input, const ParamValues&) const override {
    const bool norm = input.find("bn") != std::string::npos || input.find("downsample.1") != std::string::npos;
    const bool one = input.find(".weight") != std::string::npos || input.find(".running_var") != std::string::npos;
    return norm && one ? 1.0 : 0.0;
  }
  int64_t InputIntBound(const std::string& input, const ParamValues& p) const override {
    if (input == "targets") return p.at("C");
    return Problem::InputIntBound(input, p);
  }
};

}  // namespace

std::unique_ptr<Problem> MakeResNet() { return std::make_unique<ResNet>(); }

}  // namespace remat
