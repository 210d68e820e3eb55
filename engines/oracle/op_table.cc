// The oracle's table: every family's entries by OpKind, and the helpers the
// families share. A primitive op with no entry is refused when a program
// uses it (RulesFor); oracle_test's table test names any OpKind without an
// entry, and //harness:op_completeness_test any op the oracle cannot run.
#include <array>
#include <string>
#include <vector>

#include "engines/api/error.h"
#include "engines/oracle/op_rules.h"

namespace remat {
namespace oracle {
namespace {

// kChain is OpKind's last enumerator (engines/api/program.h).
constexpr size_t kNumKinds = static_cast<size_t>(OpKind::kChain) + 1;

using Table = std::array<OpRules, kNumKinds>;

Table MakeTable() {
  Table table;
  std::array<bool, kNumKinds> set{};
  for (const std::vector<OpEntry>* family :
       {&ElementwiseRules(), &BroadcastRules(), &ReduceRules(), &MatMulRules(), &LayoutRules(), &IndexingRules(), &SoftmaxRules(),
        &NormRules(), &ConvPoolRules(), &RandomRules()}) {
    for (const OpEntry& entry : *family) {
      const size_t k = static_cast<size_t>(entry.kind);
      if (k >= kNumKinds || set[k]) {
        throw Error(StrCat("oracle: op kind ", k, " has two entries in the oracle's table"));
      }
      set[k] = true;
      table[k] = entry.rules;
    }
  }
  return table;
}

}  // namespace

const OpRules* FindRules(OpKind kind) {
  static const Table table = MakeTable();
  const size_t k = static_cast<size_t>(kind);
  if (k >= kNumKinds || table[k].forward == nullptr) return nullptr;
  return &table[k];
}

const OpRules& RulesFor(const Op& op) {
  const OpRules* rules = FindRules(op.kind);
  if (rules == nullptr) {
    throw Error(StrCat("oracle: no rule for op kind ", static_cast<int>(op.kind), " (",
                       Program::Describe(op), ")"));
  }
  return *rules;
}

void Forward(const Op& op, const std::vector<const Tensor*>& in, const Tensor& out,
             int64_t* flops) {
  RulesFor(op).forward(op, in, out, flops);
}

Error ShapeError(const Op& op, const std::vector<Shape>& in, const std::string& why) {
  std::string shapes;
  for (const Shape& s : in) shapes += (shapes.empty() ? "" : ", ") + s.ToString();
  return Error(StrCat("oracle: ", Program::Describe(op), ": ", why, " (operands ", shapes, ")"));
}

void WantInputs(const Op& op, const std::vector<Shape>& in, size_t n) {
  if (in.size() != n) throw ShapeError(op, in, StrCat("takes ", n, " operands, got ", in.size()));
}

Shape SameShape(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 1);
  return in[0];
}

Shape SameShapeBinary(const Op& op, const std::vector<Shape>& in) {
  WantInputs(op, in, 2);
  if (in[0] != in[1]) throw ShapeError(op, in, "operand shapes differ");
  return in[0];
}

int64_t LastAxis(const Shape& s) { return s.rank() > 0 ? s.dim(s.rank() - 1) : 1; }

int64_t Rows(const Shape& s) {
  const int64_t cols = LastAxis(s);
  return cols > 0 ? s.num_elements() / cols : 0;
}

int64_t Index(const Op& op, const Tensor& ids, int64_t i, int64_t bound) {
  const double v = ids.at(i);
  if (!(v >= 0 && v < static_cast<double>(bound))) {
    throw Error(StrCat(Program::Describe(op), ": index ", v, " at position ", i,
                       " is outside [0, ", bound, ")"));
  }
  return static_cast<int64_t>(v);
}

Tensor MagnitudeArgs::NewMagnitude() const {
  return Tensor::Zeros(DType::kF64, out.shape(), tracker, Category::kActivations);
}

Tensor MagnitudeArgs::Apply(const std::vector<const Tensor*>& operands) const {
  Tensor t = NewMagnitude();
  int64_t uncounted = 0;  // the magnitudes are no part of the run's work
  Forward(op, operands, t, &uncounted);
  return t;
}

}  // namespace oracle
}  // namespace remat
