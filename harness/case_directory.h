// A case written as a directory for an engine in another process: what
// `remat conform` hands each case to (tools/conform.h) and what the bench's
// --peer times (tools/peer_time.py).
#ifndef REMAT_HARNESS_CASE_DIRECTORY_H_
#define REMAT_HARNESS_CASE_DIRECTORY_H_

#include <string>
#include <vector>

#include "harness/case_spec.h"
#include "harness/conformance.h"

namespace remat {

// Writes DIR/program.txt (c.program, engines/api/program_text.h),
// DIR/<input>.npy for every parameter (c.inputs) and DIR/case.json
// {"problem", "variant", "wrt": [names]}, replacing whatever DIR held.
// `variant` is what c.program was built under (its label: "as-written",
// "dots_saveable", "schedule:sqrt"), for logs: the program says it all.
// Returns the names in "wrt"; throws remat::Error naming a file it cannot
// write.
std::vector<std::string> WriteCaseDirectory(const Case& c, const CaseVariant& variant,
                                            const std::string& dir);

// Replaces every input of `c` by DIR/<input name>.npy (what WriteCaseDirectory
// and tools/torch_export.py write; remat run --inputs). Throws remat::Error
// naming the file for a missing input, a shape that is not the program's,
// and a .npy that names no input (other than the loss.npy, grad_*.npy and
// state_*.npy remat run --dump writes beside them), and for a DIR that is
// not a directory.
void ReadCaseInputs(const std::string& dir, Case* c);

}  // namespace remat

#endif  // REMAT_HARNESS_CASE_DIRECTORY_H_
