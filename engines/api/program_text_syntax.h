// The pieces of program text (program_text.h) that its printer, its parser
// and its comparison share: what an ID is, how strings, names, types and
// numbers are written, and which ops have bodies. Internal to
// program_text's files.
#ifndef REMAT_ENGINES_API_PROGRAM_TEXT_SYNTAX_H_
#define REMAT_ENGINES_API_PROGRAM_TEXT_SYNTAX_H_

#include <string>
#include <vector>

#include "engines/api/program.h"
#include "engines/api/shape.h"
#include "engines/api/tensor.h"

namespace remat {
namespace program_text {

// checkpoint, scan and chain: the ops with a body.
bool IsStructural(OpKind kind);

// ID := [A-Za-z0-9_.]+
bool IsIdChar(char c);
bool IsId(const std::string& s);

// `s` as a STRING: quoted, with \" \\ \n \t and \xHH escapes.
std::string Quote(const std::string& s);
// `s` as a NAME: bare where it is an ID, else quoted.
std::string NameText(const std::string& s);
// A TYPE: "f32[2,4]".
std::string TypeText(const Shape& s, DType d = DType::kF32);
// The shortest decimal that reads back as the same double (the sign of a
// zero or a NaN kept).
std::string NumberText(double x);
// The types of `values` of `p`, separated by ", " (for error messages).
std::string Types(const Program& p, const std::vector<int>& values);

}  // namespace program_text
}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_TEXT_SYNTAX_H_
