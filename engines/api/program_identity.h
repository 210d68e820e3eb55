// A program's identity for caches: two programs are the same structure when
// their ops, attributes, shapes, sites, policies and schedules are, bodies
// included: what a plan made for one holds for the other. One definition,
// for every cache of plans (engines/planned's compiled plans, the
// reverse-mode engines' plans: engines/autodiff/reverse_mode_engine.h).
#ifndef REMAT_ENGINES_API_PROGRAM_IDENTITY_H_
#define REMAT_ENGINES_API_PROGRAM_IDENTITY_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "engines/api/program.h"

namespace remat {

// Fed field by field, a machine word at a time (no strings built: a cache
// hit must cost little next to the run it saves; byte-by-byte FNV-1a was a
// sixth of sin_plain D=1024's run). Strings by length: a hash only picks
// the candidates a comparison confirms, so it needs to spread, not to be
// collision-proof.
class StructureHasher {
 public:
  void Word(uint64_t v) {
    h_ = (h_ ^ v) * 0x9e3779b97f4a7c15ull;
    h_ ^= h_ >> 29;
  }
  template <typename T>
  void Value(const T& v) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t));
    uint64_t w = 0;
    std::memcpy(&w, &v, sizeof(v));
    Word(w);
  }
  // A string's length only: SameStructure compares the contents of a hit
  // (a memcmp, cheaper than hashing them on every run).
  void String(const std::string& s) { Value(s.size()); }
  void Dims(const Shape& s) {
    Value(s.rank());
    for (int64_t d : s.dims()) Value(d);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};

// An op's inputs or ints: one to three numbers, compared inline (vector's ==
// calls memcmp: a call per op on every cache hit).
template <typename T>
bool SameNumbers(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// Whether two programs are the same structure (see the file comment).
bool SameStructure(const Program& a, const Program& b);
// A hash of that structure, consistent with SameStructure: equal programs
// hash equal; a hit must be confirmed with SameStructure.
uint64_t StructureHash(const Program& program);

}  // namespace remat

#endif  // REMAT_ENGINES_API_PROGRAM_IDENTITY_H_
