#include "engines/api/program.h"

#include <gtest/gtest.h>

#include <string>

#include "engines/api/error.h"
#include "engines/api/tracer.h"

namespace remat {
namespace {

Var Middle(Var y, Var w) { return matmul(y, w); }

Program LayerLoss() {
  return Trace("layer_loss",
               {{"w1", Shape({4, 4})}, {"w2", Shape({4, 4})}, {"w3", Shape({4, 4})},
                {"x", Shape({2, 4})}},
               [](const std::vector<Var>& a) {
                 Var y1 = relu(matmul(a[3], a[0]));
                 Var y2 = relu(checkpoint(Middle, Policy(), "middle")(y1, a[1]));
                 return sum(square(matmul(y2, a[2])));
               });
}

TEST(TracerTest, BuildsTheLayerLossGraph) {
  Program p = LayerLoss();
  EXPECT_EQ(p.num_params(), 4);
  ASSERT_EQ(p.ops.size(), 7u);
  EXPECT_EQ(p.ops[0].kind, OpKind::kMatMul);
  EXPECT_EQ(p.ops[2].kind, OpKind::kCheckpoint);
  ASSERT_NE(p.ops[2].body, nullptr);
  EXPECT_EQ(p.ops[2].body->ops.size(), 1u);
  EXPECT_EQ(p.ops[2].body->ops[0].scope, "middle");
  EXPECT_EQ(p.shapes[p.output], Shape());
  EXPECT_EQ(p.CountOps(OpKind::kMatMul), 3);
  // Sites point at this file.
  EXPECT_NE(p.ops[0].site.find("program_test.cc:"), std::string::npos) << p.ops[0].site;
  const std::string listing = ToString(p);
  EXPECT_NE(listing.find("checkpoint[policy=nothing_saveable, middle]"), std::string::npos)
      << listing;
  EXPECT_NE(listing.find("e:f32[2,4] = matmul d a"), std::string::npos) << listing;
}

TEST(TracerTest, ScanChecksTheCarryAndStacksSlices) {
  Program p = Trace("stack", {{"w", Shape({3, 4, 4})}, {"x", Shape({2, 4})}},
                    [](const std::vector<Var>& a) {
                      auto body = [](Var y, Var w) { return relu(matmul(y, w)); };
                      return sum(square(scan(checkpoint(body), a[1], a[0])));
                    });
  ASSERT_EQ(p.ops[0].kind, OpKind::kScan);
  EXPECT_EQ(p.ops[0].body->shapes[1], Shape({4, 4}));
  EXPECT_EQ(p.ops[0].body->ops[0].kind, OpKind::kCheckpoint);

  try {
    Trace("bad", {{"w", Shape({3, 4, 5})}, {"x", Shape({2, 4})}}, [](const std::vector<Var>& a) {
      return sum(scan([](Var y, Var w) { return matmul(y, w); }, a[1], a[0]));
    });
    FAIL() << "a body that changes the carry's shape must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("carry"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[2,5]"), std::string::npos) << e.what();
  }
}

