#include "harness/sweep_cases.h"

#include <gtest/gtest.h>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "harness/bench_flags.h"

namespace remat::bench {
namespace {

std::vector<PlannedRow> Plan(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  std::vector<std::string> full = {"bench"};
  full.insert(full.end(), args.begin(), args.end());
  return PlanRows(ParseBenchFlags(full, &rest), EngineNames());
}

void ExpectSameRows(const std::vector<PlannedRow>& a, const std::vector<PlannedRow>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(a[i].name);
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].case_key, b[i].case_key);
    EXPECT_EQ(a[i].kind, b[i].kind);
    EXPECT_EQ(a[i].control, b[i].control);
    EXPECT_EQ(a[i].big, b[i].big);
    EXPECT_EQ(a[i].problem, b[i].problem);
    EXPECT_EQ(a[i].program_file, b[i].program_file);
    EXPECT_EQ(a[i].params, b[i].params);
    EXPECT_EQ(a[i].engine, b[i].engine);
    EXPECT_TRUE(a[i].variant == b[i].variant);
    EXPECT_EQ(a[i].wrt, b[i].wrt);
  }
}

TEST(SweepCases, TheDefaultRunsRowsRoundTrip) {
  const std::vector<PlannedRow> rows = Plan({});
  ExpectSameRows(ParseCaseList(FormatCaseList(rows), "list"), rows);
}

TEST(SweepCases, AListNamesTheCommandThatPlannedIt) {
  const std::vector<PlannedRow> rows = Plan({"--problems=sin_plain"});
  const std::string text = FormatCaseList(rows, "tools/bazel run //harness:bench -- --problems=sin_plain");
  EXPECT_EQ(CaseListPlannedBy(text), "tools/bazel run //harness:bench -- --problems=sin_plain");
  EXPECT_EQ(CaseListPlannedBy(FormatCaseList(rows)), "");
  ExpectSameRows(ParseCaseList(text, "list"), rows);
}

TEST(SweepCases, SweepsAndWrtRoundTrip) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--sweep=schedules"},
                                             {"--sweep=dtr"},
                                             {"--sweep=scale"},
                                             {"--sweep=transformer"},
                                             {"--problems=layer_loss", "--wrt=w*"}}) {
    SCOPED_TRACE(args.front());
    const std::vector<PlannedRow> rows = Plan(args);
    ExpectSameRows(ParseCaseList(FormatCaseList(rows), "list"), rows);
  }
}

TEST(SweepCases, GroupsEachCaseKeyAndSharesThemOut) {
  const std::vector<PlannedRow> rows =
      Plan({"--problems=sin_plain,layer_loss", "--engines=eager,recompute", "--policies=as-written"});
  const std::vector<SweepCase> cases = GroupCases(rows);
  ASSERT_EQ(cases.size(), 4u);  // sin_plain at 3 sizes, layer_loss at 1
  EXPECT_EQ(cases[3].key, "layer_loss/d=512,N=256");
  EXPECT_EQ(cases[3].rows.front().kind, RowKind::kMatMulBound);  // the bound travels with its case
  EXPECT_NE(cases[0].FileName(), cases[1].FileName());
  EXPECT_EQ(cases[0].FileName().size(), std::string("case-0123456789abcdef.json").size());
  EXPECT_EQ(TaskShare(4, 1, 3), (std::vector<int>{1}));
  EXPECT_EQ(TaskShare(7, 0, 3), (std::vector<int>{0, 3, 6}));
  EXPECT_TRUE(TaskShare(2, 5, 8).empty());
  EXPECT_THROW(TaskShare(4, 3, 3), Error);
  EXPECT_THROW(TaskShare(4, 0, 0), Error);
}

std::string ListError(const std::string& text) {
  try {
    ParseCaseList(text, "sweep.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepCases, BadListsNameFileLineAndWhat) {
  EXPECT_NE(ListError("# nothing\n").find("sweep.txt: a case list with no cases"), std::string::npos);
  EXPECT_NE(ListError("#\nproblem=no_such engine=eager variant=as-written\n").find("sweep.txt:2: "),
            std::string::npos);
  EXPECT_NE(ListError("problem=no_such engine=eager variant=as-written\n").find("no_such"),
            std::string::npos);
  EXPECT_NE(ListError("problem=sin_plain size=Q=3 engine=eager variant=as-written\n").find("sweep.txt:1: "),
            std::string::npos);
  const std::string twice = "problem=sin_plain engine=eager variant=as-written\n";
  EXPECT_NE(ListError(twice + twice).find("sweep.txt:2: row BM_ValueAndGrad/sin_plain/eager/as-written is listed twice"),
            std::string::npos);
  EXPECT_NE(ListError("problem=sin_plain engine=eager variant=as-written row=other\n").find("row=bound"),
            std::string::npos);
  EXPECT_NE(ListError("problem=sin_plain engine=recompute variant=as-written control=1\n").find("control=1"),
            std::string::npos);
}

}  // namespace
}  // namespace remat::bench
