// What a case is, as the bench, the conformance suite and `remat conform`
// name it: a problem (or a program file's program) at a size, an engine, and
// what the case runs under (the problem as written, a checkpoint policy, a
// schedule, a memory cap, or the budget:B schedule that plans under a cap),
// differentiated with respect to some of its inputs.
//
//   CaseVariant v = CaseVariant::Parse("schedule:revolve:4");  // checked here
//   Program p = v.Apply(problem.Build(params));                // rewritten
//   v.Label();                                                  // "schedule:revolve:4"
//
// The variant is a kind and that kind's spec, parsed once where the text
// comes in (a flag, a test's list, a results file), so that no caller reads
// the meaning of a label by its prefix.
#ifndef REMAT_HARNESS_CASE_SPEC_H_
#define REMAT_HARNESS_CASE_SPEC_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engines/api/program.h"
#include "problems/problem.h"

namespace remat {

class CaseVariant {
 public:
  enum class Kind {
    kAsWritten,       // the program as the problem builds it
    kPolicy,          // Policy::Parse(spec) applied to every region (ApplyPolicy)
    kSchedule,        // ApplySchedule(spec): a scan's or a chain's reversal
    kMemoryCap,       // unchanged, run under RunOptions::memory_cap_bytes (spec: a cap)
    kBudgetUnderCap,  // the largest budget:B schedule planning under a cap (spec: the cap)
  };

  // The labels, as flags, row names and results files spell them.
  static constexpr char kAsWrittenLabel[] = "as-written";
  static constexpr char kPolicyPrefix[] = "policy:";
  static constexpr char kSchedulePrefix[] = "schedule:";
  static constexpr char kCapPrefix[] = "cap:";
  static constexpr char kBudgetUnderCapPrefix[] = "budget-under-cap:";

  CaseVariant() = default;  // as written

  // Reads a label:
  // - "" or "as-written": as written;
  // - "schedule:SPEC": a schedule (ApplySchedule's forms, checkpoint_every:K);
  // - "cap:CAP", "budget-under-cap:CAP": CAP is BYTES (64MiB) or FRACx (a
  //   fraction of eager's peak on the case, 0.5x);
  // - "policy:SPEC", or SPEC alone: a policy (Policy::Parse's text).
  // Each spec is checked here, without a program; throws remat::Error naming
  // the label and what is wrong with it (a policy's error lists the names).
  static CaseVariant Parse(const std::string& label);
  static CaseVariant OfPolicy(const std::string& spec) { return Parse(kPolicyPrefix + spec); }
  static CaseVariant OfSchedule(const std::string& spec) { return Parse(kSchedulePrefix + spec); }
  static CaseVariant OfCap(const std::string& cap) { return Parse(kCapPrefix + cap); }
  static CaseVariant OfBudgetUnderCap(const std::string& cap) {
    return Parse(kBudgetUnderCapPrefix + cap);
  }

  Kind kind() const { return kind_; }
  // The policy's or schedule's text, or the cap's; "" as written.
  const std::string& spec() const { return spec_; }
  bool is_as_written() const { return kind_ == Kind::kAsWritten; }
  bool is_policy() const { return kind_ == Kind::kPolicy; }
  bool is_schedule() const { return kind_ == Kind::kSchedule; }
  bool is_cap() const { return kind_ == Kind::kMemoryCap; }
  bool is_budget_under_cap() const { return kind_ == Kind::kBudgetUnderCap; }
  // Whether the case needs a scan or a chain of checkpointed blocks
  // (schedules and budget-under-cap: ApplySchedule refuses others).
  bool needs_loop() const { return is_schedule() || is_budget_under_cap(); }
  // Whether only an engine that honours checkpoints tells it from as
  // written (a policy, a schedule, budget-under-cap).
  bool rewrites_regions() const { return is_policy() || needs_loop(); }

  // The label Parse reads back: "as-written", the policy's spec alone
  // ("dots_saveable", as jax.checkpoint_policies names it), "schedule:SPEC",
  // "cap:CAP", "budget-under-cap:CAP".
  std::string Label() const;
  // As Label, but a policy as "policy:SPEC": where labels of several kinds
  // sit side by side without a row's context (the conformance suite's names).
  std::string QualifiedLabel() const;

  // `program` as the case runs it: a policy or schedule applied; as written
  // and a cap, unchanged. budget-under-cap throws remat::Error: its schedule
  // depends on a search over budgets the caller runs (LargestBudgetUnder).
  // ApplySchedule's error names a program without a scan or a chain.
  Program Apply(const Program& program) const;

  friend bool operator==(const CaseVariant& a, const CaseVariant& b) {
    return a.kind_ == b.kind_ && a.spec_ == b.spec_;
  }

 private:
  CaseVariant(Kind kind, std::string spec) : kind_(kind), spec_(std::move(spec)) {}
  Kind kind_ = Kind::kAsWritten;
  std::string spec_;
};

// Whether `program` has what a schedule reverses (a scan, or a chain of
// checkpointed blocks): where the variants that need_loop() run. The
// bench's rows, the conformance suite's cases and remat conform's skip
// schedules elsewhere.
bool Schedulable(const Program& program);

// Parameters in the order the problem declares them ("L=8,d=512,N=256"),
// which is how row and case names print them.
using OrderedParams = std::vector<std::pair<std::string, int64_t>>;
OrderedParams OrderParams(const Problem& problem, const ParamValues& params);
std::string FormatOrderedParams(const OrderedParams& params);  // "L=8,d=512,N=256"; "" if none

// A case: what runs, on which engine, under what, with respect to what.
struct CaseSpec {
  std::string problem;       // a registered problem's name, or a program file's program's
  std::string program_file;  // a program file's path (--program); "" for problems
  OrderedParams params;      // the size; empty: the problem's defaults (or a file's own)
  std::string engine;        // a registered engine's name; "" where the engine is outside
  CaseVariant variant;
  // The inputs differentiated, by name (WrtFromFlags' forms); empty: the
  // case's own (problems/problem.h).
  std::vector<std::string> wrt;
  // A directory every input is read from, <input>.npy (ReadCaseInputs,
  // harness/case_directory.h: an exported model's weights and tokens); "":
  // the inputs are drawn (MakeCase).
  std::string inputs_dir;
};

}  // namespace remat

#endif  // REMAT_HARNESS_CASE_SPEC_H_