// A scan's consts (program.h): every step sees them whole, after the
// slices; a float one is refused (no step would sum its gradient).
TEST(TracerTest, ScanConstsAreSeenWholeAndIntegerOnly) {
  Program p = Trace("masked", {{"xs", Shape({3, 2})}, {"mask", Shape({2}), DType::kI32},
                               {"c", Shape({2})}},
                    [](const std::vector<Var>& a) {
                      return sum(scan_with_consts(
                          [](Var c, const std::vector<Var>& x, const std::vector<Var>& k) {
                            return apply("masked_fill", {add(c, x[0]), k[0]}, {.scalar = 0.0});
                          },
                          a[2], {a[0]}, {a[1]}));
                    });
  ASSERT_EQ(p.ops[0].kind, OpKind::kScan);
  const Op& scan = p.ops[0];
  EXPECT_EQ(scan.num_consts, 1);
  EXPECT_EQ(scan.inputs, (std::vector<int>{2, 0, 1}));
  EXPECT_FALSE(IsScanConst(scan, 0));
  EXPECT_FALSE(IsScanConst(scan, 1));
  EXPECT_TRUE(IsScanConst(scan, 2));
  EXPECT_EQ(scan.body->shapes[1], Shape({2}));  // a slice of xs
  EXPECT_EQ(scan.body->shapes[2], Shape({2}));  // the mask, whole
  EXPECT_EQ(scan.body->dtype(2), DType::kI32);

  try {
    Trace("bad", {{"xs", Shape({3, 2})}, {"w", Shape({2})}, {"c", Shape({2})}},
          [](const std::vector<Var>& a) {
            return sum(scan_with_consts(
                [](Var c, const std::vector<Var>& x, const std::vector<Var>& k) {
                  return mul(add(c, x[0]), k[0]);
                },
                a[2], {a[0]}, {a[1]}));
          });
    FAIL() << "a float const must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("const [2] is f32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("program_test.cc:"), std::string::npos) << e.what();
  }
}

TEST(TracerTest, ShapeMismatchNamesOpSiteAndShapes) {
  try {
    Trace("bad", {{"a", Shape({2, 3})}, {"b", Shape({4, 5})}},
          [](const std::vector<Var>& a) { return sum(matmul(a[0], a[1])); });
    FAIL();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("matmul at engines/api/program_test.cc:"), std::string::npos) << m;
    EXPECT_NE(m.find("[2,3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4,5]"), std::string::npos) << m;
  }
  try {
    Trace("bad", {{"a", Shape({2, 3})}, {"b", Shape({3, 2})}},
          [](const std::vector<Var>& a) { return sum(add(a[0], a[1])); });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("add at"), std::string::npos) << e.what();
  }
}

TEST(TracerTest, RejectsNonScalarLossAndClosureCapture) {
  EXPECT_THROW(Trace("bad", {{"a", Shape({2})}}, [](const std::vector<Var>& a) { return a[0]; }),
               Error);
  try {
    Trace("capture", {{"a", Shape({2})}, {"b", Shape({2})}}, [](const std::vector<Var>& a) {
      Var outer = a[1];
      auto f = [outer](Var x) { return mul(x, outer); };
      return sum(checkpoint(f)(a[0]));
    });
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closure"), std::string::npos) << e.what();
  }
  EXPECT_THROW(relu(Var()), Error);  // outside Trace
}

TEST(TracerTest, NamesAndNestedCheckpoints) {
  Program p = Trace("nested", {{"x", Shape()}}, [](const std::vector<Var>& a) {
    auto inner = checkpoint([](Var x) { return name(sin(x), "s"); });
    auto outer = checkpoint([inner](Var x) { return sin(inner(x)); });
    return outer(a[0]);
  });
  EXPECT_EQ(p.CountOps(OpKind::kCheckpoint), 2);
  EXPECT_EQ(p.CountOps(OpKind::kSin), 2);
  EXPECT_EQ(p.Labels(), std::vector<std::string>{"s"});
}

TEST(ApplyPolicyTest, SetsEveryRegionOrWrapsTheWholeFunction) {
  Program p = LayerLoss();
  Program q = ApplyPolicy(p, Policy(PolicyKind::kDotsSaveable));
  EXPECT_EQ(q.ops.size(), p.ops.size());
  EXPECT_EQ(q.ops[2].policy.kind(), PolicyKind::kDotsSaveable);
  EXPECT_EQ(p.ops[2].policy.kind(), PolicyKind::kNothingSaveable);  // the original is untouched

  Program plain = Trace("plain", {{"x", Shape({3})}},
                        [](const std::vector<Var>& a) { return sum(sin(a[0])); });
  Program wrapped = ApplyPolicy(plain, Policy(PolicyKind::kEverythingSaveable));
  ASSERT_EQ(wrapped.ops.size(), 1u);
  EXPECT_EQ(wrapped.ops[0].kind, OpKind::kCheckpoint);
  EXPECT_EQ(wrapped.ops[0].body->ops.size(), 2u);
  EXPECT_EQ(wrapped.shapes[wrapped.output], Shape());
  EXPECT_EQ(wrapped.param_names, plain.param_names);
}

}  // namespace
}  // namespace remat

