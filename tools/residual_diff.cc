#include "tools/residual_diff.h"

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

namespace remat {
namespace {

constexpr char kNoSite[] = "(no site)";

// The first "FILE:LINE" in a source ("problems/x.cc:31"): a file name has
// an extension, which keeps "f32[8,16]" and times such as "1:2" out.
std::string PlaceOf(const std::string& source) {
  static const std::regex site(R"([A-Za-z0-9_./+-]+\.[A-Za-z0-9]+:[0-9]+)");
  std::smatch m;
  return std::regex_search(source, m, site) ? m.str() : kNoSite;
}

// Sites used only inside scan bodies, mapped to their outermost scan's
// site; sites used anywhere outside a scan map to themselves (an engine
// cannot have stacked those).
void CollectScanSites(const Program& p, const std::string& outer_scan,
                      std::map<std::string, std::string>* in_scan, std::set<std::string>* outside) {
  for (const Op& op : p.ops) {
    if (outer_scan.empty()) {
      outside->insert(op.site);
    } else {
      in_scan->emplace(op.site, outer_scan);
    }
    if (op.body) {
      const std::string scan = !outer_scan.empty()         ? outer_scan
                               : op.kind == OpKind::kScan ? op.site
                                                          : "";
      CollectScanSites(*op.body, scan, in_scan, outside);
    }
  }
}

bool IsInput(const std::string& source) {
  return source.rfind("from the argument", 0) == 0 || source.rfind("from a constant", 0) == 0 ||
         source.rfind("from a literal", 0) == 0;
}

// "f32" of "f32[8,16]" or "f32<host>[8,16]".
std::string DTypeOf(const std::string& type) {
  const size_t end = type.find_first_of("<[");
  return type.substr(0, end);
}

std::string Plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Why the two sides keep different bytes at one place, from what each
// keeps there: a reason a reader can check against the lines printed
// below it, not a guess about the engine's internals.
std::string Reason(const PlaceDiff& d, const std::multiset<std::string>& remat_dtypes,
                   const std::multiset<std::string>& engine_dtypes, bool is_scan) {
  std::string why;
  if (d.engine_bytes < 0) {
    why = "the engine's listing has a type remat cannot read here";
  } else if (d.engine_lines.empty()) {
    why = "the engine keeps nothing here where remat keeps " +
          Plural(d.remat_lines.size(), "value", "values") +
          ": the engine recomputes what it needs in the backward pass, or its gradient rules "
          "need none of these";
  } else if (d.remat_lines.empty()) {
    why = "remat keeps nothing here (its gradient rules need none of these values, or it "
          "recomputes them) where the engine keeps " +
          Plural(d.engine_lines.size(), "value", "values");
  } else {
    std::set<std::string> only_engine, only_remat;
    for (const std::string& t : engine_dtypes) {
      if (!remat_dtypes.count(t)) only_engine.insert(t);
    }
    for (const std::string& t : remat_dtypes) {
      if (!engine_dtypes.count(t)) only_remat.insert(t);
    }
    if (!only_engine.empty() || !only_remat.empty()) {
      auto join = [](const std::set<std::string>& s) {
        std::string out;
        for (const std::string& t : s) out += (out.empty() ? "" : ", ") + t;
        return out.empty() ? std::string("none") : out;
      };
      if (only_remat.empty()) {
        why = "the engine's gradient rules keep " + join(only_engine) +
              " values too; remat keeps no value of that type here";
      } else if (only_engine.empty()) {
        why = "remat keeps " + join(only_remat) + " values here; the engine keeps none of that type";
      } else {
        why = "the gradient rules keep values of other types: the engine " + join(only_engine) +
              ", remat " + join(only_remat);
      }
    } else if (d.engine_lines.size() != d.remat_lines.size()) {
      why = "the op's gradient rule keeps another number of values: the engine " +
            std::to_string(d.engine_lines.size()) + ", remat " +
            std::to_string(d.remat_lines.size());
    } else {
      why = "as many values of the same types, of other shapes";
    }
  }
  if (is_scan) {
    why += " (a scan: the engine lists what it stacks over the steps as the scan's outputs, "
           "remat lists its body's ops)";
  }
  return why;
}

}  // namespace

int64_t ListedTypeBytes(const std::string& type) {
  static const std::regex form(R"(([a-z]+[0-9]*)(<[A-Za-z_]+>)?\[([0-9,]*)\])");
  std::smatch m;
  if (!std::regex_match(type, m, form)) return -1;
  static const std::map<std::string, int64_t> sizes = {
      {"bool", 1}, {"i8", 1},  {"u8", 1},  {"f16", 2}, {"bf16", 2}, {"i16", 2}, {"u16", 2},
      {"f32", 4},  {"i32", 4}, {"u32", 4}, {"f64", 8}, {"i64", 8},  {"u64", 8}};
  const auto size = sizes.find(m.str(1));
  if (size == sizes.end()) return -1;
  int64_t bytes = size->second;
  std::stringstream dims(m.str(3));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    if (dim.empty()) return -1;
    bytes *= std::stoll(dim);
  }
  return bytes;
}

