// The registry of every primitive op's definition (op_def.h): the entries of
// each family (op_defs_families.h, one op_defs_<family>.cc each), gathered
// into one table indexed by OpKind. An entry reads top to bottom as the op's
// whole story: name and signature, shape rule, what the backward rule saves
// and why, forward rule, backward rule, FLOPs (kernels.h's model), and an
// example use for the tests that walk every op.
//
// Rules call the engine's Kernels and never re-derive a gradient, so every
// engine that runs the same rules on the same kernels computes the same bits.
//
// The families hand out constant arrays and the table is built on first use
// (a function-local static), so no lookup depends on the order in which
// translation units are initialized.
#include "engines/api/op_def.h"

#include <algorithm>
#include <initializer_list>
#include <span>
#include <string_view>
#include <vector>

#include "engines/api/error.h"
#include "engines/api/op_defs_families.h"

namespace remat {
namespace {

// Every family's entries, placed at their OpKind: checked once, at first
// use, that each primitive has exactly one.
const std::vector<OpDef>& Table() {
  static const std::vector<OpDef> table = [] {
    std::vector<OpDef> t;
    for (std::span<const OpDef> family :
         {op_defs::MatMulOpDefs(), op_defs::ElementwiseOpDefs(), op_defs::UnaryOpDefs(),
          op_defs::ReduceOpDefs(),
          op_defs::NormOpDefs(), op_defs::LayoutOpDefs(), op_defs::IndexOpDefs(),
          op_defs::RandomOpDefs(), op_defs::ConvOpDefs()}) {
      t.insert(t.end(), family.begin(), family.end());
    }
    std::stable_sort(t.begin(), t.end(), [](const OpDef& a, const OpDef& b) {
      return static_cast<size_t>(a.kind) < static_cast<size_t>(b.kind);
    });
    for (size_t i = 0; i < t.size(); ++i) {
      if (static_cast<size_t>(t[i].kind) != i) {
        throw Error(StrCat("op_defs: entry ", t[i].name, " is at ", i, " of the table, not at its OpKind ",
                           static_cast<size_t>(t[i].kind), " (an op with no entry, or with two)"));
      }
    }
    return t;
  }();
  return table;
}

}  // namespace

double DepthArgs::deepest() const {
  double d = 0;
  for (double k : kf_inputs) d = std::max(d, k);
  return d;
}

std::span<const OpDef> OpDefs() { return Table(); }

const OpDef& Def(OpKind kind) {
  const size_t i = static_cast<size_t>(kind);
  if (i >= Table().size()) {
    throw Error(StrCat(OpKindName(kind), " is not a primitive op: it has no OpDef"));
  }
  return Table()[i];
}

const OpDef* FindOpDef(std::string_view name) {
  for (const OpDef& def : OpDefs()) {
    if (name == def.name) return &def;
  }
  return nullptr;
}

}  // namespace remat
