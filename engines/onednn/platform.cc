#include "engines/onednn/platform.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>

#include <oneapi/dnnl/dnnl.hpp>

#include "engines/api/error.h"
#include "engines/api/lane_blocks.h"
#include "engines/onednn/omp_wait.h"

namespace remat {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    const size_t first = name.find_first_not_of(" \t");
    return first == std::string::npos ? "unknown" : name.substr(first);
  }
  return "unknown";
}

// The enum's names, as ONEDNN_MAX_CPU_ISA spells them (lower case).
std::string IsaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return StrCat("isa#", static_cast<int>(isa));
}

std::mutex& ImplsMutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& Impls() {
  static std::set<std::string> impls;
  return impls;
}

}  // namespace

std::string OneDnnVersion() {
  const dnnl::version_t* v = dnnl::version();
  const char* runtime = "unknown";
  switch (v->cpu_runtime) {
    case DNNL_RUNTIME_SEQ: runtime = "sequential"; break;
    case DNNL_RUNTIME_OMP: runtime = "OpenMP"; break;
    case DNNL_RUNTIME_TBB: runtime = "TBB"; break;
    case DNNL_RUNTIME_THREADPOOL: runtime = "threadpool"; break;
    default: break;
  }
  return StrCat("oneDNN ", v->major, ".", v->minor, ".", v->patch, " (cpu runtime: ", runtime,
                ")");
}

std::string OneDnnMatMulImpl(int64_t m, int64_t k, int64_t n) {
  try {
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    using Tag = dnnl::memory::format_tag;
    auto desc = [](dnnl::memory::dims dims) {
      return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, Tag::ab);
    };
    // As OneDnnKernels creates it: plain layouts, user-mode scratchpad.
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(desc({m, k}), desc({k, n}), desc({m, n})), attr, engine);
    return pd.impl_info_str();
  } catch (const dnnl::error& e) {
    throw Error(StrCat("onednn: no f32 matmul for (", m, ",", k, ")x(", k, ",", n,
                       "): ", e.what()));
  }
}

const PlatformInfo& DescribePlatform() {
  static const PlatformInfo info = [] {
    PlatformInfo p;
    p.cpu_model = CpuModel();
    p.cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    p.onednn_version = OneDnnVersion();
    p.onednn_isa = IsaName(dnnl::get_effective_cpu_isa());
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    if (cap == nullptr) cap = std::getenv("DNNL_MAX_CPU_ISA");
    p.isa_cap = cap == nullptr ? "" : cap;
    p.matmul_impl =
        OneDnnMatMulImpl(kReferenceMatMul[0], kReferenceMatMul[1], kReferenceMatMul[2]);
    p.lanes = lane_blocks::LaneIsaName(lane_blocks::BestLaneIsa());
    p.omp_threads = omp_get_max_threads();
    p.omp_wait = OpenMpWait();
    p.malloc_setting = MallocSetting();
    return p;
  }();
  return info;
}

std::vector<std::string> OneDnnMatMulImplsSeen() {
  std::lock_guard<std::mutex> lock(ImplsMutex());
  return {Impls().begin(), Impls().end()};
}

std::string FormatPlatform(const PlatformInfo& p) {
  return StrCat(p.cpu_model, ", ", p.cpus, " CPUs, ", p.onednn_version, ", ISA ", p.onednn_isa,
                " (cap: ", p.isa_cap.empty() ? "none" : p.isa_cap, "), matmul ", p.matmul_impl,
                ", lanes ", p.lanes.empty() ? "not recorded" : p.lanes, ", ", p.omp_threads, " OpenMP threads (OpenMP wait: ",
                p.omp_wait.empty() ? "not recorded" : p.omp_wait, "), malloc: ",
                p.malloc_setting.empty() ? "not recorded" : p.malloc_setting);
}

std::vector<std::string> PlatformDifferences(const PlatformInfo& a, const PlatformInfo& b) {
  std::vector<std::string> out;
  auto differ = [&](const char* what, const std::string& x, const std::string& y) {
    if (x != y) out.push_back(StrCat(what, " ", x.empty() ? "(none)" : x, " vs ", y.empty() ? "(none)" : y));
  };
  differ("CPU", a.cpu_model, b.cpu_model);
  differ("ISA", a.onednn_isa, b.onednn_isa);
  differ("matmul", a.matmul_impl, b.matmul_impl);
  differ("lanes", a.lanes, b.lanes);
  if (a.omp_threads != b.omp_threads) {
    out.push_back(StrCat("threads ", a.omp_threads, " vs ", b.omp_threads));
  }
  return out;
}

namespace platform_internal {
void RecordMatMulImpl(const std::string& impl) {
  std::lock_guard<std::mutex> lock(ImplsMutex());
  Impls().insert(impl);
}
}  // namespace platform_internal

}  // namespace remat
