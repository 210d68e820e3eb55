// A case's one text form: a line of `key=value` words that FormatCase writes
// and ParseCase reads back to the same CaseSpec (harness/case_spec.h).
//
//   problem=layer_loss size=d=512,N=256 engine=recompute variant=schedule:sqrt
//   problem=llama program=/data/llama/program.txt engine=eager variant=as-written wrt=w*
//
// Words, in this order when written (any order when read):
//   problem=NAME      always; a registered problem's, or a program file's program's
//   program=PATH      a program file's path (CaseSpec::program_file)
//   size=K=V,K=V      the parameters, in the problem's order (absent: defaults)
//   engine=NAME       always (empty where the engine is outside: engine=)
//   variant=LABEL     always: CaseVariant::Label()
//   wrt=A;B           the --wrt entries (each may hold commas), joined by ';'
//   inputs=DIR        CaseSpec::inputs_dir
// A value may not hold a space, a tab or a newline (FormatCase throws:
// such a path cannot be written in this form). The case list of a sweep
// (harness/sweep_cases.h) adds words of its own after these.
#ifndef REMAT_HARNESS_CASE_TEXT_H_
#define REMAT_HARNESS_CASE_TEXT_H_

#include <map>
#include <string>

#include "harness/case_spec.h"

namespace remat {

// The case as one line (no newline). Throws remat::Error naming the field
// whose value holds whitespace or is not writable.
std::string FormatCase(const CaseSpec& spec);

// The words of a line, key to value, in the order read: throws remat::Error
// naming a word without '=', an empty key or a key given twice.
std::map<std::string, std::string> SplitCaseWords(const std::string& line);

// The case a line names (FormatCase's form). Throws remat::Error naming the
// line's problem: a missing problem=, engine= or variant=, an unknown word
// (the known ones listed), a size that is not K=V integers, or a variant
// CaseVariant::Parse refuses. `extra_keys` are words the caller reads
// itself (the sweep's); they are skipped here. Problem and engine names are
// not checked against the registries (the caller knows which it has).
CaseSpec ParseCase(const std::string& line, const std::vector<std::string>& extra_keys = {});

}  // namespace remat

#endif  // REMAT_HARNESS_CASE_TEXT_H_
