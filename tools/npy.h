// .npy files, as numpy.save writes them: format versions 1.0, 2.0 and 3.0,
// dtypes '<f4' and '<f8', C order, rank 0 to 3. This is how users feed
// remat-bench the inputs of a JAX or PyTorch run and compare gradients.
//
// Every fault (a missing or truncated file, bad magic, an unsupported version,
// a malformed header, Fortran order, big-endian data, another dtype, a shape
// that does not fit the data) throws remat::Error naming the file and the
// fault. Nothing is allocated before the data length has been checked
// against the header.
#ifndef REMAT_TOOLS_NPY_H_
#define REMAT_TOOLS_NPY_H_

#include <string>

#include "engines/api/tensor.h"

namespace remat {

// Reads the .npy file at `path` into an uncounted tensor.
Tensor ReadNpy(const std::string& path);

// Parses the bytes of a .npy file; `name` is how errors call it.
Tensor ParseNpy(const std::string& bytes, const std::string& name);

// Writes `t` as a version 1.0 .npy file, its header padded so the data starts
// at a multiple of 64 bytes, as numpy does.
void WriteNpy(const std::string& path, const Tensor& t);

// The bytes WriteNpy writes.
std::string SerializeNpy(const Tensor& t);

}  // namespace remat

#endif  // REMAT_TOOLS_NPY_H_
