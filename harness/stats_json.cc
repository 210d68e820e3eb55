#include "harness/stats_json.h"

#include <cstdio>

namespace remat {

nlohmann::json PlatformToJson(const PlatformInfo& p) {
  return {{"cpu", p.cpu_model},         {"cpus", p.cpus},
          {"onednn", p.onednn_version}, {"onednn_isa", p.onednn_isa},
          {"isa_cap", p.isa_cap},       {"matmul_impl", p.matmul_impl},
          {"lanes", p.lanes},
          {"omp_threads", p.omp_threads}, {"omp_wait", p.omp_wait},
          {"malloc", p.malloc_setting}};
}

PlatformInfo PlatformFromJson(const nlohmann::json& j) {
  PlatformInfo p;
  auto text = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  auto number = [&](const char* key) {
    return j.contains(key) && j[key].is_number_integer() ? j[key].get<int>() : 0;
  };
  p.cpu_model = text("cpu");
  p.omp_wait = text("omp_wait");
  p.malloc_setting = text("malloc");
  p.cpus = number("cpus");
  p.onednn_version = text("onednn");
  p.onednn_isa = text("onednn_isa");
  p.isa_cap = text("isa_cap");
  p.matmul_impl = text("matmul_impl");
  p.lanes = text("lanes");
  p.omp_threads = number("omp_threads");
  return p;
}

nlohmann::json StatsToJson(const Stats& s) {
  nlohmann::json by_category = nlohmann::json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    by_category[CategoryName(static_cast<Category>(c))] = s.peak_bytes_by_category[c];
  }
  nlohmann::json high_water = nlohmann::json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    high_water[CategoryName(static_cast<Category>(c))] = s.high_water_bytes_by_category[c];
  }
  nlohmann::json residuals = nlohmann::json::array();
  for (const Residual& r : s.residuals) {
    residuals.push_back({{"type", r.type},
                         {"source", r.source},
                         {"bytes", r.bytes},
                         {"is_argument", r.is_argument},
                         {"count", r.count}});
  }
  nlohmann::json kernel_times = nlohmann::json::object();
  for (const auto& [name, t] : s.kernel_times) {
    kernel_times[name] = {{"seconds", t.seconds}, {"calls", t.calls}};
  }
  return {{"peak_bytes", s.peak_bytes},
          {"peak_bytes_by_category", by_category},
          {"high_water_bytes_by_category", high_water},
          {"peak_site", s.peak_site},
          {"host_peak_bytes", s.host_peak_bytes},
          {"predicted_peak_bytes", s.predicted_peak_bytes},
          {"predicted_peak_site", s.predicted_peak_site},
          {"op_runs", s.op_runs.map()},
          {"residual_bytes", s.residual_bytes},
          {"residuals", residuals},
          {"flops_forward", s.flops_forward},
          {"flops_recomputed", s.flops_recomputed},
          {"flops_backward", s.flops_backward},
          {"seconds_forward", s.seconds_forward},
          {"seconds_backward", s.seconds_backward},
          {"seconds_in_kernels", s.seconds_in_kernels},
          {"kernel_calls", s.kernel_calls},
          {"kernel_times", kernel_times},
          {"seconds_compile", s.seconds_compile},
          {"arena_bytes", s.arena_bytes}};
}

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

}  // namespace remat
