// ProgramCache recognises a case by its structure, its arguments' signature
// and wrt (program_cache.h).
#include "engines/exec/program_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engines/api/error.h"

namespace remat {
namespace {

Program TwoParams(const std::string& site) {
  Program p;
  p.name = "f";
  p.param_names = {"x", "y"};
  p.shapes = {Shape({2}), Shape({2}), Shape({2})};
  Op op;
  op.kind = OpKind::kMul;
  op.inputs = {0, 1};
  op.output = 2;
  op.site = site;
  p.ops.push_back(op);
  p.output = 2;
  return p;
}

TEST(ProgramCacheTest, AHitIsTheSameStructureSignatureAndWrt) {
  ProgramCache<int> cache;
  const Program a = TwoParams("t.cc:1");
  const Program b = TwoParams("t.cc:1");  // another object, the same structure
  const Tensor x = Tensor::FromF32(Shape({2}), {1, 2});
  const Tensor y = Tensor::FromF32(Shape({2}), {3, 4});
  EXPECT_EQ(cache.Find(a, {x, y}, {0}), nullptr);
  cache.Put(a, {x, y}, {0}, std::make_shared<const int>(7));
  ASSERT_NE(cache.Find(b, {x, y}, {0}), nullptr);
  EXPECT_EQ(*cache.Find(b, {x, y}, {0}), 7);
  // Other data of the same signature: the same case.
  EXPECT_NE(cache.Find(a, {y, x}, {0}), nullptr);

  EXPECT_EQ(cache.Find(a, {x, y}, {1}), nullptr) << "another wrt";
  EXPECT_EQ(cache.Find(a, {x, y}, {0, 1}), nullptr) << "another wrt";
  EXPECT_EQ(cache.Find(TwoParams("t.cc:2"), {x, y}, {0}), nullptr) << "another site";
  const Tensor wide = Tensor::FromF32(Shape({1, 2}), {3, 4});
  EXPECT_EQ(cache.Find(a, {x, wide}, {0}), nullptr) << "another shape";
  EXPECT_EQ(cache.Find(a, {x, x}, {0}), nullptr) << "shared storage is counted once";
  const Tensor f64 = Tensor::FromF64(Shape({2}), {3, 4});
  EXPECT_EQ(cache.Find(a, {x, f64}, {0}), nullptr) << "another dtype";
}

TEST(ProgramCacheTest, IsBounded) {
  ProgramCache<int> cache;
  const Tensor x = Tensor::FromF32(Shape({2}), {1, 2});
  for (size_t i = 0; i <= ProgramCache<int>::kMaxEntries; ++i) {
    cache.Put(TwoParams(StrCat("t.cc:", i)), {x, x}, {0}, std::make_shared<const int>(1));
  }
  EXPECT_LE(cache.size(), ProgramCache<int>::kMaxEntries);
  EXPECT_GE(cache.size(), 1u);
}

}  // namespace
}  // namespace remat
