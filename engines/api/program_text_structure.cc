// How a checkpoint, scan or chain is checked against its body
// (program_text_structure.h).
#include "engines/api/program_text_structure.h"

#include <vector>

#include "engines/api/error.h"
#include "engines/api/program_text_syntax.h"

namespace remat {
namespace program_text {
namespace {

// A chain's body is its blocks (program.h): checkpoint ops; block 0 reads
// body parameters, block i > 0 block i-1's output once and otherwise
// parameters; the body returns the last block's output.
void CheckChain(const SourceErrors& errors, const Program& body, const Token& op_token,
                const std::string& where) {
  if (body.ops.empty()) {
    errors.Fail(op_token, StrCat("the body of ", where, " has no blocks; expected checkpoint ops"));
  }
  for (size_t k = 0; k < body.ops.size(); ++k) {
    const Op& block = body.ops[k];
    if (block.kind != OpKind::kCheckpoint) {
      errors.Fail(op_token,
                  StrCat("block ", k, " of the body of ", where, " is a ", OpKindName(block.kind),
                         "; expected a chain's blocks to be "
                         "checkpoint ops"));
    }
    int carries = 0;
    for (int v : block.inputs) {
      if (v < body.num_params()) continue;
      if (k > 0 && v == body.ops[k - 1].output) {
        ++carries;
        continue;
      }
      errors.Fail(op_token, StrCat("block ", k, " of the body of ", where,
                                   " reads the output of a block other than the one before it; "
                                   "expected the previous block's output and body parameters"));
    }
    if (k > 0 && carries != 1) {
      errors.Fail(op_token, StrCat("block ", k, " of the body of ", where, " reads block ", k - 1,
                                   "'s output ", carries, " times; expected once"));
    }
  }
  if (body.output != body.ops.back().output) {
    errors.Fail(op_token,
                StrCat("the body of ", where,
                       " returns a value other than its last block's; expected that one"));
  }
}

}  // namespace

// The output shape of a checkpoint, scan or chain from its inputs and its
// body, checking that they fit together.
Shape StructuralShape(const SourceErrors& errors, const Program& p, const Op& op,
                      const Program& body, const Token& op_token, const Token& params_at,
                      const std::string& where) {
  std::vector<Shape> expected;
  for (int v : op.inputs) expected.push_back(p.shapes[v]);
  if (op.kind == OpKind::kScan) {
    if (op.inputs.size() < static_cast<size_t>(2 + op.num_consts)) {
      errors.Fail(op_token, StrCat("wrong arity: scan takes a carry, at least one xs and its ",
                                   op.num_consts, " consts, got ", op.inputs.size(),
                                   " inputs; expected scan(%CARRY, %XS, ..., %CONST, ...)"));
    }
    const size_t num_xs = op.inputs.size() - 1 - op.num_consts;
    for (size_t i = 1 + num_xs; i < expected.size(); ++i) {
      if (p.dtype(op.inputs[i]) == DType::kF32) {
        errors.Fail(op_token, StrCat("dtype mismatch: const ", i - num_xs, " of scan (input ", i,
                                     ") is ", TypeText(expected[i]),
                                     "; a scan's consts are integer values, which no step "
                                     "differentiates (stack a float loop invariant as an xs)"));
      }
    }
    const Shape first = expected[1];
    for (size_t i = 1; i <= num_xs; ++i) {
      if (expected[i].rank() == 0 || first.rank() == 0 || expected[i].dim(0) != first.dim(0)) {
        errors.Fail(op_token, StrCat("shape mismatch: every xs of scan needs the same leading "
                                     "(scanned) axis; got ",
                                     Types(p, op.inputs)));
      }
      expected[i] = expected[i].DropLeading();
    }
    if (first.dim(0) == 0) {
      errors.Fail(op_token, StrCat("scan over zero steps (xs ", TypeText(first),
                                   "); expected a leading axis of at least 1"));
    }
  }
  if (body.num_params() != static_cast<int>(expected.size())) {
    errors.Fail(params_at, StrCat("wrong arity: the body of ", where, " has ", body.num_params(),
                                  " parameters for ", expected.size(),
                                  op.kind == OpKind::kScan
                                      ? " (the carry, one slice of each xs and each const)"
                                      : " inputs",
                                  "; expected one parameter per input"));
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (body.dtype(static_cast<int>(i)) != p.dtype(op.inputs[i])) {
      errors.Fail(params_at,
                  StrCat("dtype mismatch: parameter ", i, " of the body of ", where, " is ",
                         TypeText(body.shapes[i], body.dtype(static_cast<int>(i))),
                         " but its input is ", DTypeName(p.dtype(op.inputs[i]))));
    }
    if (body.shapes[i] != expected[i]) {
      const DType dtype = p.dtype(op.inputs[i]);  // the body's is the same (checked above)
      errors.Fail(params_at, StrCat("shape mismatch: parameter ", i, " of the body of ", where,
                                    " is ", TypeText(body.shapes[i], dtype), " but its input ",
                                    IsScanConst(op, i)                  ? "const "
                                    : op.kind == OpKind::kScan && i > 0 ? "slice "
                                                                        : "",
                                    "is ", TypeText(expected[i], dtype)));
    }
  }
  const Shape out = body.shapes[body.output];
  if (body.dtype(body.output) != DType::kF32) {
    errors.Fail(op_token, StrCat("dtype mismatch: the body of ", where, " returns an ",
                                 DTypeName(body.dtype(body.output)), " value; a body returns f32"));
  }
  if (op.kind == OpKind::kScan && out != expected[0]) {
    errors.Fail(op_token, StrCat("shape mismatch: the body of ", where, " returns ", TypeText(out),
                                 " but the carry is ", TypeText(expected[0]),
                                 "; expected a carry of the carry's shape"));
  }
  if (op.kind == OpKind::kChain) CheckChain(errors, body, op_token, where);
  return out;
}

}  // namespace program_text
}  // namespace remat
