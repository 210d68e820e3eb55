// Program: the SSA graph IR every engine runs. A Program has parameters,
// ops in topological order, and one output. Each op produces one value;
// values are numbered 0..num_values-1 and parameters come first. Shapes are
// known for every value (the tracer checks them); dtypes are the engine's
// (f32 engines run in f32, the oracle and the reference in f64).
//
// Structural ops carry a body Program:
// - kCheckpoint: the body's parameters are the op's inputs, its output the
//   op's output; `policy` says what inside it may be saved (jax.checkpoint).
// - kScan: inputs are [carry, xs_1, ..., xs_k, c_1, ..., c_m], each xs with
//   leading axis L, and m = Op::num_consts loop-invariant inputs (what a
//   lax.scan body closes over: a causal mask); the body maps (carry, x_1[i],
//   ..., x_k[i], c_1, ..., c_m) to the next carry, and the op's output is the
//   carry after L steps (lax.scan with no per-step outputs). A const is an
//   integer value (never differentiated, so no step adds to its gradient):
//   a float loop invariant is stacked L times as an xs.
// - kChain: a chain of checkpointed blocks grouped by ApplySchedule so that a
//   schedule can reverse it (a block is to a chain what a step is to a scan).
//   The body's parameters are the op's inputs (parameter 0 is block 0's first
//   input); the body's ops are the blocks, each a kCheckpoint: every input of
//   block 0 is a body parameter; block i > 0 reads block i-1's output (the
//   carry) once, and its other inputs are body parameters. The body's output is
//   the last block's. Run inline it is exactly its blocks.
#ifndef REMAT_ENGINES_API_PROGRAM_H_
#define REMAT_ENGINES_API_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/policy.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {

// The primitives first, in the order of the OpDef registry (op_def.h, which
// defines each: its name, shape, rules and FLOPs), then the structural ops.
enum class OpKind {
  kMatMul,  // attrs: none; rank 2 or batched rank 3
  kRelu,
  kSin,
  kCos,
  kSquare,
  kAdd,   // y = a + b, numpy broadcasting (op_defs_broadcast.cc)
  kMul,   // y = a * b, numpy broadcasting
  kSum,   // to a rank-0 value; or over attr `ints` = the axes, `scalar` 1 = keepdim (text: keepdim=1)
  kName,  // identity carrying a checkpoint_name label (attr `name`)
  kSoftmax,     // over the last axis
  kLayerNorm,   // inputs x (..., C), gamma (C), beta (C); over the last axis, eps 1e-5
  kGelu,        // tanh form
  kScale,       // y = c * x; attr `scalar` = c
  kTranspose,   // swaps the last two axes; rank 2 or 3
  kSplitHeads,  // (B*S, D) -> (B*H, S, D/H); attr `ints` = {B, H}
  kMergeHeads,  // (B*H, S, Dh) -> (B*S, H*Dh); attr `ints` = {B}
  kBiasAdd,     // inputs x (..., C), b (C): y = x + b on every row (a layer's bias)
  kNeg,         // y = -x
  kSub,         // y = a - b, numpy broadcasting
  kExp,         // y = e^x
  kLog,         // y = ln x (x > 0)
  kDropout,     // inputs x, seed (i32[]); attrs `scalar` = p, `ints` = {key} (op_defs_random.cc)
  kEmbedding,   // inputs table (V, D), ids (i32)
  kMaskedFill,  // inputs x, mask (i32, x's shape); attr `scalar` = the fill
  kCrossEntropy,  // inputs logits (N, C), targets (i32 (N)); mean over rows
  kSilu,        // y = x sigmoid(x)
  kRmsNorm,     // inputs x, gamma (C); attr `scalar` = eps
  kLogSoftmax,  // over the last axis
  kGeluErf,     // y = x Phi(x), erf form (PyTorch's nn.GELU())
  kReshape,     // attr `ints` = the output's dims (one element count)
  kPermute,     // attr `ints` = the permutation: output axis i is input axis ints[i]
  kTopKSoftmax,  // over the last axis, the k largest only (attr `ints` = {k}); ties: lowest index
  kConv2d,      // NCHW x, OIHW w; attr `ints` = {stride, padding} or {sh, sw, ph, pw, dh, dw, groups}
  kMaxPool2d,   // NCHW x; attr `ints` = {kernel, stride, padding}; ties: lowest index
  kGlobalAvgPool,  // (N, C, H, W) -> (N, C)
  kBatchNorm,   // training mode: inputs x, gamma, beta; attr `scalar` = eps
  kBatchNormRunningMean,  // inputs x, running mean (C); attr `scalar` = momentum
  kBatchNormRunningVar,   // inputs x, running var (C); attr `scalar` = momentum
  kState,       // y = x, the new value of the parameter named `name` (CONTRACT.md, state)
  kSlice,       // attr `ints` = {axis, start, length[, step]}: x's elements start + j step on axis
  kDiv,         // y = a / b, numpy broadcasting
  kRsqrt,       // y = 1 / sqrt(x)
  kSqrt,        // y = sqrt(x)
  kTanh,        // y = tanh(x)
  kSigmoid,     // y = 1 / (1 + e^-x)
  kPow,         // y = x^p; attr `scalar` = p
  kHardtanh,    // y = clamp(x, lo, hi); attr `ints` = {lo, hi} (relu6: {0, 6})
  kWhere,       // inputs cond (i32), a, b, broadcast together: y = cond != 0 ? a : b
  kMean,        // as kSum's attributes: the mean over the axes (all: rank 0)
  kAmax,        // as kSum's attributes: the max over the axes; gradient split among ties
  kExpand,      // attr `ints` = the output's dims: x broadcast to them (numpy's rule)
  kCat,         // inputs a, b; attr `ints` = {axis}: a then b on it
  kSelect,      // attr `ints` = {axis, index}: x[..., index, ...], the axis dropped
  kAdaptiveAvgPool2d,  // attr `ints` = {OH, OW}: (N, C, H, W) -> (N, C, OH, OW), PyTorch's windows
  kConv2dBias,  // conv2d plus a bias (O) per output channel; conv2d's `ints`
  kCheckpoint,
  kScan,
  kChain,
};
const char* OpKindName(OpKind kind);  // "matmul", "relu", ...

