#include "engines/api/registry.h"

#include <cstdio>
#include <cstdlib>
#include <map>

#include "engines/api/error.h"

namespace remat {
namespace {

// A function-local static: registration runs during static initialization
// of other translation units, in no particular order.
std::map<std::string, EngineInfo>& Registry() {
  static auto* registry = new std::map<std::string, EngineInfo>();
  return *registry;
}

}  // namespace

bool RegisterEngine(const std::string& name, const std::string& description,
                    EngineFactory factory) {
  auto [it, inserted] = Registry().emplace(name, EngineInfo{name, description, factory});
  if (!inserted) {
    std::fprintf(stderr, "remat: engine '%s' registered twice\n", name.c_str());
    std::abort();
  }
  return true;
}

std::unique_ptr<Engine> MakeEngine(const std::string& name) {
  auto it = Registry().find(name);
  if (it == Registry().end()) {
    throw Error(StrCat("unknown engine '", name, "'; engines: ", Join(EngineNames(), ", ")));
  }
  return it->second.factory();
}

std::vector<EngineInfo> RegisteredEngines() {
  std::vector<EngineInfo> out;
  for (const auto& [name, info] : Registry()) out.push_back(info);
  return out;
}

std::vector<std::string> EngineNames() {
  std::vector<std::string> out;
  for (const auto& [name, info] : Registry()) out.push_back(name);
  return out;
}

}  // namespace remat
