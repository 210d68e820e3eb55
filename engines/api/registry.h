// The engine registry: engines register a factory under a name; the harness
// and the command line create engines by name and never name a concrete one.
// An engine library registers itself with REMAT_REGISTER_ENGINE in a source
// file and is linked with alwayslink = 1; //engines:all lists every engine.
#ifndef REMAT_ENGINES_API_REGISTRY_H_
#define REMAT_ENGINES_API_REGISTRY_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engines/api/engine.h"

namespace remat {

using EngineFactory = std::function<std::unique_ptr<Engine>()>;

struct EngineInfo {
  std::string name;
  std::string description;
  EngineFactory factory;
};

// Returns true so it can initialize a static; a duplicate name aborts at
// start-up with a message (a build mistake, not a user error).
bool RegisterEngine(const std::string& name, const std::string& description,
                    EngineFactory factory);

// Throws remat::Error listing the registered engines if `name` is unknown.
std::unique_ptr<Engine> MakeEngine(const std::string& name);

// Registered engines, sorted by name.
std::vector<EngineInfo> RegisteredEngines();
std::vector<std::string> EngineNames();

}  // namespace remat

#define REMAT_REGISTER_ENGINE(id, name, description, factory) \
  static const bool remat_engine_registered_##id =             \
      ::remat::RegisterEngine(name, description, factory)

#endif  // REMAT_ENGINES_API_REGISTRY_H_
