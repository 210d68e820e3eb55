#include "engines/api/memory_tracker.h"

#include "engines/api/error.h"

namespace remat {

const char* CategoryName(Category c) {
  switch (c) {
    case Category::kInputs: return "inputs";
    case Category::kActivations: return "activations";
    case Category::kGradients: return "gradients";
    case Category::kScratchpad: return "scratchpad";
    case Category::kHost: return "host";
    case Category::kCount: break;
  }
  return "?";
}

void MemoryTracker::AllocateChecked(int64_t bytes, Category category) {
  if (category == Category::kHost) {
    live_host_ += bytes;
    live_[static_cast<int>(category)] += bytes;
    if (live_host_ > peak_host_) peak_host_ = live_host_;
    high_water_[static_cast<int>(category)] = peak_host_;
    return;
  }
  if (in_pressure_hook_) {
    throw Error(StrCat("allocating ", bytes, " bytes of ", CategoryName(category),
                       " inside the memory tracker's pressure hook at ",
                       site().empty() ? "?" : site(),
                       ": a pressure hook frees memory, it must not allocate"));
  }
  if (soft_cap_bytes_ > 0 && live_total_ + bytes > soft_cap_bytes_) {
    if (pressure_hook_) {
      // The flag is cleared however the hook leaves (it may throw).
      struct InHook {
        bool* flag;
        explicit InHook(bool* f) : flag(f) { *flag = true; }
        ~InHook() { *flag = false; }
      } in_hook(&in_pressure_hook_);
      ++pressure_calls_;
      pressure_hook_(live_total_ + bytes - soft_cap_bytes_);
    }
    if (live_total_ + bytes > soft_cap_bytes_) {
      throw MemoryCapError(
          StrCat("memory cap exceeded at ", site().empty() ? "?" : site(), ": allocating ", bytes,
                 " bytes of ", CategoryName(category), " with ", live_total_,
                 " live (after evicting what could be) would pass the cap of ", soft_cap_bytes_,
                 " bytes (--memory-cap)"),
          soft_cap_bytes_);
    }
  }
  if (limit_bytes_ > 0 && live_total_ + bytes > limit_bytes_) {
    throw Error(StrCat("memory limit exceeded at ", site().empty() ? "?" : site(),
                       ": allocating ", bytes, " bytes of ", CategoryName(category),
                       " with ", live_total_, " live would pass the limit of ",
                       limit_bytes_, " bytes (--max-memory)"));
  }
  Count(bytes, static_cast<int>(category));
}

void MemoryTracker::ResetPeak() {
  peak_total_ = live_total_;
  at_peak_ = live_;
  SetPeakSite();
  peak_host_ = live_host_;
  high_water_ = live_;
}

void MemoryTracker::SetPeakSite() {
  if (site_ref_ != nullptr) {
    peak_site_ref_ = site_ref_;
  } else {
    peak_site_ = site_;
    peak_site_ref_ = nullptr;
  }
}

void MemoryTracker::DetachSiteRefs() {
  if (peak_site_ref_ != nullptr) {
    peak_site_ = *peak_site_ref_;
    peak_site_ref_ = nullptr;
  }
  if (site_ref_ != nullptr) {
    site_ = *site_ref_;
    site_ref_ = nullptr;
  }
}

ScopedSite::ScopedSite(MemoryTracker* tracker, Category category, std::string site)
    : tracker_(tracker),
      saved_category_(tracker->category()),
      saved_site_(tracker->site()) {
  tracker_->set_category(category);
  tracker_->set_site(std::move(site));
}

ScopedSite::~ScopedSite() {
  tracker_->set_category(saved_category_);
  tracker_->set_site(std::move(saved_site_));
}

}  // namespace remat
