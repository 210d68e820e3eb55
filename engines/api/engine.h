// The Engine interface: every engine computes the value and the gradients of
// a Program's scalar output, and reports what that cost.
//
//   std::unique_ptr<Engine> engine = MakeEngine("eager");
//   Result r = engine->ValueAndGrad(program, args, /*wrt=*/{0, 1});
//
// Contract:
// - args[i] matches the program's parameter i in shape; engines accept f32 or
//   f64 arguments and convert to their own dtype (the reference runs in f64).
// - grads[j] is the gradient with respect to parameter wrt[j], in the
//   engine's dtype; value is rank 0.
// - All storage of a run is allocated through one MemoryTracker per run
//   (Result::tracker); once the Result's tensors are dropped, its live bytes
//   are back to zero.
// - Bad input (argument count, shapes, wrt) throws remat::Error naming it.
#ifndef REMAT_ENGINES_API_ENGINE_H_
#define REMAT_ENGINES_API_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "engines/api/memory_tracker.h"
#include "engines/api/program.h"
#include "engines/api/stats.h"
#include "engines/api/tensor.h"

namespace remat {

struct RunOptions {
  // Live device bytes a run may reach; an allocation past it throws
  // remat::Error before allocating. 0: no limit.
  int64_t max_memory_bytes = 0;
};

struct Result {
  Tensor value;
  std::vector<Tensor> grads;
  Stats stats;
  std::shared_ptr<MemoryTracker> tracker;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::string name() const = 0;
  virtual DType dtype() const = 0;
  virtual Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                              const std::vector<int>& wrt, const RunOptions& options = {}) = 0;
};

// Throws remat::Error unless `args` fit `program`'s parameters and `wrt`
// names distinct parameters.
void ValidateArguments(const Program& program, const std::vector<Tensor>& args,
                       const std::vector<int>& wrt);

}  // namespace remat

#endif  // REMAT_ENGINES_API_ENGINE_H_
