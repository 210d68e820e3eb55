#include "engines/api/policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "engines/api/error.h"

namespace remat {
namespace {

ValueInfo Dot(bool batched) { return {true, batched, ""}; }
ValueInfo Named(const std::string& n) { return {false, false, n}; }
ValueInfo Plain() { return {}; }

TEST(PolicyTest, JaxSemantics) {
  EXPECT_EQ(Policy().Decide(Dot(false)), SaveDecision::kRecompute);
  EXPECT_EQ(Policy::Parse("everything_saveable").Decide(Plain()), SaveDecision::kSave);
  Policy dots = Policy::Parse("dots_saveable");
  EXPECT_EQ(dots.Decide(Dot(true)), SaveDecision::kSave);
  EXPECT_EQ(dots.Decide(Plain()), SaveDecision::kRecompute);
  Policy no_batch = Policy::Parse("checkpoint_dots_with_no_batch_dims");
  EXPECT_EQ(no_batch.kind(), PolicyKind::kDotsWithNoBatchDimsSaveable);
  EXPECT_EQ(no_batch.Decide(Dot(false)), SaveDecision::kSave);
  EXPECT_EQ(no_batch.Decide(Dot(true)), SaveDecision::kRecompute);

  Policy only = Policy::Parse("save_only_these_names:a,b");
  EXPECT_EQ(only.Decide(Named("a")), SaveDecision::kSave);
  EXPECT_EQ(only.Decide(Named("c")), SaveDecision::kRecompute);
  EXPECT_EQ(only.Decide(Dot(false)), SaveDecision::kRecompute);
  Policy but = Policy::Parse("save_any_names_but_these:a");
  EXPECT_EQ(but.Decide(Named("a")), SaveDecision::kRecompute);
  EXPECT_EQ(but.Decide(Named("c")), SaveDecision::kSave);
  EXPECT_EQ(but.Decide(Plain()), SaveDecision::kRecompute);
  Policy except = Policy::Parse("save_anything_except_these_names:a");
  EXPECT_EQ(except.Decide(Named("a")), SaveDecision::kRecompute);
  EXPECT_EQ(except.Decide(Plain()), SaveDecision::kSave);

  Policy both = Policy::Parse("save_from_both_policies:dots_saveable+save_only_these_names:a");
  EXPECT_EQ(both.Decide(Dot(true)), SaveDecision::kSave);
  EXPECT_EQ(both.Decide(Named("a")), SaveDecision::kSave);
  EXPECT_EQ(both.Decide(Named("b")), SaveDecision::kRecompute);

  Policy offload = Policy::Parse("save_and_offload_only_these_names:a/b");
  EXPECT_EQ(offload.Decide(Named("a")), SaveDecision::kSave);
  EXPECT_EQ(offload.Decide(Named("b")), SaveDecision::kOffload);
  EXPECT_EQ(offload.Decide(Named("c")), SaveDecision::kRecompute);
  EXPECT_EQ(Policy::Parse("offload_dot_with_no_batch_dims").Decide(Dot(false)),
            SaveDecision::kOffload);
}

TEST(PolicyTest, RoundTripsThroughText) {
  for (const char* text : {"nothing_saveable", "save_only_these_names:a,b",
                           "save_from_both_policies:dots_saveable+save_only_these_names:a",
                           "save_and_offload_only_these_names:a/b,c"}) {
    EXPECT_EQ(Policy::Parse(text).ToString(), text);
  }
  EXPECT_EQ(Policy::Parse("save_from_both_policies:dots_saveable+save_only_these_names:x")
                .ReferencedNames(),
            std::vector<std::string>{"x"});
}

TEST(PolicyTest, UnknownNamesListThePolicies) {
  try {
    Policy::Parse("dots_savable");
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown policy 'dots_savable'"), std::string::npos) << m;
    EXPECT_NE(m.find("dots_with_no_batch_dims_saveable"), std::string::npos) << m;
  }
  EXPECT_THROW(Policy::Parse("nothing_saveable:a"), Error);
  EXPECT_THROW(Policy::Parse("save_from_both_policies:dots_saveable"), Error);
}

TEST(PolicyTest, MemoryBudgetReadsAFractionOrBytes) {
  const Policy half = Policy::Parse("memory_budget:0.5");
  EXPECT_EQ(half.kind(), PolicyKind::kMemoryBudget);
  EXPECT_TRUE(half.memory_budget().is_fraction);
  EXPECT_DOUBLE_EQ(half.memory_budget().fraction, 0.5);
  EXPECT_EQ(half.ToString(), "memory_budget:0.5");
  EXPECT_TRUE(Policy::Parse("memory_budget:1").memory_budget().is_fraction);
  EXPECT_DOUBLE_EQ(Policy::Parse("memory_budget:0").memory_budget().fraction, 0.0);
  const Policy mib = Policy::Parse("memory_budget:4MiB");
  EXPECT_FALSE(mib.memory_budget().is_fraction);
  EXPECT_EQ(mib.memory_budget().bytes, 4 << 20);
  EXPECT_EQ(Policy::Parse("memory_budget:1B").memory_budget().bytes, 1);
  EXPECT_EQ(Policy::Parse("memory_budget:1000").memory_budget().bytes, 1000);
  EXPECT_EQ(Policy::Parse("memory_budget:1.5KB").memory_budget().bytes, 1500);
  EXPECT_EQ(Policy::Parse("memory_budget:4MiB").ToString(), "memory_budget:4MiB");
  // It may save anything: its planner chooses within the budget.
  EXPECT_EQ(half.Decide(Plain()), SaveDecision::kSave);
  const std::vector<std::string> names = Policy::Names();
  EXPECT_NE(std::find(names.begin(), names.end(), "memory_budget"), names.end());
}

TEST(PolicyTest, MemoryBudgetErrorsNameTheText) {
  for (const char* bad : {"memory_budget", "memory_budget:", "memory_budget:x", "memory_budget:1.5",
                          "memory_budget:4XB", "memory_budget:-1", "memory_budget:99999999999TiB"}) {
    try {
      Policy::Parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(PolicyTest, PeakBudgetReadsBytesOrMin) {
  const Policy p = Policy::Parse("memory_budget:peak:30MiB");
  EXPECT_EQ(p.kind(), PolicyKind::kMemoryBudget);
  EXPECT_TRUE(p.is_peak_budget());
  EXPECT_EQ(p.memory_budget().mode, BudgetMode::kPeak);
  EXPECT_FALSE(p.memory_budget().peak_min);
  EXPECT_EQ(p.memory_budget().peak_bytes, 30 << 20);
  EXPECT_EQ(p.ToString(), "memory_budget:peak:30MiB");
  EXPECT_EQ(Policy::Parse(p.ToString()).memory_budget().peak_bytes, 30 << 20);
  EXPECT_EQ(Policy::Parse("memory_budget:peak:123B").memory_budget().peak_bytes, 123);
  EXPECT_EQ(Policy::Parse("memory_budget:peak:1000").memory_budget().peak_bytes, 1000);
  EXPECT_EQ(Policy::Parse("memory_budget:peak:1.5KB").memory_budget().peak_bytes, 1500);
  const Policy min = Policy::Parse("memory_budget:peak:min");
  EXPECT_TRUE(min.is_peak_budget());
  EXPECT_TRUE(min.memory_budget().peak_min);
  EXPECT_EQ(min.ToString(), "memory_budget:peak:min");
  EXPECT_EQ(Policy::Parse(min.ToString()).ToString(), "memory_budget:peak:min");
  EXPECT_EQ(min.Decide(Plain()), SaveDecision::kSave);
  EXPECT_FALSE(Policy::Parse("memory_budget:0.5").is_peak_budget());
  EXPECT_FALSE(Policy::Parse("dots_saveable").is_peak_budget());
  // A fraction written with 17 digits reads back as the same double (what
  // the peak mode's resolution writes).
  const double f = 0.1 + 0.2;
  char text[64];
  std::snprintf(text, sizeof text, "memory_budget:%.17g", f);
  EXPECT_EQ(Policy::Parse(text).memory_budget().fraction, f);
}

TEST(PolicyTest, PeakBudgetErrorsNameTheTextAndTheForms) {
  for (const char* bad :
       {"memory_budget:peak:", "memory_budget:peak", "memory_budget:peak:-3",
        "memory_budget:peak:0.5x", "memory_budget:peak:0.5", "memory_budget:peak:0",
        "memory_budget:peak:x", "memory_budget:peak:4XB", "memory_budget:peak:99999999999TiB",
        "memory_budget:peak:mini"}) {
    try {
      Policy::Parse(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(StrCat("'", bad, "'")), std::string::npos) << m;
      EXPECT_NE(m.find("memory_budget:peak:64MiB"), std::string::npos) << m;
      EXPECT_NE(m.find("memory_budget:peak:min"), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace remat
