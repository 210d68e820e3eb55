#include "harness/bench_collect.h"

#include <benchmark/benchmark.h>
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>

namespace remat::bench {
namespace {

TEST(WithoutDebugBanner, DropsTheWarningLineOnly) {
  EXPECT_EQ(WithoutDebugBanner("Run on (2 X 2000 MHz CPU s)\n"
                               "***WARNING*** Library was built as DEBUG. Timings may be affected.\n"
                               "Load Average: 1.00, 0.50, 0.25\n"),
            "Run on (2 X 2000 MHz CPU s)\nLoad Average: 1.00, 0.50, 0.25\n");
  EXPECT_EQ(WithoutDebugBanner(""), "");
}

// The bench's context on the console: the library's lines (Debian's build
// adds its DEBUG warning to them), less the warning, and the timing line,
// and whether two CPUs share a core (harness/cpu_link.h), on the stream the
// display reporter had.
TEST(CollectingReporter, ContextKeepsTheLibrarysLinesLessItsDebugWarning) {
  auto console = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
  std::ostringstream out, err;
  console->SetOutputStream(&out);
  console->SetErrorStream(&err);
  CollectingReporter reporter(console.get());
  const benchmark::BenchmarkReporter::Context context;
  EXPECT_TRUE(reporter.ReportContext(context));
  const std::string text = err.str();
  EXPECT_EQ(text.find("DEBUG"), std::string::npos) << text;
  EXPECT_NE(text.find("Run on ("), std::string::npos) << text;
  EXPECT_NE(text.find(std::string(kTimingLine) + "\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncpus: "), std::string::npos) << "whether two CPUs share a core: " << text;
  EXPECT_EQ(&console->GetErrorStream(), &err);
}

}  // namespace
}  // namespace remat::bench
