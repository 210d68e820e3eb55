// .npy files, as numpy.save writes them. This is how users feed remat-bench
// the inputs of a JAX or PyTorch run (`remat run --inputs DIR`) and take its
// results back (`--dump DIR`) to compare gradients.
//
// Read: format versions 1.0, 2.0 and 3.0; dtypes '<f4' (f32), '<f8' (f64),
// '<i4' (i32: ids, targets, seeds) and '<i8' (read as i32, numpy's default
// integer; a value outside int32 is an error naming its index) only; C order
// only; rank 0 to kMaxRank (6). The header dict is parsed the way
// numpy writes it, tolerating what other writers vary: keys in any order,
// single or double quotes, any spacing, a trailing comma or none, Python 2's
// "3L" dimensions.
//
// Every fault throws remat::Error whose message starts with the file's name
// and names the fault: a missing or unreadable file, truncation (shorter than
// the preamble, a header length past the end, less data than the shape
// needs), trailing bytes after the data, bad magic, an unsupported version, a
// malformed header dict, Fortran order, big-endian data, another dtype, rank
// over 3, a negative dimension or a shape whose byte size overflows. Nothing
// reads out of bounds, and nothing is allocated for the data before its
// length has been checked against the header, so a lying header cannot make
// the reader allocate more than the file holds.
#ifndef REMAT_ENGINES_API_NPY_H_
#define REMAT_ENGINES_API_NPY_H_

#include <string>

#include "engines/api/tensor.h"

namespace remat {

// Reads the .npy file at `path` into a new, uncounted tensor. Errors name
// `path`.
Tensor ReadNpy(const std::string& path);

// Parses the whole contents of a .npy file (the same checks as ReadNpy,
// without the file: for tests and the fuzzer). `name_for_errors` starts every
// error message.
Tensor ParseNpy(const std::string& bytes, const std::string& name_for_errors);

// Writes `t` (defined, not a dry-run tensor) to `path`, replacing it, as the
// bytes SerializeNpy returns. Errors name `path`.
void WriteNpy(const std::string& path, const Tensor& t);

// The bytes numpy.save writes for `t`: version 1.0, descr '<f4', '<f8' or '<i4',
// fortran_order False, the shape as Python writes a tuple ("()", "(5,)",
// "(5, 4)"), the header padded with spaces and ended with '\n' so that the
// data starts at a multiple of 64 bytes. Throws Error for an undefined or
// dry-run tensor.
std::string SerializeNpy(const Tensor& t);

}  // namespace remat

#endif  // REMAT_ENGINES_API_NPY_H_
