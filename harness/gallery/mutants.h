// Generated mutants: faults made by rule, not by hand, for the mutation
// score of the conformance suite (issue 26). Test-only.
//
// The gallery (gallery.h) holds faults someone thought of. A mutant here is
// recompute (reverse mode on eager's oneDNN kernels, a conforming engine;
// dtr for the rules of a memory cap)
// with one thing it reports, returns or obeys changed by a rule applied to
// every target of its kind:
// - every integer field of Stats (each category of the per-category arrays
//   apart): too low, too high, or the previous call's;
// - the op counts, the residual listing, the peak's site and the times;
// - the value, every gradient position and the new state: one ulp, the
//   sign, zeros, the order of the gradients, a shape of the same size,
//   another dtype, one missing, one extra;
// - every RunOptions field an engine must obey: ignored, and where it is a
//   choice, inverted;
// - a result cache keyed on all but one of (program, argument values, wrt,
//   options): each key component dropped in turn;
// - the arguments and errors: a repeated wrt index accepted, an argument
//   written, an error's names dropped, an unreached gradient left empty;
// - the memory cap, on dtr (recompute honours none): run under another cap,
//   the smallest feasible cap misreported.
// Each mutant is registered as an engine "mutant_<target>_<mutation>" and
// run through the conformance binary (faulty_conformance) by mutant_test,
// which must see the run fail. A mutant the contract allows (a change no
// rule of engines/api/CONTRACT.md forbids) says so in `allowed_by`, quoting
// the sentence; mutant_test then requires the suite to pass it instead, so
// that an allowance is never a silent hole.
#ifndef REMAT_HARNESS_GALLERY_MUTANTS_H_
#define REMAT_HARNESS_GALLERY_MUTANTS_H_

#include <string>
#include <vector>

namespace remat {

struct Mutant {
  std::string engine;      // "mutant_peak_bytes_low"
  std::string mutation;    // what was changed, one line
  std::string allowed_by;  // "" or the CONTRACT.md sentence that allows it
};

// Every generated mutant, in a fixed order (the rules' order, then the
// targets').
const std::vector<Mutant>& Mutants();

}  // namespace remat

#endif  // REMAT_HARNESS_GALLERY_MUTANTS_H_
