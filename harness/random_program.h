// Random valid programs over the whole op set, for differential testing:
// every op of the registry (engines/api/op_def.h) whose operands have one
// shape or its last dimension (drawn by one generic rule, so a new op of that
// kind needs no edit here), matmul (2-D and batched), transpose,
// split_heads/merge_heads, sum, name, nested checkpoint regions under random
// policies (JAX's and memory_budget:B, fractions and bytes), and scan.
//
// A case is a pure function of (seed, options): the same seed always gives
// the same program and inputs, so a failure is replayed from its seed, and
// shrunk by replaying the seed with smaller options.
#ifndef REMAT_HARNESS_RANDOM_PROGRAM_H_
#define REMAT_HARNESS_RANDOM_PROGRAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engines/api/program.h"
#include "engines/api/tensor.h"

namespace remat {

struct RandomOptions {
  int max_ops = 12;    // ops at the top level (regions and scan bodies add more)
  int max_depth = 2;   // nesting of checkpoint regions and scans
  int max_dim = 5;     // every dimension is 1..max_dim
  int max_length = 4;  // scan steps
};

struct RandomCase {
  uint64_t seed = 0;
  RandomOptions options;
  Program program;
  std::vector<Tensor> inputs;  // f32 nonzero multiples of 1/8 in [-1, 1]: exact in f32 and f64
  std::vector<int> wrt;        // every float input (seeds are i32, never differentiated)
};

RandomCase MakeRandomCase(uint64_t seed, const RandomOptions& options = {});

// The command that replays a case: "bazel-bin/harness/fuzz_test --seed=S ...".
std::string ReplayCommand(const RandomCase& c);

}  // namespace remat

#endif  // REMAT_HARNESS_RANDOM_PROGRAM_H_
