// ReverseModeEngine: an Engine that runs ReverseMode on a set of Kernels
// with given options. eager, reference and recompute are this class with
// different kernels and options (engines/eager, engines/recompute).
#ifndef REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
#define REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_

#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"
#include "engines/api/kernels.h"
#include "engines/autodiff/reverse_mode.h"

namespace remat {

class ReverseModeEngine : public Engine {
 public:
  ReverseModeEngine(std::string name, std::unique_ptr<Kernels> kernels,
                    ReverseModeOptions options)
      : name_(std::move(name)), kernels_(std::move(kernels)), options_(options) {}

  std::string name() const override { return name_; }
  DType dtype() const override { return kernels_->dtype(); }
  std::string kernels() const override { return kernels_->name(); }
  bool honours_checkpoints() const override { return options_.honour_checkpoints; }
  Result ValueAndGrad(const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt, const RunOptions& options) override {
    ReverseMode reverse_mode(kernels_.get(), options_);
    return reverse_mode.Run(program, args, wrt, options);
  }

 private:
  std::string name_;
  std::unique_ptr<Kernels> kernels_;
  ReverseModeOptions options_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_AUTODIFF_REVERSE_MODE_ENGINE_H_
