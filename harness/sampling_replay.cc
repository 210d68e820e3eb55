#include "harness/sampling_replay.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <utility>

#include "engines/api/error.h"
#include "harness/bench_plan.h"
#include "harness/case_spec.h"

namespace remat::bench {
namespace {

template <typename T>
T Field(const nlohmann::json& row, const char* key, T fallback) {
  auto it = row.find(key);
  if (it == row.end() || it->is_null()) return fallback;
  return it->get<T>();
}

std::vector<double> Doubles(const nlohmann::json& samples, const char* key) {
  std::vector<double> out;
  auto it = samples.find(key);
  if (it == samples.end()) return out;
  if (!it->is_array()) throw Error(StrCat("samples_ms.", key, ": not a list of numbers"));
  for (const nlohmann::json& v : *it) out.push_back(v.get<double>());
  return out;
}

// The row's case, as PlanRows named it: the row's name less its kind's
// prefix and, for an engine's row, its "/engine/label" (and "/control").
// From the name, not CaseKeyOf: a results file keeps the parameters as an
// object, whose order is not the problem's, and a model's case is its label.
std::string CaseKeyFromName(const std::string& name, const PlannedRow& row) {
  const std::string bound = "BM_OneDnnMatMulBound/";
  const std::string value = "BM_ValueAndGrad/";
  if (row.kind == RowKind::kMatMulBound) {
    if (name.rfind(bound, 0) != 0) throw Error(StrCat("row '", name, "': a bound row named otherwise"));
    return name.substr(bound.size());
  }
  std::string rest = name.rfind(value, 0) == 0 ? name.substr(value.size()) : name;
  if (row.control) {
    const std::string suffix = "/control";
    if (rest.size() > suffix.size() && rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0) {
      rest.resize(rest.size() - suffix.size());
    }
  }
  const std::string tail = StrCat("/", row.engine, "/", row.variant.Label());
  if (rest.size() > tail.size() && rest.compare(rest.size() - tail.size(), tail.size(), tail) == 0) {
    return rest.substr(0, rest.size() - tail.size());
  }
  return rest;  // a peer's row: named by its case alone
}

// A row's recorded samples, by window: [begin, end) of each.
std::vector<std::pair<size_t, size_t>> Windows(const Timings& t) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  for (size_t start : t.window_starts) {
    out.push_back({begin, start});
    begin = start;
  }
  out.push_back({begin, t.row_ms.size()});
  return out;
}

// Appends window `w` to `to` (a window after the first starts a window).
void Append(const Timings& w, Timings* to) {
  if (!to->row_ms.empty()) to->window_starts.push_back(to->row_ms.size());
  auto add = [](const std::vector<double>& from, std::vector<double>* into) {
    into->insert(into->end(), from.begin(), from.end());
  };
  // Samples without a reading line up with the ones that have one.
  to->link_ns.resize(to->row_ms.size(), 0);
  add(w.row_ms, &to->row_ms);
  add(w.eager_ms, &to->eager_ms);
  add(w.row_delay, &to->row_delay);
  add(w.eager_delay, &to->eager_delay);
  add(w.link_ns, &to->link_ns);
  to->reference_link_ns = w.reference_link_ns;
}

}  // namespace

