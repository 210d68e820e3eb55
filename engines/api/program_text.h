// Programs as files: a text format for Program that a person can write and
// read, and that an exporter (a script tracing a PyTorch or JAX model) can
// write line by line. PrintProgram writes it; ParseProgram reads it back, and
// ParseProgram(PrintProgram(p)) is p again, attribute for attribute (sites,
// scopes, labels, policies, schedules, scalars to the bit).
//
// An example (the layer_loss problem at d=4, N=2):
//
//   # comments run from '#' to the end of the line
//   program layer_loss(w1: f32[4,4], w2: f32[4,4], w3: f32[4,4], x: f32[2,4]) {
//     %4: f32[2,4] = matmul(%x, %w1) @ "problems/layer_loss.cc:40"
//     %5: f32[2,4] = relu(%4) @ "problems/layer_loss.cc:40"
//     %6: f32[2,4] = checkpoint(%5, %w2) name="middle" policy="nothing_saveable" @ "problems/layer_loss.cc:41" {
//       body(arg0: f32[2,4], arg1: f32[4,4])
//       %2: f32[2,4] = matmul(%arg0, %arg1) @ "problems/layer_loss.cc:30" scope="middle"
//       return %2
//     }
//     %7: f32[2,4] = relu(%6)
//     %8: f32[2,4] = matmul(%7, %w3)
//     %9: f32[2,4] = square(%8)
//     %10: f32[] = sum(%9)
//     return %10
//   }
//
// The grammar (one statement per line; blank lines and comments anywhere
// between statements; a parameter list may span lines):
//
//   file      := 'program' NAME '(' params ')' '{' EOL statements '}' EOF
//   params    := [ param { ',' param } ]
//   param     := ID ':' TYPE [ 'name' '=' STRING ] [ 'data' ]   (data: an image, ids, targets,
//                                                        a folded constant: not in a program
//                                                        file's default --wrt)
//   statement := '%' ID [ ':' TYPE ] '=' OP '(' [ VALUE { ',' VALUE } ] ')'
//                  { attribute } [ '{' EOL body '}' ] EOL
//              | 'return' VALUE EOL                     (the last statement)
//   body      := 'body' [ NAME ] '(' params ')' EOL statements
//   attribute := '@' STRING                             (site: where it was traced)
//              | 'scope' '=' STRING                     (the enclosing labelled function)
//              | 'name' '=' STRING                      (name: the label, required;
//                                                        checkpoint, scan, chain: the region)
//              | 'policy' '=' STRING                    (checkpoint: Policy::Parse's spec;
//                                                        default nothing_saveable)
//              | 'schedule' '=' STRING                  (scan, chain: a schedule spec; its
//                                                        syntax is checked on loading:
//                                                        FILE:LINE:COLUMN: schedule 'SPEC': why)
//              | 'scalar' '=' NUMBER                    (scale: c, required)
//              | 'ints' '=' '[' INT { ',' INT } ']'     (split_heads: [B,H]; merge_heads: [B];
//                                                        sum, mean, amax: the reduced axes,
//                                                        negative from the end; none: every
//                                                        axis; hardtanh: [MIN,MAX])
//              | 'keepdim' '=' ( '0' | '1' )            (sum, mean, amax: 1 keeps the reduced
//                                                        axes with size 1, as PyTorch's
//                                                        keepdim=True; default 0)
//   TYPE      := 'f32' '[' [ INT { ',' INT } ] ']'      ('f32[]' is a scalar)
//   VALUE     := '%' ID
//   NAME      := ID | STRING
//   ID        := [A-Za-z0-9_.]+
//   STRING    := '"' ... '"' with \" \\ \n \t \xHH escapes, on one line
//   OP        := a primitive's name in the OpDef registry (engines/api/op_defs.cc:
//                matmul relu sin cos square add mul sum name softmax layer_norm
//                gelu scale transpose split_heads merge_heads bias_add neg sub
//                exp log ... div rsqrt sqrt tanh sigmoid pow hardtanh where mean
//                amax: every op_defs_<family>.cc entry), or checkpoint scan chain;
//                add sub mul div where broadcast as numpy does
//
// Values: a parameter is named by its ID (its name in the program, unless
// `name=` gives another, e.g. "" for a chain's unnamed inputs); an op's
// result by the ID before '='. Parameters come first, then op results in
// order, as Program numbers them. Each body has its own values: a body reads
// only its parameters and its own results (a value of the enclosing program
// is a capture, an error). A checkpoint's body parameters are its inputs; a
// scan's are the carry and one slice of each xs; a chain's are its inputs,
// and its body's ops are checkpoint blocks as program.h describes. The body's
// name defaults to its op's ("checkpoint", "scan", "chain"). The top-level
// program returns a scalar (the loss value_and_grad differentiates).
//
// Types are checked as the tracer checks them (engines/api/op_shape.h): a
// declared type that differs from what the op gives is an error naming both.
// The dtype is f32 (remat-bench's programs are f32; f64 is the oracle's
// business).
//
// Errors: every bad input throws remat::Error "FILE:LINE:COLUMN: what was
// wrong; what was expected", LINE and COLUMN from 1 (COLUMN in bytes); never a
// crash, whatever the input.
#ifndef REMAT_ENGINES_API_PROGRAM_TEXT_H_
#define REMAT_ENGINES_API_PROGRAM_TEXT_H_

#include <string>

#include "engines/api/program.h"

namespace remat {

// The text of `program`, which ParseProgram reads back as the same program.
std::string PrintProgram(const Program& program);

// Parses the text of one program; `filename` names it in error messages.
Program ParseProgram(const std::string& text, const std::string& filename);

// Reads and parses the file at `path` (remat::Error "PATH: cannot open" if
// it cannot be read).
Program ReadProgramFile(const std::string& path);

// The first difference between two programs, structurally, attribute by
// attribute and body by body ("op 3 (matmul): site 'a.cc:1' vs 'a.cc:2'"),
// or "" when they are the same program.
std::string ProgramDifference(const Program& a, const Program& b);

}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_TEXT_H_
