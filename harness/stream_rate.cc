#include "harness/stream_rate.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/lane_blocks.h"

namespace remat {
namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float[], FreeDeleter>;

// The same loop compiled for each lane width the kernels use; the compiler
// vectorizes it (omp simd) in the width its target attribute allows.
#define REMAT_STREAM_PASS(name, target)                                         \
  target void name(const float* a, const float* b, float* out, int64_t n) {  \
    _Pragma("omp parallel for simd schedule(static)") for (int64_t i = 0; i < n; ++i) { \
      out[i] = a[i] + b[i];                                                     \
    }                                                                           \
  }
#if defined(__x86_64__)
REMAT_STREAM_PASS(PassAvx512, __attribute__((target("avx512f"))))
REMAT_STREAM_PASS(PassAvx2, __attribute__((target("avx2"))))
#endif
REMAT_STREAM_PASS(PassBaseline, )
#undef REMAT_STREAM_PASS

void Pass(const float* a, const float* b, float* out, int64_t n) {
#if defined(__x86_64__)
  switch (lane_blocks::BestLaneIsa()) {
    case lane_blocks::LaneIsa::kAvx512:
      return PassAvx512(a, b, out, n);
    case lane_blocks::LaneIsa::kAvx2:
      return PassAvx2(a, b, out, n);
    case lane_blocks::LaneIsa::kBaseline:
      break;
  }
#endif
  PassBaseline(a, b, out, n);
}

}  // namespace

double StreamBytesPerSecond(int64_t pass_bytes, int64_t working_set_bytes, double min_seconds) {
  constexpr int64_t kMaxBytes = int64_t{1} << 36;
  if (pass_bytes < 12 || pass_bytes > kMaxBytes || working_set_bytes < 12 ||
      working_set_bytes > kMaxBytes) {
    throw Error(StrCat("stream rate: pass_bytes ", pass_bytes, " and working_set_bytes ",
                       working_set_bytes, " must each be 12 to 2^36"));
  }
  const int64_t n = std::max<int64_t>(1, pass_bytes / 12);
  const int64_t array_bytes = (n * 4 + 63) / 64 * 64;  // aligned_alloc wants a multiple
  const int64_t arrays = std::max<int64_t>(3, working_set_bytes / array_bytes);
  std::vector<Floats> pool;
  for (int64_t i = 0; i < arrays; ++i) {
    Floats p(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(array_bytes))));
    if (!p) throw Error(StrCat("stream rate: no memory for ", arrays, " arrays of ", array_bytes,
                               " bytes"));
    std::fill(p.get(), p.get() + n, 1.0f);
    pool.push_back(std::move(p));
  }
  using Clock = std::chrono::steady_clock;
  int64_t next = 0;
  auto pass = [&] {
    Pass(pool[next % arrays].get(), pool[(next + 1) % arrays].get(),
         pool[(next + 2) % arrays].get(), n);
    next += 3;
  };
  // A batch is at least the pool's worth of passes and about a millisecond.
  const Clock::time_point probe = Clock::now();
  for (int64_t i = 0; i < arrays; ++i) pass();
  const double one = std::max(1e-9, std::chrono::duration<double>(Clock::now() - probe).count() /
                                        static_cast<double>(arrays));
  const int64_t batch = std::max<int64_t>(arrays, static_cast<int64_t>(1e-3 / one));
  double best = 1e30;
  const Clock::time_point start = Clock::now();
  do {
    const Clock::time_point t0 = Clock::now();
    for (int64_t i = 0; i < batch; ++i) pass();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count() /
                              static_cast<double>(batch));
  } while (std::chrono::duration<double>(Clock::now() - start).count() < min_seconds);
  return static_cast<double>(3 * n * 4) / best;
}

StreamFloor NonContractionStreamFloor(const KernelTrafficByName& traffic, int64_t working_set_bytes) {
  working_set_bytes = StreamPoolBytes(working_set_bytes);
  StreamFloor floor;
  for (const auto& [name, k] : traffic) {
    if (IsContraction(name) || k.calls == 0 || k.bytes() == 0) continue;
    const int64_t call_bytes = std::max<int64_t>(12, k.bytes() / k.calls);
    floor.bytes += k.bytes();
    floor.seconds += static_cast<double>(k.bytes()) /
                     StreamBytesPerSecond(call_bytes, working_set_bytes);
  }
  return floor;
}

}  // namespace remat
