#include "engines/api/program.h"

#include <algorithm>
#include <set>
#include <utility>

#include "engines/api/error.h"
#include "engines/api/op_def.h"
#include "engines/api/schedule_spec.h"

namespace remat {

// The parameters' dtypes of `p` (a rebuilt program's first values: its ops'
// results, all f32, need no entry).
static std::vector<DType> ParamDTypes(const Program& p) {
  std::vector<DType> out;
  for (int i = 0; i < p.num_params(); ++i) out.push_back(p.dtype(i));
  return out;
}

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kCheckpoint: return "checkpoint";
    case OpKind::kScan: return "scan";
    case OpKind::kChain: return "chain";
    default: break;  // a primitive: its OpDef names it
  }
  const size_t i = static_cast<size_t>(kind);
  const std::span<const OpDef> defs = OpDefs();
  return i < defs.size() ? defs[i].name : "unknown";
}

int Program::Producer(int value) const {
  if (value < num_params()) return -1;
  for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
    if (ops[k].output == value) return k;
  }
  throw Error(StrCat("program ", name, " has no value ", value));
}

std::string Program::Describe(const Op& op) {
  std::string out = StrCat(OpKindName(op.kind), " at ", op.site.empty() ? "?" : op.site);
  if (!op.scope.empty()) out += StrCat(" (", op.scope, ")");
  return out;
}

namespace {

void CollectLabels(const Program& p, std::set<std::string>* out) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kName) out->insert(op.name);
    if (op.body) CollectLabels(*op.body, out);
  }
}

// Value names as jaxpr prints them: a..z, then ba, bb, ...
std::string ValueName(int id) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + id % 26));
    id /= 26;
  } while (id > 0);
  return s;
}

void Print(const Program& p, const std::string& dtype, const std::string& indent,
           std::string* out) {
  auto typed = [&](int v) {
    const std::string d = p.dtype(v) == DType::kI32 ? "i32" : dtype;  // integers stay integers
    return StrCat(ValueName(v), ":", d, p.shapes[v].ToString());
  };
  *out += "{ lambda ";
  for (int i = 0; i < p.num_params(); ++i) {
    if (i) *out += " ";
    *out += typed(i);
    if (!p.param_names[i].empty() && p.param_names[i] != ValueName(i)) {
      *out += StrCat("(", p.param_names[i], ")");
    }
  }
  *out += ". let\n";
  for (const Op& op : p.ops) {
    std::string line = StrCat(indent, "    ", typed(op.output), " = ", OpKindName(op.kind));
    if (op.kind == OpKind::kName || op.kind == OpKind::kState) line += StrCat("[", op.name, "]");
    if (op.kind == OpKind::kCheckpoint) {
      line += StrCat("[policy=", op.policy.ToString(), op.name.empty() ? "" : ", " + op.name, "]");
    }
    if (op.kind == OpKind::kScan) {
      line += StrCat("[length=", p.shapes[op.inputs[1]].dim(0),
                     op.num_consts == 0 ? "" : StrCat(", consts=", op.num_consts),
                     op.schedule.empty() ? "" : ", schedule=" + op.schedule, "]");
    }
    if (op.kind == OpKind::kChain) {
      line += StrCat("[blocks=", op.body->ops.size(),
                     op.schedule.empty() ? "" : ", schedule=" + op.schedule, "]");
    }
    for (int in : op.inputs) line += " " + ValueName(in);
    line += StrCat("    # ", op.site.empty() ? "?" : op.site,
                   op.scope.empty() ? "" : " (" + op.scope + ")");
    *out += line + "\n";
    if (op.body) {
      *out += indent + "      body = ";
      Print(*op.body, dtype, indent + "      ", out);
    }
  }
  *out += StrCat(indent, "  in ", ValueName(p.output), " }\n");
}

}  // namespace

