// CompiledPlan: a value_and_grad run compiled ahead of time into a flat list
// of instructions over numbered buffers (slots), with every buffer's place
// in one arena decided before the run. What engines/planned's compiler
// (compiler.h) makes and its engine (planned_engine.h) replays.
#ifndef REMAT_ENGINES_PLANNED_COMPILED_PLAN_H_
#define REMAT_ENGINES_PLANNED_COMPILED_PLAN_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/kernels.h"
#include "engines/api/memory_tracker.h"
#include "engines/api/shape.h"
#include "engines/api/stats.h"

namespace remat {

// A tensor an instruction reads or writes: a view of a slot's buffer.
struct SlotRef {
  int slot = -1;
  int64_t offset_bytes = 0;
  Shape shape;
  bool whole = false;  // the slot's tensor itself (no view to make)
};

struct Instruction {
  enum class Kind {
    kKernel,    // out slot = kernel(operands); its scratchpad inside the call
    kZeros,     // out slot = a new zero-filled buffer (flat)
    kUninit,    // out slot = a new buffer whose contents are written later (flat)
    kCopy,      // out slot = a copy of operands[0] (an offload or its return)
    kCopyInto,  // operands[1] (a view) = operands[0], bitwise
    kZeroFill,  // operands[0] (a view) = 0
    kSetOne,    // operands[0] (rank 0) = 1: the backward pass's seed
    kFree,      // the slot's buffer is released (its last use was before)
  };
  Kind kind = Kind::kKernel;
  KernelOp op = KernelOp::kAdd;
  std::vector<SlotRef> operands;
  int out = -1;  // the slot written (kKernel, kZeros, kUninit, kCopy) or freed (kFree)
  Shape out_shape;
  KernelAttrs attrs;  // kKernel's
  // Where the tracker stands when the instruction allocates: its site (an
  // index into CompiledPlan::sites) and category.
  int site = -1;
  Category category = Category::kActivations;
};

// Where each buffer the run creates, in creation order, gets its storage.
struct Placement {
  int64_t bytes = 0;
  int64_t offset = -1;  // in the arena; -1: allocated apart (see CompiledPlan)
  // In-place stacking: the buffer's storage is buffer alias_of's, at
  // alias_offset_bytes (a kernel output whose copy into that slice of a stack
  // was elided: the kernel writes the slice). Its own arena space (offset)
  // stays reserved, so the arena and the memory accounting are the dry
  // run's; only the copy is gone.
  int alias_of = -1;
  int64_t alias_offset_bytes = 0;
};

struct CompiledPlan {
  int num_params = 0;
  // Slots 0..num_buffers-1 are the run's buffers in creation order;
  // num_buffers + i is argument i (as RunMemory::Arguments gives it). A
  // buffer made by casting argument i is bound to that argument's slot.
  int num_buffers = 0;
  std::vector<int> cast_of;  // by buffer: the argument it casts, or -1
  std::vector<Instruction> instructions;
  // The first instruction of the backward pass (the seed).
  size_t backward_start = 0;
  std::vector<std::string> sites;
  std::vector<Placement> placements;  // by buffer
  int64_t arena_bytes = 0;
  // kCopyInto instructions elided by in-place stacking, and their bytes.
  int elided_copies = 0;
  int64_t elided_copy_bytes = 0;
  // The packing's lower bound: the most arena bytes live at once.
  int64_t arena_live_bytes = 0;
  SlotRef value;
  std::vector<SlotRef> grads;
  // Result::state: each parameter's new value, by name.
  std::vector<std::pair<std::string, SlotRef>> state;
  // The dry run's statistics: memory as predicted, FLOPs, residuals, runs.
  Stats stats;
  std::vector<std::string> schedule;
};

}  // namespace remat

#endif  // REMAT_ENGINES_PLANNED_COMPILED_PLAN_H_
