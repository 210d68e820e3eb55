// The checks that a checkpoint, scan or chain of program text fits its body
// (program_text.h: a body's parameters are its op's inputs, a scan's the
// carry, one slice of each xs and its consts; a chain's body is its
// blocks). Internal to program_text's parser.
#ifndef REMAT_ENGINES_API_PROGRAM_TEXT_STRUCTURE_H_
#define REMAT_ENGINES_API_PROGRAM_TEXT_STRUCTURE_H_

#include <string>

#include "engines/api/program.h"
#include "engines/api/program_text_lexer.h"
#include "engines/api/shape.h"

namespace remat {
namespace program_text {

// The output shape of `op`, a checkpoint, scan or chain of `p` whose inputs
// are parsed and whose body is `body`, or an error through `errors` at
// `op_token` (the op's name) or `params_at` (its body's parameters) saying
// what does not fit; `where` names the op ("scan at 5:3").
Shape StructuralShape(const SourceErrors& errors, const Program& p, const Op& op,
                      const Program& body, const Token& op_token, const Token& params_at,
                      const std::string& where);

}  // namespace program_text
}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_TEXT_STRUCTURE_H_
