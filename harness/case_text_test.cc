#include "harness/case_text.h"

#include <gtest/gtest.h>

#include "engines/api/error.h"

namespace remat {
namespace {

CaseSpec Sample() {
  CaseSpec spec;
  spec.problem = "layer_loss";
  spec.params = {{"d", 512}, {"N", 256}};
  spec.engine = "recompute";
  spec.variant = CaseVariant::Parse("save_only_these_names:attn_probs,attn_out");
  spec.wrt = {"w*", "x,y"};
  return spec;
}

void ExpectSame(const CaseSpec& a, const CaseSpec& b) {
  EXPECT_EQ(a.problem, b.problem);
  EXPECT_EQ(a.program_file, b.program_file);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.engine, b.engine);
  EXPECT_TRUE(a.variant == b.variant) << a.variant.Label() << " vs " << b.variant.Label();
  EXPECT_EQ(a.wrt, b.wrt);
  EXPECT_EQ(a.inputs_dir, b.inputs_dir);
}

TEST(CaseText, WritesWordsInOrder) {
  EXPECT_EQ(FormatCase(Sample()),
            "problem=layer_loss size=d=512,N=256 engine=recompute "
            "variant=save_only_these_names:attn_probs,attn_out wrt=w*;x,y");
}

TEST(CaseText, RoundTripsEveryVariantKind) {
  for (const char* label : {"as-written", "nothing_saveable", "schedule:revolve:4", "cap:0.5x",
                            "cap:64MiB", "budget-under-cap:0.75x", "memory_budget:peak:min",
                            "schedule:budget:4MiB"}) {
    CaseSpec spec = Sample();
    spec.variant = CaseVariant::Parse(label);
    SCOPED_TRACE(label);
    ExpectSame(ParseCase(FormatCase(spec)), spec);
  }
}

TEST(CaseText, RoundTripsProgramFilesAndDefaults) {
  CaseSpec spec;
  spec.problem = "llama";
  spec.program_file = "/data/llama/program.txt";
  spec.inputs_dir = "/data/llama";
  spec.engine = "eager";
  const std::string line = FormatCase(spec);
  EXPECT_EQ(line, "problem=llama program=/data/llama/program.txt engine=eager variant=as-written "
                  "inputs=/data/llama");
  ExpectSame(ParseCase(line), spec);
}

TEST(CaseText, ReadsWordsInAnyOrder) {
  ExpectSame(ParseCase("engine=recompute wrt=w*;x,y variant=policy:save_only_these_names:attn_probs,"
                       "attn_out size=d=512,N=256 problem=layer_loss"),
             Sample());
}

TEST(CaseText, RefusesBadLinesNamingWhatIsWrong) {
  auto message = [](const std::string& line) {
    try {
      ParseCase(line);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("problem=p engine=e").find("no variant= word"), std::string::npos);
  EXPECT_NE(message("engine=e variant=as-written").find("no problem= word"), std::string::npos);
  EXPECT_NE(message("problem=p engine=e variant=as-written colour=red").find("unknown word 'colour='"),
            std::string::npos);
  EXPECT_NE(message("problem=p engine=e variant=as-written size=d=x").find("'d=x' is not NAME=INTEGER"),
            std::string::npos);
  EXPECT_NE(message("problem=p engine=e variant=no_such_policy").find("case of problem p: variant=no_such_policy"),
            std::string::npos);
  EXPECT_NE(message("problem=p problem=q engine=e variant=as-written").find("given twice"),
            std::string::npos);
  EXPECT_NE(message("problem=p engine=e variant=as-written stray").find("'stray' is not KEY=VALUE"),
            std::string::npos);
  // Extra words are the caller's.
  EXPECT_NO_THROW(ParseCase("problem=p engine=e variant=as-written row=bound", {"row"}));
}

TEST(CaseText, RefusesValuesItCannotWrite) {
  CaseSpec spec = Sample();
  spec.program_file = "/my programs/p.txt";
  EXPECT_THROW(FormatCase(spec), Error);
  spec = Sample();
  spec.wrt = {"a;b"};
  EXPECT_THROW(FormatCase(spec), Error);
}

}  // namespace
}  // namespace remat
