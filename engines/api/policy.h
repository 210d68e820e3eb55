// Rematerialization policies, with JAX's names and meaning
// (jax.checkpoint_policies). A policy answers, for each value computed inside
// a checkpoint region, whether it may be saved for the backward pass
// (kSave), saved in the host tier (kOffload), or must be recomputed
// (kRecompute). A policy only says what *may* be saved: engines save a value
// only if the backward pass needs it.
#ifndef REMAT_ENGINES_API_POLICY_H_
#define REMAT_ENGINES_API_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace remat {

enum class PolicyKind {
  kEverythingSaveable,
  kNothingSaveable,  // jax.checkpoint's default
  kDotsSaveable,     // alias checkpoint_dots
  kDotsWithNoBatchDimsSaveable,  // alias checkpoint_dots_with_no_batch_dims
  kSaveOnlyTheseNames,
  kSaveAnyNamesButThese,
  kSaveAnythingExceptTheseNames,
  kSaveFromBothPolicies,
  kSaveAndOffloadOnlyTheseNames,
  kOffloadDotWithNoBatchDims,
  // Not JAX's: remat-bench's whole-region planner (engines/budget). The
  // region keeps what minimises its recomputed FLOPs with its saved bytes at
  // most a budget (torch.compile's activation_memory_budget, Checkmate).
  kMemoryBudget,
};

enum class SaveDecision { kRecompute, kSave, kOffload };

// What a policy sees of a value: the op that produced it, whether that op is
// a matmul and whether it has a batch dimension, and its checkpoint_name
// label (empty when the value is not the output of name()).
struct ValueInfo {
  bool is_matmul = false;
  bool has_batch_dims = false;
  std::string name;
};

// memory_budget:B. B is bytes ("4MiB", "123B", "1.5GiB": engines/schedule's
// ParseBytes forms; a bare number greater than 1 is bytes) or a fraction in
// [0, 1] ("0", "0.5", "1") of the bytes everything_saveable saves in the
// region (torch.compile's meaning: 0 recomputes everything, 1 saves what no
// checkpointing would). A byte budget applies to each region instance (each
// step of a scan) as a policy does.
//
// The second mode, memory_budget:peak:B, bounds the whole run's peak instead
// (the engine's predicted peak, every category: what the run measures): the
// least recomputation whose peak is at most B bytes (ParseBytes forms:
// "30MiB", "123B", a bare whole number; positive). memory_budget:peak:min:
// the smallest peak reachable, and the least recomputation at that peak. A
// peak depends on the whole program, not one region, so the engine resolves
// it before planning (engines/budget/peak_budget.h): every peak-mode region
// gets the same fraction f of its everything_saveable bytes, the largest
// whose dry run fits under B (for min: the one with the smallest peak).
enum class BudgetMode {
  kSavedBytes,  // memory_budget:B
  kPeak,        // memory_budget:peak:B and memory_budget:peak:min
};

struct MemoryBudget {
  BudgetMode mode = BudgetMode::kSavedBytes;
  bool is_fraction = true;  // kSavedBytes
  double fraction = 0.0;    // kSavedBytes and is_fraction
  int64_t bytes = 0;        // kSavedBytes and !is_fraction
  bool peak_min = false;    // kPeak: memory_budget:peak:min
  int64_t peak_bytes = 0;   // kPeak and !peak_min: the limit on the run's peak
  std::string text;         // what follows "memory_budget:" as written
  bool operator==(const MemoryBudget&) const = default;
};

class Policy {
 public:
  Policy() = default;  // nothing_saveable
  explicit Policy(PolicyKind kind, std::vector<std::string> names = {});
  // save_from_both_policies(a, b).
  static Policy Both(const Policy& a, const Policy& b);
  // save_and_offload_only_these_names(names_which_can_be_saved,
  // names_which_can_be_offloaded).
  static Policy SaveAndOffload(std::vector<std::string> save_names,
                               std::vector<std::string> offload_names);

  // Parses "NAME", "NAME:a,b" (the names of a names-policy),
  // "save_and_offload_only_these_names:a,b/c,d" (saved / offloaded names) and
  // "save_from_both_policies:P1+P2", "memory_budget:B",
  // "memory_budget:peak:B" and "memory_budget:peak:min" (see MemoryBudget).
  // Unknown names throw remat::Error listing the valid ones; a bad B names
  // the text.
  static Policy Parse(const std::string& text);
  // Every policy name Parse accepts, aliases included.
  static std::vector<std::string> Names();

  PolicyKind kind() const { return kind_; }
  const std::vector<std::string>& names() const { return names_; }
  // The names this policy refers to (for warnings about unknown labels).
  std::vector<std::string> ReferencedNames() const;
  // memory_budget: kSave (it may save anything; its planner, not this
  // function, chooses what is kept within the budget).
  SaveDecision Decide(const ValueInfo& value) const;
  // The budget of a memory_budget policy (kind() == kMemoryBudget).
  const MemoryBudget& memory_budget() const { return budget_; }
  // memory_budget:peak:... (kind() == kMemoryBudget, mode kPeak).
  bool is_peak_budget() const {
    return kind_ == PolicyKind::kMemoryBudget && budget_.mode == BudgetMode::kPeak;
  }
  // The text Parse reads back.
  std::string ToString() const;
  // Field by field (a compiled plan's cache compares the policies of a
  // program it has seen on every run: no string is built).
  bool operator==(const Policy&) const = default;

 private:
  PolicyKind kind_ = PolicyKind::kNothingSaveable;
  std::vector<std::string> names_;          // names-policies; saved names for offload
  std::vector<std::string> offload_names_;  // save_and_offload_only_these_names
  std::vector<Policy> both_;                // save_from_both_policies
  MemoryBudget budget_;                     // memory_budget
};

}  // namespace remat

#endif  // REMAT_ENGINES_API_POLICY_H_