struct Program;

struct Op {
  OpKind kind = OpKind::kRelu;
  std::vector<int> inputs;  // value ids of the enclosing program
  int output = -1;          // value id
  std::string site;         // where it was traced: "problems/layer_loss.cc:40"
  std::string scope;        // the enclosing labelled function, e.g. "middle"
  std::string name;         // kName: the label; kState: the parameter; kCheckpoint, kScan: the region label
  std::shared_ptr<const Program> body;  // kCheckpoint, kScan, kChain
  Policy policy;                        // kCheckpoint
  double scalar = 0.0;                  // kScale: the constant c
  std::vector<int64_t> ints;            // kSplitHeads: {batch, heads}; kReshape: dims; ... (op_defs_*.cc)
  std::string schedule;                 // kScan, kChain: a schedule spec, e.g. "revolve:8" (engines/schedule)
  int num_consts = 0;                   // kScan: the trailing inputs passed whole to every step
};

// Whether input `j` of `op` is a scan's const (passed whole to every step)
// rather than a carry, an xs or an input of another op.
inline bool IsScanConst(const Op& op, size_t j) {
  return op.kind == OpKind::kScan && j + op.num_consts >= op.inputs.size() && j > 0;
}

struct Program {
  std::string name;
  std::vector<Shape> shapes;  // by value id
  // By value id: i32 for integer values (token ids, class targets, random
  // seeds), which are never differentiated. Entries missing at the end are
  // f32. Today only parameters are integers: no op yields one.
  std::vector<DType> dtypes;
  std::vector<std::string> param_names;  // parameters are values 0..n-1
  // By parameter: a data input (an image, token ids, targets, a constant
  // the exporter folded), which a program file's default --wrt leaves out
  // (ProgramFileProblem::wrt); written `x: f32[8,16] data`. Entries missing
  // at the end are false (a parameter, trained).
  std::vector<bool> data_params;
  std::vector<Op> ops;        // topological order
  int output = -1;

