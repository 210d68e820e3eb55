#include "tools/residual_diff.h"

#include <gtest/gtest.h>

#include "engines/api/program_text.h"

namespace remat {
namespace {

// layer_loss's shape: ops at two sites, the second inside a checkpoint.
Program LayerProgram() {
  return ParseProgram(R"(program p(w1: f32[16,16], x: f32[8,16]) {
  %2: f32[8,16] = matmul(%x, %w1) @ "problems/p.cc:48"
  %3: f32[8,16] = relu(%2) @ "problems/p.cc:48"
  %4: f32[8,16] = checkpoint(%3) name="mid" policy="nothing_saveable" @ "problems/p.cc:49" {
    body(arg0: f32[8,16])
    %1: f32[8,16] = sin(%arg0) @ "problems/p.cc:29" scope="mid"
    return %1
  }
  %5: f32[8,16] = square(%4) @ "problems/p.cc:51"
  %6: f32[] = sum(%5) @ "problems/p.cc:51"
  return %6
})",
                      "layer.txt");
}

// scan_stack's shape: the body's ops at line 23, the scan at line 40.
Program ScanProgram() {
  return ParseProgram(R"(program s(weights: f32[8,16,16], x: f32[8,16]) {
  %2: f32[8,16] = scan(%x, %weights) @ "problems/s.cc:40" {
    body(arg0: f32[8,16], arg1: f32[16,16])
    %2: f32[8,16] = matmul(%arg0, %arg1) @ "problems/s.cc:23"
    %3: f32[8,16] = relu(%2) @ "problems/s.cc:23"
    return %3
  }
  %3: f32[8,16] = square(%2) @ "problems/s.cc:41"
  %4: f32[] = sum(%3) @ "problems/s.cc:41"
  return %4
})",
                      "scan.txt");
}

Residual Line(const std::string& type, const std::string& source, int64_t bytes, int count = 1,
              bool is_argument = false) {
  Residual r;
  r.type = type;
  r.source = source;
  r.bytes = bytes;
  r.count = count;
  r.is_argument = is_argument;
  return r;
}

TEST(ResidualDiffTest, ReadsTheTypesOfAListing) {
  EXPECT_EQ(ListedTypeBytes("f32[8,16]"), 512);
  EXPECT_EQ(ListedTypeBytes("bool[8,16]"), 128);
  EXPECT_EQ(ListedTypeBytes("bf16[3]"), 6);
  EXPECT_EQ(ListedTypeBytes("f32[]"), 4);
  EXPECT_EQ(ListedTypeBytes("f32<host>[2,2]"), 16);
  EXPECT_EQ(ListedTypeBytes("c64[2]"), -1);
  EXPECT_EQ(ListedTypeBytes("f32[8,,16]"), -1);
  EXPECT_EQ(ListedTypeBytes("output"), -1);
}