namespace {

void CollectStateOps(const Program& top, const Program& p, bool in_scan,
                     std::vector<StateSlot>* out) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kState) {
      const std::string where = StrCat("program ", top.name, ": ", Program::Describe(op));
      if (in_scan) {
        throw Error(StrCat(where, ": a state op inside a scan's body would update parameter '",
                           op.name, "' once per step; keep state out of scans"));
      }
      auto it = std::find(top.param_names.begin(), top.param_names.end(), op.name);
      if (it == top.param_names.end()) {
        throw Error(StrCat(where, ": state names '", op.name,
                           "', which is not a parameter of the program (",
                           Join(top.param_names, ", "), ")"));
      }
      const int param = static_cast<int>(it - top.param_names.begin());
      const Shape& shape = p.shapes[op.inputs[0]];
      if (top.shapes[param] != shape || top.dtype(param) != DType::kF32) {
        throw Error(StrCat(where, ": the new value of '", op.name, "' is f32", shape.ToString(),
                           " but the parameter is ", DTypeName(top.dtype(param)),
                           top.shapes[param].ToString()));
      }
      for (const StateSlot& s : *out) {
        if (s.name == op.name) {
          throw Error(StrCat(where, ": parameter '", op.name,
                             "' is updated by two state ops; a run gives it one new value"));
        }
      }
      out->push_back({op.name, param, shape});
    }
    if (op.body) CollectStateOps(top, *op.body, in_scan || op.kind == OpKind::kScan, out);
  }
}

}  // namespace

std::vector<StateSlot> CheckStateOps(const Program& program) {
  std::vector<StateSlot> slots;
  CollectStateOps(program, program, false, &slots);
  return slots;
}

std::vector<std::string> Program::Labels() const {
  std::set<std::string> labels;
  CollectLabels(*this, &labels);
  return std::vector<std::string>(labels.begin(), labels.end());
}

int Program::CountOps(OpKind kind) const {
  int n = 0;
  for (const Op& op : ops) {
    if (op.kind == kind) ++n;
    if (op.body) n += op.body->CountOps(kind);
  }
  return n;
}

namespace {

std::shared_ptr<const Program> WithPolicy(const Program& p, const Policy& policy) {
  auto out = std::make_shared<Program>(p);
  for (Op& op : out->ops) {
    if (op.kind == OpKind::kCheckpoint) op.policy = policy;
    if (op.body) op.body = WithPolicy(*op.body, policy);
  }
  return out;
}

}  // namespace

Program ApplyPolicy(const Program& program, const Policy& policy) {
  if (program.CountOps(OpKind::kCheckpoint) > 0) return *WithPolicy(program, policy);
  return WrapInCheckpoint(program, policy, "--policy");
}

Program WrapInCheckpoint(const Program& program, const Policy& policy, const std::string& site) {
  // The outer program passes its parameters to one checkpoint op whose body
  // is the original program.
  Program outer;
  outer.name = program.name;
  outer.param_names = program.param_names;
  outer.data_params = program.data_params;
  outer.shapes.assign(program.shapes.begin(), program.shapes.begin() + program.num_params());
  outer.dtypes = ParamDTypes(program);
  Op op;
  op.kind = OpKind::kCheckpoint;
  op.site = site;
  op.name = program.name;
  op.policy = policy;
  op.body = std::make_shared<const Program>(program);
  for (int i = 0; i < program.num_params(); ++i) op.inputs.push_back(i);
  op.output = outer.num_values();
  outer.shapes.push_back(program.shapes[program.output]);
  outer.ops.push_back(std::move(op));
  outer.output = outer.ops.back().output;
  return outer;
}

namespace {

void CollectPolicyWarnings(const Program& p, const std::vector<std::string>& labels,
                           const std::string& program_name, std::vector<std::string>* out) {
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCheckpoint) {
      for (const std::string& n : op.policy.ReferencedNames()) {
        if (std::find(labels.begin(), labels.end(), n) == labels.end()) {
          out->push_back(StrCat("warning: policy ", op.policy.ToString(), " of ",
                                Program::Describe(op), " names '", n,
                                "', which no checkpoint_name in ", program_name, " labels (labels: ",
                                labels.empty() ? "none" : Join(labels, ", "), ")"));
        }
      }
    }
    if (op.body) CollectPolicyWarnings(*op.body, labels, program_name, out);
  }
}

}  // namespace

std::vector<std::string> PolicyWarnings(const Program& program) {
  std::vector<std::string> out;
  CollectPolicyWarnings(program, program.Labels(), program.name, &out);
  return out;
}