namespace remat {
namespace {

Var Dense(Var y, Var w) { return relu(matmul(y, w)); }

// y -> checkpoint(Dense)(y, w_i) for i < blocks -> sum(y^2); when `leak`,
// block 0's output is also added to the loss (so blocks 0 and 1 are no
// chain).
Program Blocks(int blocks, bool leak = false) {
  std::vector<ParamDecl> params;
  for (int i = 0; i < blocks; ++i) params.push_back({StrCat("w", i), Shape({4, 4})});
  params.push_back({"x", Shape({2, 4})});
  return Trace("blocks", params, [blocks, leak](const std::vector<Var>& in) {
    Var y = in[blocks];
    Var first;
    for (int i = 0; i < blocks; ++i) {
      y = checkpoint(Dense, Policy(), "dense")(y, in[i]);
      if (i == 0) first = y;
    }
    return leak ? sum(add(square(y), square(first))) : sum(square(y));
  });
}

TEST(ApplyScheduleTest, GroupsAChainOfBlocks) {
  Program scheduled = ApplySchedule(Blocks(4), "revolve:2");
  // chain, square, sum.
  ASSERT_EQ(scheduled.ops.size(), 3u);
  const Op& chain = scheduled.ops[0];
  EXPECT_EQ(chain.kind, OpKind::kChain);
  EXPECT_EQ(chain.schedule, "revolve:2");
  // x first (block 0's first input), then the weights in order of use.
  EXPECT_EQ(chain.inputs, (std::vector<int>{4, 0, 1, 2, 3}));
  EXPECT_EQ(chain.body->ops.size(), 4u);
  EXPECT_EQ(chain.body->CountOps(OpKind::kCheckpoint), 4);
  EXPECT_NE(ToString(scheduled).find("chain[blocks=4, schedule=revolve:2]"), std::string::npos)
      << ToString(scheduled);
  // Inlined, the chain is its blocks' ops again.
  EXPECT_EQ(InlineCheckpoints(scheduled).CountOps(OpKind::kMatMul), 4);
  EXPECT_EQ(InlineCheckpoints(scheduled).CountOps(OpKind::kChain), 0);
}

TEST(ApplyScheduleTest, AValueReadOutsideTheChainEndsIt) {
  // Block 0's output is read by the loss too: blocks 1..3 form the chain.
  Program scheduled = ApplySchedule(Blocks(4, /*leak=*/true), "sqrt");
  EXPECT_EQ(scheduled.ops[0].kind, OpKind::kCheckpoint);
  EXPECT_EQ(scheduled.ops[1].kind, OpKind::kChain);
  EXPECT_EQ(scheduled.ops[1].body->ops.size(), 3u);
  // One block is no chain, and no scan either: a clear error.
  try {
    ApplySchedule(Blocks(1), "sqrt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no scan and no chain of checkpointed blocks"),
              std::string::npos)
        << e.what();
  }
}

// A spec no schedule reads is refused when it is applied, for every engine:
// eager, which ignores schedules, must not run as if none had been given.
TEST(ApplyScheduleTest, ABadSpecIsRefusedWhereItIsApplied) {
  for (const std::string spec : {"bogus", "revolve:", "every:0", "budget:12XB", "sqrt:3"}) {
    SCOPED_TRACE(spec);
    try {
      ApplySchedule(Blocks(4), spec);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(StrCat("schedule '", spec, "': "), 0), 0u)
          << e.what();
    }
  }
  EXPECT_THROW(ApplySchedule(Blocks(4), "checkpoint_every:0"), Error);
  EXPECT_NO_THROW(ApplySchedule(Blocks(4), "checkpoint_every:2"));
}