  int num_params() const { return static_cast<int>(param_names.size()); }
  bool is_data(int param) const {
    return param >= 0 && param < static_cast<int>(data_params.size()) && data_params[param];
  }
  int num_values() const { return static_cast<int>(shapes.size()); }
  // The op that produces `value`, or -1 for a parameter.
  int Producer(int value) const;
  DType dtype(int value) const {
    return value >= 0 && value < static_cast<int>(dtypes.size()) ? dtypes[value] : DType::kF32;
  }
  // "matmul at problems/layer_loss.cc:40 (middle)": how errors and listings
  // name an op.
  static std::string Describe(const Op& op);
  // Every checkpoint_name label in the program, nested bodies included.
  std::vector<std::string> Labels() const;
  // Counts ops of `kind`, nested bodies included (a scan body counts once).
  int CountOps(OpKind kind) const;
};

// A policy applied from the calling side, as jax.checkpoint(f, policy=...)
// does, without editing the problem: every checkpoint region of `program`
// (nested ones included) gets `policy`; a program with no checkpoint region
// is wrapped whole in one region with `policy`.
Program ApplyPolicy(const Program& program, const Policy& policy);

// `program` as the body of one checkpoint region under `policy`, its own
// regions kept inside it: jax.checkpoint(f, policy=...) around the whole
// function. `site` names the region's op in listings ("--policy").
Program WrapInCheckpoint(const Program& program, const Policy& policy, const std::string& site);

// A schedule applied from the calling side, to scans and to chains of
// blocks, without editing the problem:
// - every scan of `program` is reversed under `spec` ("every:4", "sqrt",
//   "revolve:8", "budget:256MiB"; see engines/schedule/schedule.h) by engines
//   that honour checkpoints, and the checkpoint regions inside the scans'
//   bodies are inlined (the schedule, not the body's policy, decides what is
//   kept);
// - every chain of blocks (two or more consecutive checkpoint ops, each
//   reading the previous one's output, which nothing else reads: a Python
//   loop of checkpoint(block) calls, PyTorch's nn.Sequential under
//   checkpoint_sequential) is grouped into a kChain op reversed under `spec`;
//   a block's position in the chain is its step, its own policy and nested
//   regions give way to the schedule. Chains are looked for at every level
//   outside scans.
// A program with neither is an error that says so.
// "checkpoint_every:K" is PyTorch's checkpoint_every (seed 004's
// CheckpointedTransformer): a scan's body is checkpointed at steps i with
// (i + 1) % K == 0 and runs storing everything at the others; the body's own
// checkpoint regions are kept (a body without one is wrapped in one). In a
// chain, block i stays checkpointed if (i + 1) % K == 0 and otherwise stores
// everything: it stays a region (a unit for the order of accumulation,
// CONTRACT.md 3.4) under everything_saveable, its nested regions too.
Program ApplySchedule(const Program& program, const std::string& spec);

// The K of a "checkpoint_every:K" spec, or 0 if `spec` is not one.
int64_t CheckpointEvery(const std::string& spec);

// `program` with every checkpoint region replaced by its body's ops.
Program InlineCheckpoints(const Program& program);

// Warnings for names-policies in `program` that name a label no
// checkpoint_name in the program has (a likely typo): one line each.
std::vector<std::string> PolicyWarnings(const Program& program);

// A state op's slot: the parameter it gives the new value of.
struct StateSlot {
  std::string name;  // the parameter's name, as Result::state keys it
  int param = -1;    // its index in the top-level program
  Shape shape;
};
// The state ops of `program` (nested bodies included), in program order.
// Throws remat::Error naming the op unless each names a distinct f32
// parameter of the top-level program with its input's shape, and none is
// in a scan's body (a step would update the parameter once per step).
std::vector<StateSlot> CheckStateOps(const Program& program);

// A jaxpr-like listing: parameters with types, one line per op with its site,
// bodies indented. `dtype` is printed in the types ("f32").
std::string ToString(const Program& program, const std::string& dtype = "f32");

}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_H_