namespace {

// Appends `body`'s ops to `out`, its parameters bound to `args` (value ids of
// `out`); returns the id of the body's result in `out`.
int InlineInto(const Program& body, const std::vector<int>& args, Program* out) {
  std::vector<int> id(body.num_values(), -1);
  for (int i = 0; i < body.num_params(); ++i) id[i] = args[i];
  for (const Op& op : body.ops) {
    std::vector<int> inputs;
    for (int v : op.inputs) inputs.push_back(id[v]);
    if (op.kind == OpKind::kCheckpoint || op.kind == OpKind::kChain) {
      id[op.output] = InlineInto(*op.body, inputs, out);
      continue;
    }
    Op copy = op;
    copy.inputs = inputs;
    if (copy.body) copy.body = std::make_shared<const Program>(InlineCheckpoints(*copy.body));
    copy.output = out->num_values();
    out->shapes.push_back(body.shapes[op.output]);
    id[op.output] = copy.output;
    out->ops.push_back(std::move(copy));
  }
  return id[body.output];
}

// The chains of blocks in `p` (not inside its ops' bodies): [first, end) op
// ranges of two or more consecutive checkpoint ops where each op after the
// first reads its predecessor's output exactly once and nothing else reads
// that output.
std::vector<std::pair<int, int>> FindChains(const Program& p) {
  std::vector<int> uses(p.num_values(), 0);
  for (const Op& op : p.ops) {
    for (int v : op.inputs) ++uses[v];
  }
  ++uses[p.output];
  std::vector<std::pair<int, int>> out;
  const int n = static_cast<int>(p.ops.size());
  for (int first = 0; first < n;) {
    int end = first + 1;
    if (p.ops[first].kind == OpKind::kCheckpoint) {
      while (end < n && p.ops[end].kind == OpKind::kCheckpoint &&
             uses[p.ops[end - 1].output] == 1 &&
             std::count(p.ops[end].inputs.begin(), p.ops[end].inputs.end(),
                        p.ops[end - 1].output) == 1) {
        ++end;
      }
    }
    if (end - first >= 2) out.emplace_back(first, end);
    first = end;
  }
  return out;
}

// A kChain op for the blocks p.ops[first, end), reading and writing values
// of `out` (ids[v]: the id in `out` of p's value v). Its body's parameters
// are the chain's input, then every other value the blocks read, in order
// of first use.
Op MakeChain(const Program& p, int first, int end, const std::vector<int>& ids, Program* out) {
  auto body = std::make_shared<Program>();
  body->name = StrCat(p.name, " chain");
  std::vector<int> in_body(p.num_values(), -1);  // p's value -> body value
  Op chain;
  chain.kind = OpKind::kChain;
  chain.site = p.ops[first].site;
  chain.scope = p.ops[first].scope;
  auto add_param = [&](int v) {
    in_body[v] = body->num_params();
    body->param_names.push_back(v < p.num_params() ? p.param_names[v] : "");
    body->shapes.push_back(p.shapes[v]);
    body->dtypes.push_back(p.dtype(v));
    chain.inputs.push_back(ids[v]);
  };
  // Parameter 0, the chain's input, is block 0's first input. Which of block
  // 0's inputs it is does not matter to a schedule: position 0 is the
  // caller's and every input of block 0 is a parameter of the chain.
  add_param(p.ops[first].inputs[0]);
  // Parameters come first: every value the blocks read that no block makes.
  for (int k = first; k < end; ++k) {
    for (int v : p.ops[k].inputs) {
      const bool carry = k > first && v == p.ops[k - 1].output;
      if (!carry && in_body[v] < 0) add_param(v);
    }
  }
  for (int k = first; k < end; ++k) {
    Op block = p.ops[k];
    for (int& v : block.inputs) v = in_body[v];
    block.output = body->num_values();
    body->shapes.push_back(p.shapes[p.ops[k].output]);
    in_body[p.ops[k].output] = block.output;
    body->ops.push_back(std::move(block));
  }
  body->output = body->ops.back().output;
  chain.output = out->num_values();
  out->shapes.push_back(p.shapes[p.ops[end - 1].output]);
  chain.body = std::move(body);
  return chain;
}

std::shared_ptr<const Program> WithSchedule(const Program& p, const std::string& spec,
                                            int* scans) {
  const int64_t every = CheckpointEvery(spec);
  const std::vector<std::pair<int, int>> chains = FindChains(p);
  auto out = std::make_shared<Program>();
  out->name = p.name;
  out->param_names = p.param_names;
  out->data_params = p.data_params;
  out->shapes.assign(p.shapes.begin(), p.shapes.begin() + p.num_params());
  out->dtypes = ParamDTypes(p);
  std::vector<int> ids(p.num_values(), -1);
  for (int i = 0; i < p.num_params(); ++i) ids[i] = i;
  size_t next_chain = 0;
  for (int k = 0; k < static_cast<int>(p.ops.size()); ++k) {
    if (next_chain < chains.size() && chains[next_chain].first == k) {
      const auto [first, end] = chains[next_chain++];
      ++*scans;
      if (every > 0) {
        // checkpoint_every: keep block i a region when (i + 1) % K == 0;
        // the others store everything. They stay regions, under
        // everything_saveable (their nested regions too): inlined, a
        // block's parameters' cotangents would no longer be one
        // contribution each (CONTRACT.md 3.4), and the gradients would
        // not be eager's bits on the unscheduled program.
        for (int b = first; b < end; ++b) {
          const Op& block = p.ops[b];
          std::vector<int> inputs;
          for (int v : block.inputs) inputs.push_back(ids[v]);
          Op copy = block;
          if ((b - first + 1) % every != 0) {
            const Policy everything(PolicyKind::kEverythingSaveable);
            copy.policy = everything;
            copy.body = WithPolicy(*block.body, everything);
          }
          copy.inputs = inputs;
          copy.output = out->num_values();
          out->shapes.push_back(p.shapes[block.output]);
          ids[block.output] = copy.output;
          out->ops.push_back(std::move(copy));
        }
      } else {
        Op chain = MakeChain(p, first, end, ids, out.get());
        chain.schedule = spec;
        ids[p.ops[end - 1].output] = chain.output;
        out->ops.push_back(std::move(chain));
      }
      k = end - 1;
      continue;
    }
    Op op = p.ops[k];
    for (int& v : op.inputs) v = ids[v];
    op.output = out->num_values();
    out->shapes.push_back(p.shapes[p.ops[k].output]);
    ids[p.ops[k].output] = op.output;
    if (op.kind == OpKind::kScan && every > 0) {
      ++*scans;
      op.schedule = spec;
      if (op.body->CountOps(OpKind::kCheckpoint) == 0) {
        op.body = std::make_shared<const Program>(ApplyPolicy(*op.body, Policy()));
      }
    } else if (op.kind == OpKind::kScan) {
      ++*scans;
      op.schedule = spec;
      op.body = std::make_shared<const Program>(InlineCheckpoints(*op.body));
    } else if (op.body) {
      op.body = WithSchedule(*op.body, spec, scans);
    }
    out->ops.push_back(std::move(op));
  }
  out->output = ids[p.output];
  return out;
}

}  // namespace

