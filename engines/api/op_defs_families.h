// The OpDef entries of each family of primitive ops, one source file each
// (op_defs_<family>.cc); op_defs.cc assembles them into the one registry
// that op_def.h looks up. Internal to engines/api's op definitions.
//
// Adding an op: its entry goes into its family's array (a new family: a new
// op_defs_<family>.cc, its function here and in op_defs.cc's list). Each
// function returns a constant array, so op_defs.cc may call it at any time,
// static initialization included.
#ifndef REMAT_ENGINES_API_OP_DEFS_FAMILIES_H_
#define REMAT_ENGINES_API_OP_DEFS_FAMILIES_H_

#include <span>

#include "engines/api/op_def.h"

namespace remat {
namespace op_defs {

// matmul (op_defs_matmul.cc).
std::span<const OpDef> MatMulOpDefs();
// relu, sin, cos, square, add, mul, gelu, scale, bias_add, neg, sub, exp,
// log, silu, gelu_erf, div, where (op_defs_elementwise.cc).
std::span<const OpDef> ElementwiseOpDefs();
// rsqrt, sqrt, tanh, sigmoid, pow, hardtanh (op_defs_unary.cc).
std::span<const OpDef> UnaryOpDefs();
// sum, softmax, cross_entropy, log_softmax, top_k_softmax, mean, amax
// (op_defs_reduce.cc).
std::span<const OpDef> ReduceOpDefs();
// layer_norm, rms_norm, batch_norm, batch_norm_running_mean,
// batch_norm_running_var (op_defs_norm.cc).
std::span<const OpDef> NormOpDefs();
// name, transpose, split_heads, merge_heads, reshape, permute, state, slice,
// expand, cat, select (op_defs_layout.cc).
std::span<const OpDef> LayoutOpDefs();
// embedding, masked_fill (op_defs_index.cc).
std::span<const OpDef> IndexOpDefs();
// dropout (op_defs_random.cc).
std::span<const OpDef> RandomOpDefs();
// conv2d, conv2d_bias, max_pool2d, global_avg_pool, adaptive_avg_pool2d
// (op_defs_conv.cc).
std::span<const OpDef> ConvOpDefs();

}  // namespace op_defs
}  // namespace remat

#endif  // REMAT_ENGINES_API_OP_DEFS_FAMILIES_H_
