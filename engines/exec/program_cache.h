// ProgramCache: what an engine made for one case (a plan), kept for the
// runs of the same case, as jax.jit traces and plans once per signature. A
// case is the program's structure (engines/api/program_identity.h), the
// arguments' signature (dtype, shape, which arguments share storage, and
// where in it: what the bytes a run counts depend on) and wrt. A lookup
// hashes the key, then confirms a hit by comparing it whole; the run before
// is tried first, in one pass over the program. Thread-safe; bounded (full,
// it is emptied: a value in use stays alive through its shared_ptr).
#ifndef REMAT_ENGINES_EXEC_PROGRAM_CACHE_H_
#define REMAT_ENGINES_EXEC_PROGRAM_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engines/api/program.h"
#include "engines/api/program_identity.h"
#include "engines/api/tensor.h"

namespace remat {

struct ArgumentSignature {
  DType dtype;
  Shape shape;
  size_t first_sharer;  // the first argument with the same storage
  int64_t offset_bytes;
  bool operator==(const ArgumentSignature& o) const {
    return dtype == o.dtype && shape == o.shape && first_sharer == o.first_sharer &&
           offset_bytes == o.offset_bytes;
  }
};

std::vector<ArgumentSignature> Signature(const std::vector<Tensor>& args);
// Whether `args` have `signature`, without building one.
bool HasSignature(const std::vector<Tensor>& args, const std::vector<ArgumentSignature>& signature);
// The hash of a case: StructureHash, the signature, wrt.
uint64_t CaseHash(const Program& program, const std::vector<ArgumentSignature>& signature,
                  const std::vector<int>& wrt);

template <typename V>
class ProgramCache {
 public:
  static constexpr size_t kMaxEntries = 64;

  // The value made for this case, or null.
  std::shared_ptr<const V> Find(const Program& program, const std::vector<Tensor>& args,
                                const std::vector<int>& wrt) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_ != nullptr && Matches(*last_, program, args, wrt)) return last_->value;
    const std::vector<ArgumentSignature> signature = Signature(args);
    auto [begin, end] = entries_.equal_range(CaseHash(program, signature, wrt));
    for (auto it = begin; it != end; ++it) {
      if (Matches(it->second, program, args, wrt)) {
        last_ = &it->second;
        return last_->value;
      }
    }
    return nullptr;
  }

  void Put(const Program& program, const std::vector<Tensor>& args, const std::vector<int>& wrt,
           std::shared_ptr<const V> value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kMaxEntries) {
      entries_.clear();
      last_ = nullptr;
    }
    std::vector<ArgumentSignature> signature = Signature(args);
    const uint64_t key = CaseHash(program, signature, wrt);
    last_ = &entries_.emplace(key, Entry{program, std::move(signature), wrt, std::move(value)})
                 ->second;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
  }

 private:
  struct Entry {
    Program program;
    std::vector<ArgumentSignature> args;
    std::vector<int> wrt;
    std::shared_ptr<const V> value;
  };
  static bool Matches(const Entry& e, const Program& program, const std::vector<Tensor>& args,
                      const std::vector<int>& wrt) {
    return SameNumbers(e.wrt, wrt) && HasSignature(args, e.args) &&
           SameStructure(e.program, program);
  }

  mutable std::mutex mutex_;
  std::unordered_multimap<uint64_t, Entry> entries_;
  mutable const Entry* last_ = nullptr;
};

}  // namespace remat

#endif  // REMAT_ENGINES_EXEC_PROGRAM_CACHE_H_
