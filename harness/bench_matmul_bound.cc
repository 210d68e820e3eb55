#include "harness/bench_matmul_bound.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/registry.h"
#include "engines/onednn/kernel_traffic.h"
#include "engines/onednn/matmul_calls.h"
#include "harness/stream_rate.h"

namespace remat::bench {

void RunCaseMatMuls(RowState& s) {
  std::vector<const Tensor*> operands;
  for (const RowState::BoundCall& c : s.bound_calls) {
    operands.clear();
    for (const Tensor& t : c.operands) operands.push_back(&t);
    Tensor out = s.kernels->CallInto(c.op, operands, c.attrs, c.out);
    benchmark::DoNotOptimize(out.raw());
  }
}

void SetUpMatMulBound(RowState* s) {
  const Case& c = s->session->cases.Get(s->row);
  // Eager's contractions on the case, from one run of it, with where each
  // operand's elements were.
  std::vector<KernelCallSite> sites;
  KernelTrafficByName traffic;
  int64_t eager_peak_bytes = 0;
  {
    KernelTrafficRecorder recorder(KernelTrafficRecorder::KeepCalls::kContractionSites);
    RunOptions options;
    options.max_memory_bytes = s->session->max_memory_bytes;
    eager_peak_bytes =
        MakeEngine(kBaselineEngine)->ValueAndGrad(c.program, c.inputs, c.wrt, options).stats.peak_bytes;
    sites = recorder.sites();
    traffic = recorder.traffic();
  }
  // Measured once, by the first window's process (about 50 ms a kernel).
  if (!s->session->child) {
    const StreamFloor floor = NonContractionStreamFloor(traffic, eager_peak_bytes);
    if (floor.bytes > 0) s->stream_floor = floor;
  }
  if (sites.empty()) {
    throw Error(StrCat("matmul bound: eager makes no matmul or convolution on ", c.ToString()));
  }
  s->kernels = std::make_unique<OneDnnKernels>();
  s->tracker = std::make_shared<MemoryTracker>();
  s->kernels->Bind(s->tracker);
  // One buffer per address eager's contractions read or wrote, as large as
  // the largest operand or output there: where eager read one buffer twice
  // (a weight in the forward and the backward), the replay does too; where
  // eager read L weights, so does the replay, from memory rather than
  // cache; and where eager wrote L activations it keeps for the backward,
  // the replay writes L buffers, not one output buffer that the allocator
  // hands back hot after every call (README: the bound's outputs).
  std::map<const void*, int64_t> elements_at;
  auto note = [&elements_at](const void* data, const Shape& shape) {
    int64_t& n = elements_at[data];
    n = std::max(n, shape.num_elements());
  };
  for (const KernelCallSite& site : sites) {
    for (size_t i = 0; i < site.operand_data.size(); ++i) {
      note(site.operand_data[i], site.operand_shapes[i]);
    }
    note(site.out_data, site.out_shape);
  }
  // Values in [-1, 1): the same arithmetic the problems' inputs make (no
  // zeros or denormals that some kernels might shortcut).
  uint64_t state = 1;
  std::map<const void*, Tensor> buffer_at;
  for (const auto& [data, n] : elements_at) {
    Tensor t = Tensor::Zeros(DType::kF32, Shape({n}), s->tracker, Category::kInputs);
    float* values = t.f32();
    for (int64_t i = 0; i < n; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      values[i] = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
    }
    buffer_at.emplace(data, std::move(t));
  }
  for (const KernelCallSite& site : sites) {
    RowState::BoundCall call{site.op, site.attrs, {},
                             buffer_at.at(site.out_data).View(0, site.out_shape)};
    for (size_t i = 0; i < site.operand_data.size(); ++i) {
      call.operands.push_back(buffer_at.at(site.operand_data[i]).View(0, site.operand_shapes[i]));
    }
    s->bound_calls.push_back(std::move(call));
  }
  // Warm-up: creates the primitives and counts the FLOPs, as the engines
  // count them.
  s->kernels->reset_flops();
  const Clock::time_point start = Clock::now();
  RunCaseMatMuls(*s);
  s->runs_per_sample = RunsPerSample(SecondsSince(start));
  s->flops = s->kernels->flops();
  if (s->session->paired) {
    // Eager ran above, so it runs here too (the same options as the rows').
    RunOptions options;
    options.max_memory_bytes = s->session->max_memory_bytes;
    s->eager_flops = s->session->baselines.Get(s->row, c, options).flops;
    s->paired = true;
  }
}

void RunMatMulBound(benchmark::State& state, RowState* s) {
  if (!EnsureReady(state, s)) return;
  const bool memory_pass = s->session->memory.active();
  // Eager's runs beside the bound's: as the rows' pairs run them.
  RunOptions options;
  options.max_memory_bytes = s->session->max_memory_bytes;
  options.predict_memory = false;
  options.time_kernels = false;
  try {
    const Case& c = s->session->cases.Get(s->row);
    for (auto _ : state) {
      if (memory_pass) {
        state.SetIterationTime(0);
        continue;
      }
      // Sampled by the same rule as the rows, paired with eager like them:
      // eager's share of its matmuls' time is then the median of pairs
      // taken milliseconds apart, not two least times taken seconds apart
      // while the machine's speed drifted (mlp_chain's eager moved 25.8 to
      // 31.0 ms between three back-to-back engine_loop runs). For at least
      // kBoundMinSeconds: every row of its case is checked against it, a
      // bound taken while a neighbour ran would flag them all, and its
      // samples are milliseconds, so a second more costs little.
      const SamplingRule rule = BoundRule(RuleNow(*s->session, s->weight));
      SamplePaired(s, s->paired ? &s->session->baselines.Get(s->row, c, options) : nullptr, c,
                   options, rule, [&] {
                     MatMulRecorder recorder;
                     const Sample sample =
                         TimeSample(s->runs_per_sample, [&](int64_t) { RunCaseMatMuls(*s); });
                     s->timings.row_ms.push_back(sample.ms);
                     s->timings.row_delay.push_back(sample.delay);
                     s->runs += s->runs_per_sample;
                     AddImpls(recorder, &s->matmul_impls);
                   },
                   [&] { RunCaseMatMuls(*s); });
      state.SetIterationTime(Estimate(s->timings).row_ms / 1e3);
    }
  } catch (const std::exception& e) {
    s->error = e.what();
    state.SkipWithError(s->error.c_str());
    return;
  }
  if (memory_pass) {
    s->session->memory.Record(s->tracker->peak_bytes());
    return;
  }
  s->stats.peak_bytes = s->tracker->peak_bytes();
  for (int c = 0; c < kNumCategories; ++c) {
    s->stats.peak_bytes_by_category[c] = s->tracker->peak_bytes(static_cast<Category>(c));
  }
  s->stats.flops_forward = s->flops;
  const RowEstimate estimate = Estimate(s->timings);
  SetCounters(state, *s, s->tracker->peak_bytes(), s->flops, estimate.row_ms / 1e3);
  state.counters["samples"] = static_cast<double>(estimate.samples);
  if (estimate.spread) state.counters["spread_pct"] = 100 * *estimate.spread;
}

}  // namespace remat::bench
