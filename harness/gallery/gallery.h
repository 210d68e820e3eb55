// The gallery of faulty engines: mutation testing of the conformance suite.
// Test-only.
//
// Each entry is an engine with one planted fault, registered by name like
// any engine (linking //harness/gallery registers them all), and run through
// the same conformance binary and fuzzer as a real engine
// (harness/conformance_test.cc, harness/fuzz_test.cc). Each must fail, and
// the failure must name the property the fault breaks; gallery_test checks
// both for every entry and prints the mutation score (faults caught /
// faults). A fault the suite cannot catch is a hole in the suite.
//
// The faults are planted three ways:
// - in the kernels (faulty_kernels.h), decorating eager's oneDNN kernels;
// - in the interpreter (the executor's Fault, engines/autodiff/reverse_mode.h), where
//   the bug would live: the order of summation, the tape, recomputation;
// - around an engine (a decorator over recompute), corrupting its Result or
//   its accounting.
#ifndef REMAT_HARNESS_GALLERY_GALLERY_H_
#define REMAT_HARNESS_GALLERY_GALLERY_H_

#include <string>
#include <vector>

namespace remat {

struct FaultyEngine {
  std::string engine;  // the name it is registered under: "faulty_..."
  std::string fault;   // what is wrong with it, one line
  // Phrases the suite's failure message contains when it catches the fault
  // (one of them must appear): the properties the fault breaks, as the
  // suite words them.
  std::vector<std::string> caught_as;
};

// Every faulty engine, in a fixed order.
const std::vector<FaultyEngine>& Gallery();

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_GALLERY_H_
