// remat::Error's typed facts: set where a failure is known, kept through
// every wrap that adds context, and read by callers instead of the text.
#include "engines/api/error.h"

#include "engines/api/program_text.h"
#include "gtest/gtest.h"

namespace remat {
namespace {

TEST(ErrorTest, PlainErrorsAreInvalidWithNoFacts) {
  const Error e("bad");
  EXPECT_EQ(e.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(e.facts().smallest_feasible_bytes, -1);
  EXPECT_STREQ(e.what(), "bad");
}

TEST(ErrorTest, WrappingKeepsKindAndFacts) {
  ErrorFacts facts;
  facts.kind = ErrorKind::kCapTooSmall;
  facts.smallest_feasible_bytes = 4096;
  try {
    try {
      throw Error("does not fit", facts);
    } catch (const Error& e) {
      throw Error(StrCat("dtr on p: ", e.what()), e);
    }
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "dtr on p: does not fit");
    EXPECT_EQ(e.kind(), ErrorKind::kCapTooSmall);
    EXPECT_EQ(e.facts().smallest_feasible_bytes, 4096);
  }
}

TEST(ErrorTest, AProgramFileThatDoesNotParseSaysWhere) {
  try {
    ParseProgram("program p(x: f32[2]) {\n  %y: f32[2] = erfinv(%x)\n  return %y\n}\n", "p.remat");
    FAIL() << "parsed an unknown op";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kParse) << e.what();
    EXPECT_EQ(e.facts().file, "p.remat");
    EXPECT_EQ(e.facts().line, 2);
    EXPECT_GT(e.facts().column, 0);
    EXPECT_NE(std::string(e.what()).find("p.remat:2:"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace remat
