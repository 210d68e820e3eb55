// ReverseMode: reverse-mode differentiation of a Program by the rules of
// engines/api/rules.h on one set of Kernels. The forward pass records a tape
// of exactly the residuals each op's backward rule reads; the backward pass
// walks the ops in reverse and frees each op's residuals as soon as its rule
// has run.
//
// This is the store-everything baseline: checkpoint regions are run inline
// and their policies ignored; a scan keeps every step's residuals.
//
// The order of cotangent accumulation is fixed, and any engine that must
// match this one bit for bit must use the same order: ops are visited in
// reverse program order (a scan's steps from last to first); within an op,
// input cotangents are added in input order; a value's cotangent is the
// first contribution, then each later one added with Kernels::Add
// (acc = acc + contribution, out of place).
#ifndef REMAT_ENGINES_EAGER_REVERSE_MODE_H_
#define REMAT_ENGINES_EAGER_REVERSE_MODE_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

class ReverseMode {
 public:
  // `kernels` is used for one run; it is bound to the run's tracker.
  explicit ReverseMode(Kernels* kernels) : kernels_(kernels) {}

  // value_and_grad of `program` (see engines/api/engine.h for the contract).
  Result Run(const Program& program, const std::vector<Tensor>& args,
             const std::vector<int>& wrt, const RunOptions& options);

 private:
  struct Tape;
  struct OpTape {
    std::vector<Tensor> inputs;  // saved inputs; undefined where not read
    Tensor output;               // saved output, when read
    std::vector<bool> needs;     // which input cotangents the backward computes
    std::unique_ptr<Tape> body;  // checkpoint: the body's tape
    std::vector<Tape> steps;     // scan: one tape per step
  };
  struct Tape {
    std::vector<OpTape> ops;
  };

  // Runs `program` on `inputs`; records residuals in `tape` for the inputs
  // whose needs[i] is true. `where` prefixes the tracker's site (scan steps).
  Tensor Forward(const Program& program, std::vector<Tensor> inputs,
                 const std::vector<bool>& needs, Tape* tape, const std::string& where);
  // Returns the cotangent of each input with needs[i] true, consuming `tape`.
  std::vector<Tensor> Backward(const Program& program, Tape* tape, Tensor dout,
                               const std::vector<bool>& needs, const std::string& where);

  Tensor ForwardScan(const Program& program, const Op& op, const std::vector<Tensor>& in,
                     const std::vector<bool>& needs, OpTape* op_tape, const std::string& where);
  std::vector<Tensor> BackwardScan(const Program& program, const Op& op, OpTape* op_tape,
                                   const Tensor& dout, const std::vector<bool>& needs,
                                   const std::string& where);

  void Accumulate(Tensor* acc, const Tensor& contribution);
  // Residuals held by `tape`, for the listing (one entry per buffer).
  void CollectResiduals(const Tape& tape, std::vector<Tensor>* out) const;
  std::vector<Residual> ListResiduals(const Tape& tape, int64_t* residual_bytes) const;

  Kernels* kernels_;
  std::shared_ptr<MemoryTracker> tracker_;
  // Where each live buffer came from, for the residual listing.
  std::unordered_map<const Buffer*, std::string> origin_;
  std::unordered_map<const Buffer*, Tensor> arguments_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_EAGER_REVERSE_MODE_H_