TEST(ApplyScheduleTest, CheckpointEveryKeepsEveryKthBlock) {
  // Blocks 1 and 3 ((i + 1) % 2 == 0) keep their policy; 0 and 2 store
  // everything. All four stay regions: inlined, a block's parameters'
  // cotangents would not be one contribution each (CONTRACT.md 3.4).
  const Program blocks = Blocks(4);
  Program scheduled = ApplySchedule(blocks, "checkpoint_every:2");
  EXPECT_EQ(scheduled.CountOps(OpKind::kChain), 0);
  ASSERT_EQ(scheduled.CountOps(OpKind::kCheckpoint), 4);
  std::vector<OpKind> kinds;
  std::vector<std::string> policies;
  for (const Op& op : scheduled.ops) {
    kinds.push_back(op.kind);
    if (op.kind == OpKind::kCheckpoint) policies.push_back(op.policy.ToString());
  }
  EXPECT_EQ(kinds, (std::vector<OpKind>{OpKind::kCheckpoint, OpKind::kCheckpoint,
                                        OpKind::kCheckpoint, OpKind::kCheckpoint,
                                        OpKind::kSquare, OpKind::kSum}));
  const std::string own = blocks.ops[0].policy.ToString();
  EXPECT_EQ(policies, (std::vector<std::string>{"everything_saveable", own,
                                                "everything_saveable", own}));
}

// A state program: r (4) updated by the running mean of x inside a region.
Program RunningMean(const std::string& slot, const Shape& running) {
  return Trace("running", {{"x", Shape({3, 4})}, {"r", running}}, [&](const std::vector<Var>& a) {
    Var y = checkpoint(
        [&](Var x, Var r) {
          apply("state", {apply("batch_norm_running_mean", {x, r}, {.scalar = 0.1})},
                {.name = slot});
          return sin(x);
        },
        Policy())(a[0], a[1]);
    return sum(y);
  });
}

TEST(CheckStateOpsTest, ListsEachSlotAndRefusesWhatCannotBeState) {
  const std::vector<StateSlot> slots = CheckStateOps(RunningMean("r", Shape({4})));
  ASSERT_EQ(slots.size(), 1u);
  EXPECT_EQ(slots[0].name, "r");
  EXPECT_EQ(slots[0].param, 1);
  EXPECT_EQ(slots[0].shape, Shape({4}));
  // A name that is no parameter, named with the parameters there are.
  try {
    CheckStateOps(RunningMean("running_mean", Shape({4})));
    FAIL() << "accepted a state op naming no parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'running_mean', which is not a parameter"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("program_test.cc:"), std::string::npos) << e.what();
  }
  // The new value's shape is not the parameter's: x (3, 4) as the state of r.
  const Program wrong_shape =
      Trace("wrong", {{"x", Shape({3, 4})}, {"r", Shape({4})}}, [](const std::vector<Var>& a) {
        return sum(apply("state", {a[0]}, {.name = "r"}));
      });
  EXPECT_THROW(CheckStateOps(wrong_shape), Error);
  // Two state ops for one parameter.
  const Program twice =
      Trace("twice", {{"x", Shape({3, 4})}, {"r", Shape({4})}}, [](const std::vector<Var>& a) {
        Var m = apply("batch_norm_running_mean", {a[0], a[1]}, {.scalar = 0.1});
        apply("state", {m}, {.name = "r"});
        return sum(apply("state", {m}, {.name = "r"}));
      });
  try {
    CheckStateOps(twice);
    FAIL() << "accepted two state ops for one parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("updated by two state ops"), std::string::npos) << e.what();
  }
}

TEST(CheckStateOpsTest, RefusesStateInAScanBody) {
  const Program p = Trace("scanned", {{"c", Shape({4})}, {"xs", Shape({2, 4})}, {"r", Shape({4})}},
                          [](const std::vector<Var>& a) {
                            return sum(scan(
                                [](Var c, Var x) { return add(apply("state", {c}, {.name = "r"}), x); },
                                a[0], a[1]));
                          });
  try {
    CheckStateOps(p);
    FAIL() << "accepted a state op in a scan's body";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inside a scan's body"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
