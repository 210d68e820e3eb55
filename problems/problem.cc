#include "problems/problem.h"

#include <algorithm>
#include <exception>

#include "engines/api/error.h"
#include "problems/problems.h"

namespace remat {

double Problem::InputScale(const std::string&, const ParamValues&) const { return 1.0; }
double Problem::InputOffset(const std::string&, const ParamValues&) const { return 0.0; }

ParamValues ResolveParams(const Problem& problem, const std::map<std::string, int64_t>& overrides,
                          bool test_sizes) {
  ParamValues out;
  std::vector<std::string> names;
  for (const ParamSpec& s : problem.params()) {
    out[s.name] = test_sizes ? s.test_value : s.default_value;
    names.push_back(StrCat(s.name, " (default ", s.default_value, ")"));
  }
  for (const auto& override : overrides) {
    const std::string& name = override.first;
    const int64_t value = override.second;
    auto specs = problem.params();
    auto it = std::find_if(specs.begin(), specs.end(),
                           [&](const ParamSpec& s) { return s.name == name; });
    if (it == specs.end()) {
      throw Error(StrCat("problem ", problem.name(), " has no parameter '", name, "'; ",
                         names.empty() ? "it takes none" : "parameters: " + Join(names, ", ")));
    }
    if (value < it->min_value || value > it->max_value) {
      throw Error(StrCat("problem ", problem.name(), ": parameter ", name, "=", value,
                         " is out of range [", it->min_value, ", ", it->max_value, "]"));
    }
    out[name] = value;
  }
  return out;
}

namespace {

// SplitMix64: small, fast and the same everywhere.
uint64_t SplitMix64(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

std::vector<Tensor> MakeInputs(const Problem& problem, const Program& program,
                               const ParamValues& params, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (int i = 0; i < program.num_params(); ++i) {
    const double scale = problem.InputScale(program.param_names[i], params);
    const double offset = problem.InputOffset(program.param_names[i], params);
    uint64_t state = seed * 0x100000001b3ull + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
    Tensor fixed = problem.FixedInput(program.param_names[i], program.shapes[i], params);
    if (fixed.defined()) {
      if (fixed.dtype() != program.dtype(i) || fixed.shape() != program.shapes[i]) {
        throw Error(StrCat("problem ", problem.name(), ": fixed input ", program.param_names[i],
                           " is ", fixed.TypeString(), ", the program takes ",
                           DTypeName(program.dtype(i)), program.shapes[i].ToString()));
      }
      inputs.push_back(std::move(fixed));
      continue;
    }
    if (program.dtype(i) == DType::kI32) {
      const uint64_t bound = static_cast<uint64_t>(
          std::max<int64_t>(1, problem.InputIntBound(program.param_names[i], params)));
      Tensor t = Tensor::Zeros(DType::kI32, program.shapes[i]);
      for (int64_t j = 0; j < t.num_elements(); ++j) {
        t.i32()[j] = static_cast<int32_t>(SplitMix64(&state) % bound);
      }
      inputs.push_back(std::move(t));
      continue;
    }
    Tensor t = Tensor::Zeros(DType::kF32, program.shapes[i]);
    float* data = t.f32();
    for (int64_t j = 0; j < t.num_elements(); ++j) {
      // 53 random bits -> [0, 1) -> [-scale, scale) -> around the offset.
      const double u = static_cast<double>(SplitMix64(&state) >> 11) * 0x1.0p-53;
      const double v = (2.0 * u - 1.0) * scale;
      data[j] = static_cast<float>(offset == 0.0 ? v : offset + v);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::vector<int> WrtIndices(const Problem& problem, const Program& program) {
  const std::vector<std::string> names = problem.wrt();
  std::vector<int> wrt = SelectInputs(program, names, StrCat("problem ", problem.name(), ": wrt"));
  // A prefix selects parameters, not the buffers a state op updates (a
  // running mean is not trained): those only when named in full.
  for (const StateSlot& s : CheckStateOps(program)) {
    if (std::find(names.begin(), names.end(), s.name) != names.end()) continue;
    wrt.erase(std::remove(wrt.begin(), wrt.end(), s.param), wrt.end());
  }
  return wrt;
}

std::vector<int> SelectInputs(const Program& program, const std::vector<std::string>& names,
                              const std::string& what) {
  std::vector<int> out;
  // Which name selected each input so far: a duplicate names both.
  std::map<int, std::string> selected_by;
  for (const std::string& name : names) {
    const bool prefix = !name.empty() && name.back() == '*';
    const std::string stem = prefix ? name.substr(0, name.size() - 1) : name;
    const size_t before = out.size();
    for (int i = 0; i < program.num_params(); ++i) {
      const std::string& input = program.param_names[i];
      if (!(prefix ? input.rfind(stem, 0) == 0 : input == name)) continue;
      auto [it, inserted] = selected_by.emplace(i, name);
      if (!inserted) {
        throw Error(it->second == name
                        ? StrCat(what, " names ", input, " twice")
                        : StrCat(what, " names ", input, " twice ('", it->second, "' and '",
                                 name, "')"));
      }
      out.push_back(i);
    }
    if (out.size() == before) {
      throw Error(StrCat(what, " names '", name, "', which is not an input of ", program.name,
                         " (", Join(program.param_names, ", "), ")"));
    }
  }
  return out;
}

std::vector<int> WrtFromFlags(const std::vector<std::string>& flags, const Program& program,
                              const std::vector<int>& fallback) {
  if (flags.empty()) return fallback;
  std::vector<std::string> names;
  for (const std::string& flag : flags) {
    size_t start = 0;
    while (true) {
      const size_t comma = flag.find(',', start);
      const std::string name =
          flag.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (name.empty()) {
        throw Error(StrCat("--wrt '", flag, "': an empty name; expected NAME[,NAME...] or all (",
                           program.name, "'s inputs: ", Join(program.param_names, ", "), ")"));
      }
      names.push_back(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (std::find(names.begin(), names.end(), "all") != names.end()) {
    if (names.size() > 1) throw Error("--wrt all names every input: it takes no other name");
    std::vector<int> every;  // every float input: integers are never differentiated
    for (int i = 0; i < program.num_params(); ++i) {
      if (program.dtype(i) != DType::kI32) every.push_back(i);
    }
    return every;
  }
  return SelectInputs(program, names, "--wrt");
}

const std::vector<std::unique_ptr<Problem>>& AllProblems() {
  // Every problem, listed once, here.
  static const auto* problems = [] {
    auto* v = new std::vector<std::unique_ptr<Problem>>();
    v->push_back(MakeLayerLoss());
    v->push_back(MakeScanStack());
    v->push_back(MakeDotPolicy());
    v->push_back(MakeSinChain());
    v->push_back(MakeSinPlain());
    v->push_back(MakeSinRecursive());
    v->push_back(MakeTransformerStack());
    v->push_back(MakeMlpChain());
    v->push_back(MakeGpt());
    v->push_back(MakeGptScan());
    v->push_back(MakeMoe());
    v->push_back(MakeResNet());
    v->push_back(MakeUnreached());
    v->push_back(MakeBoundaries());
    return v;
  }();
  return *problems;
}

const Problem& FindProblem(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : AllProblems()) {
    if (p->name() == name) return *p;
    names.push_back(p->name());
  }
  throw Error(StrCat("unknown problem '", name, "'; problems: ", Join(names, ", ")));
}

std::string FormatParams(const ParamValues& params) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : params) parts.push_back(StrCat(name, "=", value));
  return Join(parts, " ");
}

std::map<std::string, int64_t> ParseParamFlags(const std::vector<std::string>& flags) {
  std::map<std::string, int64_t> out;
  for (const std::string& f : flags) {
    const size_t eq = f.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(StrCat("--param '", f, "': expected NAME=INTEGER, e.g. --param d=16"));
    }
    const std::string value = f.substr(eq + 1);
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) {
      throw Error(StrCat("--param '", f, "': '", value, "' is not an integer"));
    }
    out[f.substr(0, eq)] = v;
  }
  return out;
}

}  // namespace remat
