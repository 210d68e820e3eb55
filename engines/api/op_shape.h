// The shape rules of the primitive ops, in one place: the tracer checks the
// ops it traces with them and the program text parser (program_text.h) the
// ops it reads, so a file's shapes are validated exactly like a traced
// program's.
#ifndef REMAT_ENGINES_API_OP_SHAPE_H_
#define REMAT_ENGINES_API_OP_SHAPE_H_

#include <vector>

#include "engines/api/program.h"
#include "engines/api/shape.h"

namespace remat {

// How many inputs primitive op `kind` takes; -1 for the structural ops
// (checkpoint, scan, chain), whose arity their body decides.
int Arity(OpKind kind);

// The output shape of primitive op `op` (its kind and attributes: scale's
// scalar, split_heads' and merge_heads' ints) on inputs of `inputs`' shapes.
// Throws remat::Error for a wrong number of inputs or attributes, or shapes
// the op does not take; the message names the shapes but not the op's site
// (callers prefix where the op is).
Shape OutputShape(const Op& op, const std::vector<Shape>& inputs);

// remat::Error unless each input of primitive `op` has the dtype its OpDef
// takes there (i32 where OpDef::int_inputs says, f32 elsewhere), naming
// the input and both dtypes.
void CheckInputDTypes(const Op& op, const std::vector<DType>& inputs);

}  // namespace remat

#endif  // REMAT_ENGINES_API_OP_SHAPE_H_
