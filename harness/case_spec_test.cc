#include "harness/case_spec.h"

#include <string>

#include <gtest/gtest.h>

#include "engines/api/error.h"
#include "engines/api/program.h"
#include "engines/api/program_text.h"
#include "problems/problem.h"

namespace remat {
namespace {

using Kind = CaseVariant::Kind;

std::string ParseError(const std::string& label) {
  try {
    CaseVariant::Parse(label);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CaseVariant, EachLabelReadsAsItsKindAndPrintsBackTheSame) {
  struct Row {
    const char* label;
    Kind kind;
    const char* spec;
  };
  for (const Row& r : {
           Row{"as-written", Kind::kAsWritten, ""},
           Row{"nothing_saveable", Kind::kPolicy, "nothing_saveable"},
           Row{"save_only_these_names:attn_probs,attn_out", Kind::kPolicy,
               "save_only_these_names:attn_probs,attn_out"},
           Row{"memory_budget:0.5", Kind::kPolicy, "memory_budget:0.5"},
           Row{"schedule:revolve:4", Kind::kSchedule, "revolve:4"},
           Row{"schedule:checkpoint_every:2", Kind::kSchedule, "checkpoint_every:2"},
           Row{"schedule:budget:4MiB", Kind::kSchedule, "budget:4MiB"},
           Row{"cap:0.5x", Kind::kMemoryCap, "0.5x"},
           Row{"cap:64MiB", Kind::kMemoryCap, "64MiB"},
           Row{"budget-under-cap:0.75x", Kind::kBudgetUnderCap, "0.75x"},
       }) {
    const CaseVariant v = CaseVariant::Parse(r.label);
    EXPECT_EQ(v.kind(), r.kind) << r.label;
    EXPECT_EQ(v.spec(), r.spec) << r.label;
    EXPECT_EQ(v.Label(), r.label);
    EXPECT_EQ(CaseVariant::Parse(v.Label()), v) << r.label;
    EXPECT_EQ(CaseVariant::Parse(v.QualifiedLabel()), v) << r.label;
  }
  // The other spellings of the same variants.
  EXPECT_EQ(CaseVariant::Parse(""), CaseVariant());
  EXPECT_EQ(CaseVariant::Parse("policy:dots_saveable"), CaseVariant::OfPolicy("dots_saveable"));
  EXPECT_EQ(CaseVariant::OfPolicy("dots_saveable").QualifiedLabel(), "policy:dots_saveable");
  EXPECT_EQ(CaseVariant::OfSchedule("sqrt").Label(), "schedule:sqrt");
  EXPECT_EQ(CaseVariant::OfCap("0.5x"), CaseVariant::Parse("cap:0.5x"));
  EXPECT_EQ(CaseVariant::OfBudgetUnderCap("0.5x").kind(), Kind::kBudgetUnderCap);
  // A cap and the budget under the same cap are different variants.
  EXPECT_FALSE(CaseVariant::OfCap("0.5x") == CaseVariant::OfBudgetUnderCap("0.5x"));
}

TEST(CaseVariant, WhatEachKindNeedsAndRewrites) {
  EXPECT_FALSE(CaseVariant().rewrites_regions());
  EXPECT_FALSE(CaseVariant::OfCap("1x").rewrites_regions());
  EXPECT_TRUE(CaseVariant::OfPolicy("dots_saveable").rewrites_regions());
  EXPECT_FALSE(CaseVariant::OfPolicy("dots_saveable").needs_loop());
  EXPECT_TRUE(CaseVariant::OfSchedule("sqrt").needs_loop());
  EXPECT_TRUE(CaseVariant::OfBudgetUnderCap("1x").needs_loop());
  EXPECT_FALSE(CaseVariant::OfCap("1x").needs_loop());
}

TEST(CaseVariant, ApplyRewritesThePolicysAndSchedulesProgramsOnly) {
  const Problem& scan = FindProblem("scan_stack");
  const Program program = scan.Build(ResolveParams(scan, {}, /*test_sizes=*/true));
  // As written and under a cap: the program itself.
  EXPECT_EQ(CaseVariant().Apply(program).ops.size(), program.ops.size());
  EXPECT_EQ(CaseVariant::OfCap("0.5x").Apply(program).ops.size(), program.ops.size());
  // A policy: the regions rewritten as ApplyPolicy does.
  const Program nothing = CaseVariant::OfPolicy("nothing_saveable").Apply(program);
  const Program expected = ApplyPolicy(program, Policy::Parse("nothing_saveable"));
  EXPECT_EQ(PrintProgram(nothing), PrintProgram(expected));
  // A schedule: as ApplySchedule does.
  EXPECT_EQ(PrintProgram(CaseVariant::OfSchedule("sqrt").Apply(program)),
            PrintProgram(ApplySchedule(program, "sqrt")));
  // The budget under a cap needs a search the label does not make.
  EXPECT_THROW(CaseVariant::OfBudgetUnderCap("0.5x").Apply(program), Error);
  // A schedule on a problem without a scan or a chain: ApplySchedule's error.
  const Problem& layer = FindProblem("layer_loss");
  const Program flat = layer.Build(ResolveParams(layer, {}, /*test_sizes=*/true));
  try {
    CaseVariant::OfSchedule("sqrt").Apply(flat);
    ADD_FAILURE() << "a schedule applied to layer_loss";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no scan and no chain"), std::string::npos) << e.what();
  }
}

TEST(CaseVariant, BadLabelsAreRefusedNamingTheLabelAndWhy) {
  // An unknown policy: Policy::Parse's list of names, and the other forms.
  const std::string unknown = ParseError("nothing_savable");
  EXPECT_NE(unknown.find("nothing_savable"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("everything_saveable"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("schedule:SPEC"), std::string::npos) << unknown;
  // A schedule without its argument, or of no known form.
  for (const char* label : {"schedule:revolve", "schedule:every:0", "schedule:sideways",
                            "schedule:checkpoint_every:x", "schedule:"}) {
    const std::string e = ParseError(label);
    EXPECT_NE(e.find(label), std::string::npos) << label << ": " << e;
    EXPECT_NE(e.find("revolve:C"), std::string::npos) << label << ": " << e;
  }
  // Caps that are neither bytes nor a positive fraction of eager's peak.
  for (const char* label : {"cap:", "cap:-1x", "cap:halfx", "cap:0x", "budget-under-cap:12 apples",
                            "cap:0"}) {
    const std::string e = ParseError(label);
    EXPECT_NE(e.find(label), std::string::npos) << label << ": " << e;
  }
  EXPECT_NE(ParseError("policy:").find("without its policy"), std::string::npos);
}

TEST(CaseVariant, SchedulesGoWhereThereIsAScanOrAChain) {
  for (const char* name : {"scan_stack", "mlp_chain", "gpt"}) {
    const Problem& p = FindProblem(name);
    EXPECT_TRUE(Schedulable(p.Build(ResolveParams(p, {}, /*test_sizes=*/true)))) << name;
  }
  const Problem& layer = FindProblem("layer_loss");
  EXPECT_FALSE(Schedulable(layer.Build(ResolveParams(layer, {}, /*test_sizes=*/true))));
}

TEST(OrderedParams, PrintInTheProblemsOrder) {
  const Problem& scan = FindProblem("scan_stack");
  const OrderedParams params = OrderParams(scan, {{"N", 256}, {"d", 512}, {"L", 8}});
  EXPECT_EQ(FormatOrderedParams(params), "L=8,d=512,N=256");
  EXPECT_EQ(FormatOrderedParams({}), "");
}

}  // namespace
}  // namespace remat
