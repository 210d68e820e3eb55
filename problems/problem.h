// A reference problem: a traced function, its inputs and what it expects.
// Problems are defined once, against the tracer, and every engine runs them.
//
//   const Problem& p = FindProblem("layer_loss");
//   ParamValues params = ResolveParams(p, {{"d", 64}});
//   Program program = p.Build(params);
//   std::vector<Tensor> inputs = MakeInputs(p, program, params, /*seed=*/1);
//   std::vector<int> wrt = WrtIndices(p, program);
#ifndef REMAT_PROBLEMS_PROBLEM_H_
#define REMAT_PROBLEMS_PROBLEM_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

struct ParamSpec {
  std::string name;
  int64_t default_value;  // what `remat run` and the benchmarks use
  int64_t test_value;     // small, for the conformance suite
  int64_t min_value;
  int64_t max_value;
  std::string help;
};

using ParamValues = std::map<std::string, int64_t>;

class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::string name() const = 0;
  // One line: what it computes and which seed document it mirrors.
  virtual std::string description() const = 0;
  virtual std::vector<ParamSpec> params() const = 0;
  // The program for resolved parameters (see ResolveParams).
  virtual Program Build(const ParamValues& params) const = 0;
  // The inputs whose gradients the problem asks for, by name; "w*" names
  // every input whose name starts with "w", in input order.
  virtual std::vector<std::string> wrt() const = 0;
  // Inputs are drawn uniformly from [offset - scale, offset + scale).
  virtual double InputScale(const std::string& input, const ParamValues& params) const;
  // 0 unless overridden (LayerNorm scales are drawn around 1).
  virtual double InputOffset(const std::string& input, const ParamValues& params) const;
  // Integer (i32) inputs are drawn uniformly from [0, bound): by default
  // any non-negative i32 (a random seed); ids and targets override it.
  virtual int64_t InputIntBound(const std::string& input, const ParamValues& params) const {
    (void)input;
    (void)params;
    return int64_t{1} << 31;
  }
  // An input that is not drawn but fixed by the problem's definition
  // (positions 0..T-1, a causal mask), or an undefined Tensor for a drawn
  // one. Its dtype and shape must be the program's.
  virtual Tensor FixedInput(const std::string& input, const Shape& shape,
                            const ParamValues& params) const {
    (void)input;
    (void)shape;
    (void)params;
    return Tensor();
  }
  // The inputs of wrt() whose gradient no cotangent reaches, by design:
  // every engine must return zeros of the input's shape for them, and no
  // other gradient may be all zero (a vacuous comparison proves nothing).
  virtual std::vector<std::string> unreached_inputs() const { return {}; }
};

// Defaults (or test sizes) with `overrides` applied. An unknown name or a
// value out of range throws remat::Error listing the valid parameters.
ParamValues ResolveParams(const Problem& problem, const std::map<std::string, int64_t>& overrides,
                          bool test_sizes = false);

// Seeded f32 inputs, one per program parameter: the same (problem, params,
// seed) gives the same bits on every machine.
std::vector<Tensor> MakeInputs(const Problem& problem, const Program& program,
                               const ParamValues& params, uint64_t seed);

// The parameter indices of problem.wrt() in `program`, less the parameters
// its state ops update (CONTRACT.md, state: buffers such as batch norm's
// running statistics) unless wrt() names them in full.
std::vector<int> WrtIndices(const Problem& problem, const Program& program);

// The parameter indices `names` select in `program`, as Problem::wrt() names
// them: in the order named, a name ending in '*' selecting every input whose
// name starts with the rest, in input order. Throws remat::Error, its message
// starting with `what` (e.g. "--wrt"), for a name that selects no input (the
// message lists the inputs) or an input selected twice (it names the input).
std::vector<int> SelectInputs(const Program& program, const std::vector<std::string>& names,
                              const std::string& what);

// The parameter indices --wrt flags name in `program` (remat run's and the
// bench's): each flag NAME[,NAME...] as SelectInputs reads names, or "all"
// (every float input; integers are never differentiated). `fallback` when
// no flag is given. Throws remat::Error for an empty name, "all" beside
// another name, or what SelectInputs throws (the message starts "--wrt").
std::vector<int> WrtFromFlags(const std::vector<std::string>& flags, const Program& program,
                              const std::vector<int>& fallback);

// Every problem, in listing order; and one by name (remat::Error listing the
// problems if unknown).
const std::vector<std::unique_ptr<Problem>>& AllProblems();
const Problem& FindProblem(const std::string& name);

// "d=16 N=8"
std::string FormatParams(const ParamValues& params);

// Command-line --param flags, "NAME=INTEGER" each, as overrides for
// ResolveParams (which checks the names and ranges); remat::Error naming the
// flag for anything else.
std::map<std::string, int64_t> ParseParamFlags(const std::vector<std::string>& flags);

}  // namespace remat

#endif  // REMAT_PROBLEMS_PROBLEM_H_
