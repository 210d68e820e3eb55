// A faulty engine built around recompute (reverse mode with recompute's
// planner on eager's oneDNN kernels, a conforming engine): the gallery's
// decorators and the generated mutants change what it returns or how it is
// called, nothing else. Test-only.
#ifndef REMAT_HARNESS_GALLERY_DECORATOR_H_
#define REMAT_HARNESS_GALLERY_DECORATOR_H_

#include <memory>
#include <string>
#include <utility>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/autodiff/executor_rules.h"

namespace remat {

// recompute as engines/recompute builds it, here without the registry (the
// gallery's binaries link no "recompute"), named `name`.
std::unique_ptr<Engine> Recompute(const std::string& name, std::unique_ptr<Kernels> kernels,
                                  std::unique_ptr<ExecutorRules> rules = nullptr);

// Everything but ValueAndGrad is recompute's (or the given engine's); a subclass decides what
// ValueAndGrad does with inner().
class Decorator : public Engine {
 public:
  explicit Decorator(std::string name);
  // Around another engine (`inner`), whose claims it then makes.
  Decorator(std::string name, std::unique_ptr<Engine> inner);
  std::string name() const override { return name_; }
  DType dtype() const override { return inner_->dtype(); }
  std::string kernels() const override { return inner_->kernels(); }
  bool honours_checkpoints() const override { return inner_->honours_checkpoints(); }
  bool honours_memory_cap() const override { return inner_->honours_memory_cap(); }

 protected:
  Engine& inner() { return *inner_; }

 private:
  std::string name_;
  std::unique_ptr<Engine> inner_;
};

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_DECORATOR_H_
