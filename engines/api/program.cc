#include "engines/api/program.h"

#include <algorithm>
#include <set>

#include "engines/api/error.h"

namespace remat {

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kMatMul: return "matmul";
    case OpKind::kRelu: return "relu";
    case OpKind::kSin: return "sin";
    case OpKind::kCos: return "cos";
    case OpKind::kSquare: return "square";
    case OpKind::kAdd: return "add";
    case OpKind::kMul: return "mul";
    case OpKind::kSum: return "sum";
    case OpKind::kName: return "name";
    case OpKind::kSoftmax: return "softmax";
    case OpKind::kLayerNorm: return "layer_norm";
    case OpKind::kGelu: return "gelu";
    case OpKind::kScale: return "scale";
    case OpKind::kTranspose: return "transpose";
    case OpKind::kSplitHeads: return "split_heads";
    case OpKind::kMergeHeads: return "merge_heads";
    case OpKind::kCheckpoint: return "checkpoint";
    case OpKind::kScan: return "scan";
  }
  return "?";
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
  auto typed = [&](int v) { return StrCat(ValueName(v), ":", dtype, p.shapes[v].ToString()); };
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
    if (op.kind == OpKind::kName) line += StrCat("[", op.name, "]");
    if (op.kind == OpKind::kCheckpoint) {
      line += StrCat("[policy=", op.policy.ToString(), op.name.empty() ? "" : ", " + op.name, "]");
    }
    if (op.kind == OpKind::kScan) {
      line += StrCat("[length=", p.shapes[op.inputs[1]].dim(0),
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
  // Wrap the whole function: the outer program passes its parameters to one
  // checkpoint op whose body is the original program.
  Program outer;
  outer.name = program.name;
  outer.param_names = program.param_names;
  outer.shapes.assign(program.shapes.begin(), program.shapes.begin() + program.num_params());
  Op op;
  op.kind = OpKind::kCheckpoint;
  op.site = "--policy";
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
    if (op.kind == OpKind::kCheckpoint) {
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

std::shared_ptr<const Program> WithSchedule(const Program& p, const std::string& spec,
                                            int* scans) {
  auto out = std::make_shared<Program>(p);
  for (Op& op : out->ops) {
    if (op.kind == OpKind::kScan && CheckpointEvery(spec) > 0) {
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
  }
  return out;
}

}  // namespace

Program InlineCheckpoints(const Program& program) {
  Program out;
  out.name = program.name;
  out.param_names = program.param_names;
  out.shapes.assign(program.shapes.begin(), program.shapes.begin() + program.num_params());
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
  int scans = 0;
  Program out = *WithSchedule(program, spec, &scans);
  if (scans == 0) {
    throw Error(StrCat("schedule '", spec, "': program ", program.name,
                       " has no scan; schedules reverse a scan's steps (try scan_stack)"));
  }
  return out;
}

std::string ToString(const Program& program, const std::string& dtype) {
  std::string out;
  Print(program, dtype, "", &out);
  return out;
}

}  // namespace remat
