#include "engines/exec/program_cache.h"

namespace remat {
namespace {

size_t FirstSharer(const std::vector<Tensor>& args, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (args[j].buffer() == args[i].buffer()) return j;
  }
  return i;
}

}  // namespace

std::vector<ArgumentSignature> Signature(const std::vector<Tensor>& args) {
  std::vector<ArgumentSignature> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    out.push_back({args[i].dtype(), args[i].shape(), FirstSharer(args, i), args[i].offset_bytes()});
  }
  return out;
}

bool HasSignature(const std::vector<Tensor>& args,
                  const std::vector<ArgumentSignature>& signature) {
  if (signature.size() != args.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentSignature& s = signature[i];
    if (s.dtype != args[i].dtype() || !(s.shape == args[i].shape()) ||
        s.first_sharer != FirstSharer(args, i) || s.offset_bytes != args[i].offset_bytes()) {
      return false;
    }
  }
  return true;
}

uint64_t CaseHash(const Program& program, const std::vector<ArgumentSignature>& signature,
                  const std::vector<int>& wrt) {
  StructureHasher h;
  h.Value(StructureHash(program));
  for (const ArgumentSignature& a : signature) {
    h.Value(a.dtype);
    h.Dims(a.shape);
    h.Value(a.first_sharer);
    h.Value(a.offset_bytes);
  }
  for (int w : wrt) h.Value(w);
  return h.value();
}

}  // namespace remat