std::vector<PlaceDiff> DiffResiduals(const Program& program, const ResidualList& remat,
                                     const std::vector<std::string>& engine) {
  std::map<std::string, std::string> in_scan;
  std::set<std::string> outside;
  CollectScanSites(program, "", &in_scan, &outside);
  std::set<std::string> scan_sites;
  for (const auto& [site, scan] : in_scan) scan_sites.insert(scan);
  auto place = [&](const std::string& source) {
    std::string p = PlaceOf(source);
    const auto it = in_scan.find(p);
    if (it != in_scan.end() && !outside.count(p)) p = it->second;
    return p;
  };
  std::vector<std::string> order;
  std::map<std::string, PlaceDiff> by_place;
  std::map<std::string, std::multiset<std::string>> remat_dtypes, engine_dtypes;
  auto at = [&](const std::string& p) -> PlaceDiff& {
    auto [it, added] = by_place.try_emplace(p);
    if (added) {
      order.push_back(p);
      it->second.place = p;
    }
    return it->second;
  };
  for (const Residual& r : remat) {
    if (r.is_argument) continue;
    const std::string p = place(r.source);
    PlaceDiff& d = at(p);
    d.remat_bytes += r.bytes;
    d.remat_lines.push_back(r.type + " " + r.source +
                            (r.count > 1 ? " (" + std::to_string(r.count) + " scan steps)" : ""));
    remat_dtypes[p].insert(DTypeOf(r.type));
  }
  for (const std::string& line : engine) {
    const size_t space = line.find(' ');
    const std::string type = line.substr(0, space);
    const std::string source = space == std::string::npos ? "" : line.substr(space + 1);
    if (IsInput(source)) continue;
    const std::string p = place(source);
    PlaceDiff& d = at(p);
    const int64_t bytes = ListedTypeBytes(type);
    d.engine_bytes = bytes < 0 || d.engine_bytes < 0 ? -1 : d.engine_bytes + bytes;
    d.engine_lines.push_back(line);
    engine_dtypes[p].insert(DTypeOf(type));
  }
  std::vector<PlaceDiff> diffs;
  for (const std::string& p : order) {
    PlaceDiff& d = by_place[p];
    if (d.engine_bytes == d.remat_bytes) continue;
    d.reason = Reason(d, remat_dtypes[p], engine_dtypes[p], scan_sites.count(p) > 0);
    diffs.push_back(std::move(d));
  }
  return diffs;
}

std::string FormatResidualDiffs(const std::vector<PlaceDiff>& diffs, const std::string& indent) {
  std::ostringstream out;
  for (const PlaceDiff& d : diffs) {
    out << indent << d.place << ": remat " << d.remat_bytes << " B, the engine "
        << (d.engine_bytes < 0 ? std::string("?") : std::to_string(d.engine_bytes))
        << " B: " << d.reason << "\n";
    for (const std::string& l : d.remat_lines) out << indent << "  remat:  " << l << "\n";
    for (const std::string& l : d.engine_lines) out << indent << "  engine: " << l << "\n";
  }
  return out.str();
}

}  // namespace remat
