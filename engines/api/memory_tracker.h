// MemoryTracker: counts the bytes of every tensor an engine run allocates,
// live and at the high-water mark, by category, and remembers where (which
// op) the peak happened. Engines allocate all storage through one tracker per
// run, so the peak a run reports is measured, not estimated.
#ifndef REMAT_ENGINES_API_MEMORY_TRACKER_H_
#define REMAT_ENGINES_API_MEMORY_TRACKER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "engines/api/error.h"

namespace remat {

enum class Category {
  kInputs,       // the arguments (counted, not owned, when the caller holds them)
  kActivations,  // values computed by the forward pass (and by recomputation)
  kGradients,    // cotangents computed by the backward pass
  kScratchpad,   // oneDNN's scratchpad, in user mode
  kHost,         // offloaded residuals (a separate tier, not device memory)
  kCount,
};
inline constexpr int kNumCategories = static_cast<int>(Category::kCount);
const char* CategoryName(Category c);

// What MemoryTracker::Allocate throws when an allocation would pass the soft
// cap (set_soft_cap_bytes) even after the pressure hook has freed what it
// could. A remat::Error like any other: catching Error catches it; engines
// that search for the smallest cap that works catch it by this type.
class MemoryCapError : public Error {
 public:
  MemoryCapError(const std::string& message, int64_t cap_bytes)
      : Error(message), cap_bytes_(cap_bytes) {}
  int64_t cap_bytes() const { return cap_bytes_; }

 private:
  int64_t cap_bytes_;
};

class MemoryTracker {
 public:
  MemoryTracker() = default;
  MemoryTracker(const MemoryTracker&) = delete;
  MemoryTracker& operator=(const MemoryTracker&) = delete;

  // Records an allocation or a release of `bytes` in `category`. The peak is
  // the highest sum of live bytes over all categories except kHost, which is
  // tracked as its own peak (host memory is not the memory being saved).
  // Inline where nothing is to check (no host tier, cap, limit or hook
  // running): every op's output is counted, and a call was a tenth of a
  // compiled engine's time outside kernels on the scalar chains.
  void Allocate(int64_t bytes, Category category) {
    if (category == Category::kHost || in_pressure_hook_ || soft_cap_bytes_ > 0 ||
        limit_bytes_ > 0) {
      return AllocateChecked(bytes, category);
    }
    Count(bytes, static_cast<int>(category));
  }
  void Release(int64_t bytes, Category category) {
    live_[static_cast<int>(category)] -= bytes;
    if (category == Category::kHost) {
      live_host_ -= bytes;
    } else {
      live_total_ -= bytes;
    }
  }

  // The category new allocations get, and the op they are attributed to.
  // Engines set both as they walk the program (see ScopedSite).
  Category category() const { return category_; }
  void set_category(Category c) { category_ = c; }
  const std::string& site() const { return site_ref_ != nullptr ? *site_ref_ : site_; }
  // By reference: assigning into the site's existing storage allocates
  // nothing, where a by-value parameter allocated a copy on every call (an
  // executor sets the site once per op).
  void set_site(const std::string& site) {
    site_ = site;
    site_ref_ = nullptr;
  }
  void set_site(std::string&& site) {
    site_ = std::move(site);
    site_ref_ = nullptr;
  }
  // The site without a copy: `site` must stay alive and unchanged until
  // DetachSiteRefs (a compiled plan's names, kept by the engine for the run;
  // a new peak refers to it too, where a copy a peak cost a forward pass one
  // per op).
  void set_site_ref(const std::string& site) { site_ref_ = &site; }
  // Copies what set_site_ref named (the site, the peak's site) into the
  // tracker: an engine calls it before those strings may go, and before the
  // tracker leaves the run (Result::tracker, RunOptions::on_tracker).
  void DetachSiteRefs();

  // A dry-run tracker counts allocations without making them: buffers it
  // counts have no storage, and kernels skip their arithmetic. Engines use it
  // to predict a run's peak from its schedule before running it.
  bool dry_run() const { return dry_run_; }
  void set_dry_run(bool dry) { dry_run_ = dry; }

  // A limit on live device bytes; an allocation past it throws remat::Error
  // before any memory is touched. 0 means no limit.
  void set_limit_bytes(int64_t limit) { limit_bytes_ = limit; }
  int64_t limit_bytes() const { return limit_bytes_; }