std::vector<RowResult> RowsOfRun(const nlohmann::json& run) {
  std::vector<RowResult> rows;
  if (!run.contains("rows") || !run["rows"].is_array()) {
    throw Error("a results file without \"rows\": not one bench wrote");
  }
  for (const nlohmann::json& j : run["rows"]) {
    RowResult r;
    const std::string name = Field<std::string>(j, "name", "");
    if (name.empty()) throw Error("a row without a name");
    try {
      PlannedRow& p = r.row;
      p.name = name;
      p.kind = Field<bool>(j, "matmul_bound", false) ? RowKind::kMatMulBound : RowKind::kValueAndGrad;
      p.problem = Field<std::string>(j, "problem", "");
      p.program_file = Field<std::string>(j, "program_file", "");
      p.engine = Field<std::string>(j, "engine", "");
      p.variant = CaseVariant::Parse(Field<std::string>(j, "policy", ""));
      p.control = Field<bool>(j, "control", false);
      p.big = Field<bool>(j, "big", false);
      if (j.contains("params") && j["params"].is_object()) {
        for (const auto& [k, v] : j["params"].items()) p.params.push_back({k, v.get<int64_t>()});
      }
      p.case_key = CaseKeyFromName(name, p);
      r.error = Field<std::string>(j, "error", "");
      r.iterations = Field<int64_t>(j, "iterations", 0);
      r.sampling_seconds = Field<double>(j, "sampling_seconds", 0.0);
      r.flops_forward = Field<int64_t>(j, "flops_forward", 0);
      r.flops_recomputed = Field<int64_t>(j, "flops_recomputed", 0);
      r.flops_backward = Field<int64_t>(j, "flops_backward", 0);
      r.eager_flops = Field<int64_t>(j, "eager_flops", 0);
      r.peak_bytes = Field<int64_t>(j, "peak_bytes", 0);
      r.residual_bytes = Field<int64_t>(j, "residual_bytes", 0);
      r.memory_cap_bytes = Field<int64_t>(j, "memory_cap_bytes", 0);
      r.budget_bytes = Field<int64_t>(j, "budget_bytes", 0);
      if (j.contains("overhead_fraction")) r.overhead_fraction = j["overhead_fraction"].get<double>();
      if (j.contains("overhead_ns_per_call")) {
        r.overhead_ns_per_call = j["overhead_ns_per_call"].get<double>();
      }
      if (j.contains("stream_floor_ms")) r.stream_floor_ms = j["stream_floor_ms"].get<double>();
      r.stream_floor_bytes = Field<int64_t>(j, "stream_floor_bytes", 0);
      if (j.contains("matmul_impls")) r.matmul_impls = j["matmul_impls"].get<std::vector<std::string>>();
      Timings t;
      if (j.contains("samples_ms") && j["samples_ms"].is_object()) {
        const nlohmann::json& s = j["samples_ms"];
        t.row_ms = Doubles(s, "row");
        t.eager_ms = Doubles(s, "eager");
        t.row_delay = Doubles(s, "row_delay");
        t.eager_delay = Doubles(s, "eager_delay");
        t.link_ns = Doubles(s, "link_ns");
        t.reference_link_ns = Field<double>(s, "reference_link_ns", 0.0);
        if (s.contains("window_starts")) t.window_starts = s["window_starts"].get<std::vector<size_t>>();
      }
      if (!t.row_ms.empty()) {
        SetSampledFields(t, &r);
      } else {
        // Rows timed once or elsewhere (big rows, the peers): as recorded.
        r.timings = t;
        r.real_time_ms = Field<double>(j, "real_time_ms", 0.0);
        r.median_time_ms = Field<double>(j, "median_time_ms", 0.0);
        r.mean_time_ms = Field<double>(j, "mean_time_ms", 0.0);
        r.samples = Field<int64_t>(j, "samples", 0);
        r.quiet = Field<bool>(j, "quiet", true);
        r.quiet_samples = Field<int64_t>(j, "quiet_samples", 0);
        if (j.contains("spread") && !j["spread"].is_null()) r.spread = j["spread"].get<double>();
      }
      if (r.real_time_ms > 0) {
        r.gflops = static_cast<double>(r.total_flops()) / (r.real_time_ms * 1e6);
      }
    } catch (const Error& e) {
      throw Error(StrCat("row '", name, "': ", e.what()), e);
    } catch (const nlohmann::json::exception& e) {
      throw Error(StrCat("row '", name, "': a field of the wrong type: ", e.what()));
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

Replay ReplayRun(const nlohmann::json& run, const SamplingRule& rule, double budget_seconds) {
  Replay out;
  out.rows = RowsOfRun(run);
  std::vector<RowResult>& rows = out.rows;
  // Each case's weight in the budget (RowWeight): eager's FLOPs on it.
  std::map<std::string, int64_t> eager_flops;
  for (const RowResult& r : rows) {
    if (IsBaselineRow(r.row)) eager_flops[r.row.case_key] = r.total_flops();
  }
  for (const RowResult& r : rows) {
    if (r.eager_flops > 0) eager_flops.emplace(r.row.case_key, r.eager_flops);
  }
  std::vector<double> weight(rows.size(), 0);
  std::vector<std::vector<std::pair<size_t, size_t>>> windows(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const RowResult& r = rows[i];
    out.recorded_seconds += r.sampling_seconds;
    if (r.timings.row_ms.empty() || r.row.big) continue;
    windows[i] = Windows(r.timings);
    out.windows = std::max(out.windows, static_cast<int>(windows[i].size()));
    weight[i] = r.row.kind == RowKind::kMatMulBound ? kBoundMinSeconds
                : !r.row.program_file.empty()      ? SamplingWeight(0)
                                                   : SamplingWeight(eager_flops[r.row.case_key]);
  }
  std::vector<Timings> cut(rows.size());
  for (int w = 0; w < out.windows; ++w) {
    double weight_left = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (static_cast<size_t>(w) < windows[i].size()) weight_left += weight[i];
    }
    double sampled = 0;  // this window's, against its share of the budget
    for (size_t i = 0; i < rows.size(); ++i) {
      if (static_cast<size_t>(w) >= windows[i].size()) continue;
      const RowResult& r = rows[i];
      SamplingRule row_rule = rule;
      if (budget_seconds > 0) {
        const double left = budget_seconds * (w + 1) / out.windows - sampled -
                            budget_seconds * w / out.windows;
        row_rule = CappedRule(rule, left, weight[i], weight_left);
      }
      if (r.row.kind == RowKind::kMatMulBound) row_rule = BoundRule(row_rule);
      weight_left = std::max(0.0, weight_left - weight[i]);
      // The recorded seconds spread over the samples by their pairs' times
      // (a sample's runs and the untimed runs around it scale alike).
      double all_ms = 0;
      for (size_t k = 0; k < r.timings.row_ms.size(); ++k) {
        all_ms += r.timings.row_ms[k] + (r.timings.paired() ? r.timings.eager_ms[k] : 0);
      }
      const double seconds_per_ms = all_ms > 0 ? r.sampling_seconds / all_ms : 0;
      const auto [begin, end] = windows[i][w];
      const Timings whole = SamplesIn(r.timings, begin, end);
      size_t take = whole.row_ms.size();
      double spent = 0;
      bool done = false;
      for (size_t k = 0; k < whole.row_ms.size(); ++k) {
        spent += seconds_per_ms * (whole.row_ms[k] + (whole.paired() ? whole.eager_ms[k] : 0));
        if (static_cast<int64_t>(k + 1) < kFewestSamples) continue;
        if (SamplingDone(SamplesIn(whole, 0, k + 1), row_rule, spent)) {
          take = k + 1;
          done = true;
          break;
        }
      }
      if (!done) ++out.longer;
      out.sampled_seconds += spent;
      sampled += std::min(spent, row_rule.max_seconds);
      Append(SamplesIn(whole, 0, take), &cut[i]);
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (cut[i].row_ms.empty()) continue;
    SetSampledFields(cut[i], &rows[i]);
    if (rows[i].real_time_ms > 0) {
      rows[i].gflops = static_cast<double>(rows[i].total_flops()) / (rows[i].real_time_ms * 1e6);
    }
  }
  ComputeVsEager(&rows);
  out.controls = CheckControls(&rows);
  return out;
}

nlohmann::json ReadRun(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(StrCat(path, ": cannot read it"));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(StrCat(path, ": not JSON: ", e.what()));
  }
}

}  // namespace remat::bench