TEST(ResidualDiffTest, SetsTheListingsSideBySideWhereTheirBytesDiffer) {
  const ResidualList remat(std::vector<Residual>{
      Line("f32[16,16]", "from the argument w1", 1024, 1, /*is_argument=*/true),
      Line("f32[8,16]", "output of matmul at problems/p.cc:48", 512),
      Line("f32[8,16]", "output of relu at problems/p.cc:48", 512),
      Line("f32[8,16]", "output of sin at problems/p.cc:29 (mid)", 512),
      Line("f32[8,16]", "output of checkpoint at problems/p.cc:49", 512),
  });
  const std::vector<std::string> engine = {
      "f32[8,16] from a constant",
      "f32[16,16] from the argument w[0]",
      "f32[8,16] output of custom_jvp_call from problems/p.cc:48 (%3 relu)",
      "bool[8,16] output of gt from problems/p.cc:48 (%3 relu)",
      "f32[8,16] output of broadcast_in_dim from problems/p.cc:48 (%3 relu)",
      "f32[8,16] output of cos from problems/p.cc:29 (%1 sin)",
      "f32[8,16] output of mul from problems/p.cc:51 (%5 square)",
  };
  const std::vector<PlaceDiff> d = DiffResiduals(LayerProgram(), remat, engine);
  // :29 keeps 512 B on both sides: not a difference. :48, :49 and :51 are.
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].place, "problems/p.cc:48");
  EXPECT_EQ(d[0].remat_bytes, 1024);
  EXPECT_EQ(d[0].engine_bytes, 1152);
  EXPECT_EQ(d[0].remat_lines.size(), 2u);
  EXPECT_EQ(d[0].engine_lines.size(), 3u);
  EXPECT_NE(d[0].reason.find("bool"), std::string::npos) << d[0].reason;
  EXPECT_EQ(d[1].place, "problems/p.cc:49");
  EXPECT_EQ(d[1].engine_bytes, 0);
  EXPECT_NE(d[1].reason.find("the engine keeps nothing here"), std::string::npos) << d[1].reason;
  EXPECT_EQ(d[2].place, "problems/p.cc:51");
  EXPECT_EQ(d[2].remat_bytes, 0);
  EXPECT_NE(d[2].reason.find("remat keeps nothing here"), std::string::npos) << d[2].reason;

  const std::string text = FormatResidualDiffs(d, "    ");
  EXPECT_NE(text.find("    problems/p.cc:48: remat 1024 B, the engine 1152 B: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("      engine: bool[8,16] output of gt from problems/p.cc:48 (%3 relu)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("      remat:  f32[8,16] output of relu at problems/p.cc:48\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("from the argument"), std::string::npos) << "inputs are counted by neither side";
}

TEST(ResidualDiffTest, AScansStackedResidualsMeetItsBodysOps) {
  const ResidualList remat(std::vector<Residual>{
      Line("f32[8,8,16]", "output of matmul at problems/s.cc:23 (layer)", 4096, 8),
      Line("f32[8,8,16]", "output of relu at problems/s.cc:23 (layer)", 4096, 8),
      Line("f32[8,16]", "output of square at problems/s.cc:41", 512),
  });
  const std::vector<std::string> engine = {
      "bool[8,8,16] output of scan from problems/s.cc:40 (%2 scan)",
      "f32[8,8,16] output of scan from problems/s.cc:40 (%2 scan)",
      "f32[8,16] output of broadcast_in_dim from problems/s.cc:23 (%3 relu)",
      "f32[8,16] output of mul from problems/s.cc:41 (%3 square)",
  };
  const std::vector<PlaceDiff> d = DiffResiduals(ScanProgram(), remat, engine);
  ASSERT_EQ(d.size(), 1u) << FormatResidualDiffs(d, "");
  EXPECT_EQ(d[0].place, "problems/s.cc:40");
  EXPECT_EQ(d[0].remat_bytes, 8192);
  EXPECT_EQ(d[0].engine_bytes, 1024 + 4096 + 512);
  EXPECT_EQ(d[0].remat_lines[0], "f32[8,8,16] output of matmul at problems/s.cc:23 (layer) (8 scan steps)");
  EXPECT_NE(d[0].reason.find("a scan"), std::string::npos) << d[0].reason;
}

TEST(ResidualDiffTest, NamesWhatItCannotRead) {
  const ResidualList remat(std::vector<Residual>{
      Line("f32[8,16]", "output of square at problems/s.cc:41", 512),
  });
  const std::vector<PlaceDiff> d = DiffResiduals(
      ScanProgram(), remat, {"c64[8,16] output of mul from problems/s.cc:41", "f32[4] somewhere"});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].engine_bytes, -1);
  EXPECT_NE(d[0].reason.find("cannot read"), std::string::npos) << d[0].reason;
  EXPECT_EQ(d[1].place, "(no site)");
  EXPECT_EQ(d[1].engine_bytes, 16);
  EXPECT_NE(FormatResidualDiffs(d, "").find("the engine ? B"), std::string::npos);
}

TEST(ResidualDiffTest, EqualListingsHaveNoDifferences) {
  const ResidualList remat(std::vector<Residual>{
      Line("f32[8,16]", "output of square at problems/s.cc:41", 512),
  });
  EXPECT_TRUE(DiffResiduals(ScanProgram(), remat,
                            {"f32[8,16] output of mul from problems/s.cc:41 (%3 square)"})
                  .empty());
  EXPECT_EQ(FormatResidualDiffs({}, "  "), "");
}

}  // namespace
}  // namespace remat