  // A soft cap on live device bytes (every category but kHost), for engines
  // that rematerialize online (RunOptions::memory_cap_bytes): before an
  // allocation that would take live bytes past the cap, the tracker calls the
  // pressure hook with the bytes that must be freed for it to fit (live +
  // allocation - cap). The hook frees what it can (an engine evicts tensors;
  // their releases are counted at once) and returns. If the allocation still
  // does not fit, Allocate throws MemoryCapError, naming the site, the cap
  // and "--memory-cap", before anything is counted or allocated: measured
  // peak_bytes() never passes the cap. Without a hook the cap alone throws.
  // The hook must not allocate device memory through this tracker (that
  // throws remat::Error; the host tier is allowed, for offloading). The hard limit
  // (set_limit_bytes) is checked after the cap. 0: no cap.
  using PressureHook = std::function<void(int64_t bytes_to_free)>;
  void set_soft_cap_bytes(int64_t cap) { soft_cap_bytes_ = cap; }
  int64_t soft_cap_bytes() const { return soft_cap_bytes_; }
  void set_pressure_hook(PressureHook hook) { pressure_hook_ = std::move(hook); }
  // How many times the hook has been called (an engine's tests and stats).
  int64_t pressure_calls() const { return pressure_calls_; }

  int64_t live_bytes() const { return live_total_; }
  int64_t live_bytes(Category c) const { return live_[static_cast<int>(c)]; }
  int64_t peak_bytes() const { return peak_total_; }
  int64_t peak_host_bytes() const { return peak_host_; }
  // Live bytes per category at the moment of the peak, and the op then.
  // Which moment is the peak depends on every category, the scratchpad
  // oneDNN's kernel asks for included (it differs between ISAs): to bound
  // one category, use its high-water mark.
  int64_t peak_bytes(Category c) const { return at_peak_[static_cast<int>(c)]; }
  // The highest live bytes of one category alone, over the run (kHost's is
  // peak_host_bytes()). high_water_bytes(c) >= peak_bytes(c).
  int64_t high_water_bytes(Category c) const { return high_water_[static_cast<int>(c)]; }
  const std::string& peak_site() const {
    return peak_site_ref_ != nullptr ? *peak_site_ref_ : peak_site_;
  }

  // Forgets the high-water mark: the peak restarts from the live bytes now.
  void ResetPeak();

  // Bytes of tensor storage that Buffers counted by this tracker allocated
  // over its life (a dry-run tracker's buffers have none); the arguments
  // counted but not owned are not storage. With TensorStorageBytes()
  // (tensor.h), what lets the suite check that a run allocated no storage
  // outside the trackers it reported. Buffer calls AddStorage.
  int64_t storage_bytes() const { return storage_bytes_; }
  void AddStorage(int64_t bytes) { storage_bytes_ += bytes; }

 private:
  // Allocate with its checks: the host tier, the soft cap and its hook, the
  // limit.
  void AllocateChecked(int64_t bytes, Category category);
  // Counts a device allocation (category c is not kHost) that passed them.
  void Count(int64_t bytes, int c) {
    live_total_ += bytes;
    if (live_total_ > peak_total_) {
      peak_total_ = live_total_;
      // Copied before live_[c] is written: a vector load of live_ right
      // after that store is not forwarded from it and stalls.
      at_peak_ = live_;
      at_peak_[c] += bytes;
      SetPeakSite();
    }
    live_[c] += bytes;
    if (live_[c] > high_water_[c]) high_water_[c] = live_[c];
  }
  // The peak's site: the current one, by reference if it is one.
  void SetPeakSite();
  bool dry_run_ = false;
  Category category_ = Category::kActivations;
  std::string site_;
  const std::string* site_ref_ = nullptr;  // set_site_ref's, instead of site_
  int64_t limit_bytes_ = 0;
  int64_t soft_cap_bytes_ = 0;
  PressureHook pressure_hook_;
  bool in_pressure_hook_ = false;
  int64_t pressure_calls_ = 0;
  std::array<int64_t, kNumCategories> live_{};
  std::array<int64_t, kNumCategories> at_peak_{};
  std::array<int64_t, kNumCategories> high_water_{};
  int64_t live_total_ = 0;
  int64_t peak_total_ = 0;
  int64_t live_host_ = 0;
  int64_t peak_host_ = 0;
  int64_t storage_bytes_ = 0;
  std::string peak_site_;
  const std::string* peak_site_ref_ = nullptr;  // instead of peak_site_ (set_site_ref)
};

// Sets the tracker's category and site for a scope, then restores them.
class ScopedSite {
 public:
  ScopedSite(MemoryTracker* tracker, Category category, std::string site);
  ~ScopedSite();
  ScopedSite(const ScopedSite&) = delete;
  ScopedSite& operator=(const ScopedSite&) = delete;

 private:
  MemoryTracker* tracker_;
  Category saved_category_;
  std::string saved_site_;
};

}  // namespace remat

#endif  // REMAT_ENGINES_API_MEMORY_TRACKER_H_