Program InlineCheckpoints(const Program& program) {
  Program out;
  out.name = program.name;
  out.param_names = program.param_names;
  out.data_params = program.data_params;
  out.shapes.assign(program.shapes.begin(), program.shapes.begin() + program.num_params());
  out.dtypes = ParamDTypes(program);
  std::vector<int> params;
  for (int i = 0; i < program.num_params(); ++i) params.push_back(i);
  out.output = InlineInto(program, params, &out);
  return out;
}

int64_t CheckpointEvery(const std::string& spec) {
  const std::string prefix = "checkpoint_every:";
  if (spec.rfind(prefix, 0) != 0) return 0;
  const std::string k = spec.substr(prefix.size());
  if (k.empty() || k.size() > 9 || k.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(k) < 1) {
    throw Error(StrCat("schedule '", spec, "': checkpoint_every takes a number of blocks >= 1"));
  }
  return std::stoll(k);
}

Program ApplySchedule(const Program& program, const std::string& spec) {
  // The spec's syntax, checked here, whatever engine runs the program: one
  // that ignores schedules (eager) must still refuse a spec no engine could
  // read, not run as if it had been given none.
  if (CheckpointEvery(spec) == 0) {
    try {
      ParseScheduleSpec(spec);
    } catch (const Error& e) {
      throw Error(StrCat("schedule '", spec, "': ", e.what(), " (or checkpoint_every:K)"));
    }
  }
  int scans = 0;
  Program out = *WithSchedule(program, spec, &scans);
  if (scans == 0) {
    throw Error(StrCat("schedule '", spec, "': program ", program.name,
                       " has no scan and no chain of checkpointed blocks; schedules reverse a "
                       "scan's steps or a chain's blocks (try scan_stack or mlp_chain)"));
  }
  return out;
}

std::string ToString(const Program& program, const std::string& dtype) {
  std::string out;
  Print(program, dtype, "", &out);
  return out;
}

}  // namespace remat
