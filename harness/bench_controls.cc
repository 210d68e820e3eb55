#include "harness/bench_controls.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "engines/api/error.h"  // StrCat
#include "harness/case_spec.h"

namespace remat::bench {
namespace {

const char* KindName(ControlKind kind) {
  switch (kind) {
    case ControlKind::kAToA:
      return "a/a";
    case ControlKind::kSamePlan:
      return "same plan";
    case ControlKind::kNone:
      break;
  }
  return "none";
}

}  // namespace

ControlKind ControlOf(const RowResult& r) {
  if (r.row.kind != RowKind::kValueAndGrad) return ControlKind::kNone;
  if (r.row.control) return ControlKind::kAToA;
  // The matmul-dominated cases are those with a bound: N and d.
  bool n = false, d = false;
  for (const auto& [name, value] : r.row.params) {
    n = n || name == "N";
    d = d || name == "d";
  }
  if (r.row.engine == "recompute" && r.row.variant == CaseVariant::OfPolicy("everything_saveable") && r.error.empty() &&
      r.flops_recomputed == 0 && r.total_flops() > 0 && n && d) {
    return ControlKind::kSamePlan;
  }
  return ControlKind::kNone;
}

bool ControlReport::valid() const {
  if (checks.empty()) return false;
  for (const ControlCheck& c : checks) {
    if (!c.ok) return false;
  }
  return true;
}

ControlReport CheckControls(std::vector<RowResult>* rows) {
  ControlReport report;
  // The first failed control of each case: what its rows cite.
  std::map<std::string, std::string> off;
  for (RowResult& r : *rows) {
    r.untrusted.clear();
    // A control that failed to run is off: it was planned as evidence.
    if (r.row.control && !r.error.empty()) {
      report.checks.push_back({r.row.case_key, "eager A/A control", ControlKind::kAToA,
                               std::nullopt, false, "failed: " + r.error});
      off.emplace(r.row.case_key, "its A/A control failed");
      continue;
    }
    const ControlKind kind = ControlOf(r);
    if (kind == ControlKind::kNone) continue;
    ControlCheck check;
    check.case_key = r.row.case_key;
    check.kind = kind;
    check.variant = kind == ControlKind::kAToA ? "eager A/A control"
                                               : r.row.engine + "/" + r.row.variant.Label();
    check.ratio = r.vs_eager_paired ? r.vs_eager_paired : r.vs_eager;
    if (r.noisy()) {
      check.why = "noise: " + r.NoiseText();
    } else if (!check.ratio) {
      check.why = "no x eager (the case's eager row failed or is missing)";
    } else if (std::abs(*check.ratio - 1) > kControlAllowance) {
      char text[96];
      std::snprintf(text, sizeof text, "x eager %.3f, %.1f%% from 1.00", *check.ratio,
                    100 * std::abs(*check.ratio - 1));
      check.why = text;
    } else {
      check.ok = true;
    }
    if (!check.ok) {
      off.emplace(r.row.case_key,
                  StrCat("its control ", check.variant, " is off (", check.why, ")"));
    }
    report.checks.push_back(check);
  }
  for (RowResult& r : *rows) {
    if (r.row.kind != RowKind::kValueAndGrad || !r.error.empty() || IsBaselineRow(r.row)) continue;
    // The controls keep their ratios: they are the evidence.
    if (r.row.control || ControlOf(r) != ControlKind::kNone) continue;
    auto found = off.find(r.row.case_key);
    if (found != off.end()) r.untrusted = found->second;
    ++report.rows;
    if (r.noisy()) {
      ++report.noise;
    } else if (!r.untrusted.empty()) {
      ++report.untrusted;
    } else {
      ++report.trusted;
    }
  }
  return report;
}

std::string FormatControls(const ControlReport& report) {
  std::ostringstream out;
  int64_t failed = 0;
  for (const ControlCheck& c : report.checks) failed += c.ok ? 0 : 1;
  out << "\n";
  if (report.checks.empty()) {
    out << "CONTROLS: none ran (no case had rows besides eager's): nothing shows whether this "
           "run's ratios can be trusted.\n";
  } else if (report.valid()) {
    out << "Controls: all " << report.checks.size() << " within "
        << static_cast<int>(std::lround(100 * kControlAllowance))
        << "% of 1.00 x eager (a second eager instance on every case; recompute/"
           "everything_saveable, eager's plan, on the matmul cases).\n";
  } else {
    out << "RATIOS NOT VALID: " << failed << " of " << report.checks.size()
        << " controls are off by more than "
        << static_cast<int>(std::lround(100 * kControlAllowance))
        << "% from 1.00 x eager; the rows of their cases print no ratio ('untrusted'):\n";
    for (const ControlCheck& c : report.checks) {
      if (!c.ok) out << "  " << c.case_key << " " << c.variant << ": " << c.why << "\n";
    }
  }
  out << "Trustworthy: " << report.trusted << " of " << report.rows << " rows";
  if (report.noise > 0 || report.untrusted > 0) {
    out << " (" << report.noise << " noise: see Noise below; " << report.untrusted
        << " on cases whose control is off)";
  }
  out << ".\n";
  return out.str();
}

nlohmann::json ControlsJson(const ControlReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const ControlCheck& c : report.checks) {
    checks.push_back({{"case", c.case_key},
                      {"variant", c.variant},
                      {"kind", KindName(c.kind)},
                      {"x_eager", c.ratio ? nlohmann::json(*c.ratio) : nlohmann::json(nullptr)},
                      {"ok", c.ok},
                      {"why", c.why}});
  }
  return {{"valid", report.valid()}, {"allowance", kControlAllowance}, {"rows", report.rows},
          {"trusted", report.trusted}, {"noise", report.noise}, {"untrusted", report.untrusted},
          {"checks", checks}};
}

}  // namespace remat::bench
