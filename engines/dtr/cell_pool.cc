#include "engines/dtr/cell_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "engines/api/error.h"

namespace remat {
namespace dtr {

const char* HeuristicName(Heuristic h) {
  switch (h) {
    case Heuristic::kDtr: return "dtr";
    case Heuristic::kDtrEqClass: return "dtr_eq";
    case Heuristic::kLocal: return "dtr_local";
  }
  return "?";
}

CellId CellPool::AddPermanent(Tensor tensor, std::string name) {
  const CellId id = num_cells();
  Cell c;
  c.name = std::move(name);
  c.bytes = tensor.defined() ? tensor.bytes() : 0;
  c.tensor = std::move(tensor);
  c.last_access = clock_;
  c.permanent = true;
  cells_.push_back(std::move(c));
  return id;
}

CellId CellPool::AddComputed(Tensor tensor, std::vector<CellId> parents, int64_t cost,
                             RecomputeFn recompute, std::string name, int64_t uses) {
  if (!tensor.defined()) throw Error(StrCat("dtr: ", name, " computed no tensor"));
  const CellId id = num_cells();
  for (CellId p : parents) {
    std::vector<CellId>& children = cells_.at(p).children;
    // A child reading a parent twice is one edge.
    if (children.empty() || children.back() != id) children.push_back(id);
  }
  Cell c;
  c.name = std::move(name);
  c.parents = std::move(parents);
  c.recompute = std::move(recompute);
  c.bytes = tensor.bytes();
  c.tensor = std::move(tensor);
  c.cost = cost;
  c.last_access = clock_;
  c.uses = uses;
  cells_.push_back(std::move(c));
  EnterResident(id);
  FreeIfUnused(id);
  return id;
}

void CellPool::MakePermanent(CellId id) {
  Cell& c = cells_.at(id);
  if (c.permanent) return;
  if (!c.tensor.defined()) {
    Acquire(id);
    Unpin(id);
  }
  LeaveResident(id);
  cells_[id].permanent = true;
  for (CellId p : cells_[id].parents) MaybeBanish(p);
}

void CellPool::EnterResident(CellId id) {
  Cell& c = cells_[id];
  if (c.permanent || c.resident_slot >= 0) return;
  c.resident_slot = static_cast<int>(resident_.size());
  resident_.push_back(id);
}

void CellPool::LeaveResident(CellId id) {
  Cell& c = cells_[id];
  if (c.resident_slot < 0) return;
  const CellId last = resident_.back();
  resident_[c.resident_slot] = last;
  cells_[last].resident_slot = c.resident_slot;
  resident_.pop_back();
  c.resident_slot = -1;
}

Tensor CellPool::Acquire(CellId target) {
  // Depth first with an explicit stack: a chain of N evicted cells is
  // recomputed without N nested C++ frames. A parent is pinned as soon as it
  // is resident, so recomputing its siblings cannot evict it; the pins are
  // dropped once the child is computed.
  struct Pending {
    CellId id;
    size_t next_parent;
  };
  if (!cells_.at(target).tensor.defined()) {
    if (cells_[target].banished) {
      throw Error(StrCat("dtr: ", cells_[target].name, " was needed after it was banished"));
    }
    std::vector<Pending> stack = {{target, 0}};
    while (!stack.empty()) {
      Pending& top = stack.back();
      const Cell& c = cells_[top.id];
      if (top.next_parent < c.parents.size()) {
        const CellId p = c.parents[top.next_parent];
        Cell& parent = cells_[p];
        if (parent.tensor.defined()) {
          ++parent.pins;
          parent.last_access = clock_;
          ++top.next_parent;
        } else {
          if (parent.banished || !parent.recompute) {
            throw Error(StrCat("dtr: cannot recompute ", parent.name, " (needed by ", c.name,
                               "): it was freed for good"));
          }
          stack.push_back({p, 0});
        }
        continue;
      }
      const CellId id = top.id;
      stack.pop_back();
      Recompute(id);
    }
  }
  Cell& c = cells_[target];
  ++c.pins;
  c.last_access = clock_;
  return c.tensor;
}

void CellPool::Recompute(CellId id) {
  if (!cells_[id].recompute) {
    throw Error(
        StrCat("dtr: cannot recompute ", cells_[id].name, ": nothing to recompute it with"));
  }
  std::vector<Tensor> parents;
  parents.reserve(cells_[id].parents.size());
  for (CellId p : cells_[id].parents) parents.push_back(cells_[p].tensor);
  // The recompute function may allocate and so evict; `cells_` is not
  // resized meanwhile (no cell is added during a recomputation), but the
  // reference is taken again after the call all the same.
  const RecomputeFn recompute = cells_[id].recompute;
  Tensor t = recompute(parents);
  parents.clear();
  Cell& c = cells_[id];
  if (!t.defined() || t.bytes() != c.bytes) {
    throw Error(StrCat("dtr: recomputing ", c.name, " gave ",
                       t.defined() ? t.TypeString() : std::string("nothing"), " (", t.bytes(),
                       " bytes), not the ", c.bytes, " bytes first computed"));
  }
  c.tensor = std::move(t);
  c.last_access = clock_;
  ++recomputations_;
  if (heuristic_ == Heuristic::kDtrEqClass) UfLeave(id);
  EnterResident(id);
  for (CellId p : c.parents) Unpin(p);
  // A recomputed cell whose uses are already spent stays resident (evictable)
  // for the descendants it is recomputed for.
}

void CellPool::Unpin(CellId id) {
  Cell& c = cells_.at(id);
  if (c.pins <= 0) throw Error(StrCat("dtr: unpinning ", c.name, ", which is not pinned"));
  if (--c.pins > 0) return;
  if (c.free_when_unpinned) {
    c.free_when_unpinned = false;
    if (c.uses == 0 && c.tensor.defined() && !c.permanent) Drop(id);
  }
  MaybeBanish(id);
}

void CellPool::AddUses(CellId id, int64_t n) { cells_.at(id).uses += n; }

void CellPool::ReleaseUse(CellId id) {
  Cell& c = cells_.at(id);
  if (c.uses <= 0) throw Error(StrCat("dtr: releasing a use of ", c.name, ", which has none"));
  --c.uses;
  FreeIfUnused(id);
}

void CellPool::FreeIfUnused(CellId id) {
  Cell& c = cells_.at(id);
  if (c.uses > 0 || c.permanent) return;
  if (c.pins > 0) {
    c.free_when_unpinned = true;
    return;
  }
  if (c.tensor.defined()) Drop(id);
  MaybeBanish(id);
}

void CellPool::Drop(CellId id) {
  LeaveResident(id);
  cells_[id].tensor = Tensor();  // the buffer goes back to its tracker here
  if (heuristic_ == Heuristic::kDtrEqClass && !cells_[id].banished) UfEnter(id);
}

void CellPool::MaybeBanish(CellId start) {
  std::vector<CellId> work = {start};
  while (!work.empty()) {
    const CellId id = work.back();
    work.pop_back();
    Cell& c = cells_[id];
    if (c.banished || c.permanent || c.uses > 0 || c.pins > 0) continue;
    bool needed = false;
    for (CellId ch : c.children) {
      const Cell& child = cells_[ch];
      if (!child.banished && !child.permanent) {
        needed = true;
        break;
      }
    }
    if (needed) continue;
    if (c.tensor.defined()) {
      LeaveResident(id);
      c.tensor = Tensor();
    }
    if (heuristic_ == Heuristic::kDtrEqClass) UfLeave(id);
    c.banished = true;
    c.recompute = nullptr;  // what it captured (shapes, ops) is not needed again
    for (CellId p : c.parents) work.push_back(p);
  }
}

int CellPool::UfFind(int node) const {
  int root = node;
  while (uf_parent_[root] != root) root = uf_parent_[root];
  while (uf_parent_[node] != root) {
    const int next = uf_parent_[node];
    uf_parent_[node] = root;
    node = next;
  }
  return root;
}

void CellPool::UfUnion(int a, int b) {
  a = UfFind(a);
  b = UfFind(b);
  if (a == b) return;
  // The older root stays the root: deterministic, and shallow enough with
  // path compression.
  if (b < a) std::swap(a, b);
  uf_parent_[b] = a;
  uf_cost_[a] += uf_cost_[b];
}

void CellPool::UfEnter(CellId id) {
  Cell& c = cells_[id];
  if (c.uf_node >= 0) return;
  const int node = static_cast<int>(uf_parent_.size());
  uf_parent_.push_back(node);
  uf_cost_.push_back(c.cost);
  c.uf_node = node;
  auto join = [&](CellId n) {
    const Cell& other = cells_[n];
    if (Evicted(other) && other.uf_node >= 0) UfUnion(node, other.uf_node);
  };
  for (CellId p : c.parents) join(p);
  for (CellId ch : c.children) join(ch);
}

void CellPool::UfLeave(CellId id) {
  Cell& c = cells_[id];
  if (c.uf_node < 0) return;
  uf_cost_[UfFind(c.uf_node)] -= c.cost;
  c.uf_node = -1;
}

int64_t CellPool::NeighbourhoodCost(CellId id) const {
  const Cell& t = cells_.at(id);
  switch (heuristic_) {
    case Heuristic::kLocal: return 0;
    case Heuristic::kDtrEqClass: {
      std::vector<int> roots;
      auto add = [&](CellId n) {
        const Cell& other = cells_[n];
        if (!Evicted(other) || other.uf_node < 0) return;
        const int root = UfFind(other.uf_node);
        if (std::find(roots.begin(), roots.end(), root) == roots.end()) roots.push_back(root);
      };
      for (CellId p : t.parents) add(p);
      for (CellId ch : t.children) add(ch);
      int64_t sum = 0;
      for (int r : roots) sum += uf_cost_[r];
      return sum;
    }
    case Heuristic::kDtr: {
      // Ancestors through evicted parents, descendants through evicted
      // children, each cell once (marked with this search's stamp).
      if (visit_mark_.size() < cells_.size()) visit_mark_.resize(cells_.size(), 0);
      const int64_t stamp = ++visit_stamp_;
      int64_t sum = 0;
      std::vector<CellId> work;
      auto visit = [&](CellId n) {
        if (visit_mark_[n] == stamp || !Evicted(cells_[n])) return;
        visit_mark_[n] = stamp;
        sum += cells_[n].cost;
        work.push_back(n);
      };
      for (CellId p : t.parents) visit(p);
      while (!work.empty()) {
        const CellId n = work.back();
        work.pop_back();
        for (CellId p : cells_[n].parents) visit(p);
      }
      for (CellId ch : t.children) visit(ch);
      while (!work.empty()) {
        const CellId n = work.back();
        work.pop_back();
        for (CellId ch : cells_[n].children) visit(ch);
      }
      return sum;
    }
  }
  return 0;
}

double CellPool::Score(CellId id) const {
  const Cell& c = cells_.at(id);
  const double staleness = static_cast<double>(clock_ - c.last_access + 1);
  const double cost = static_cast<double>(c.cost + NeighbourhoodCost(id));
  return cost / (static_cast<double>(c.bytes) * staleness);
}

std::optional<CellId> CellPool::ChooseVictim() const {
  std::optional<CellId> best;
  double best_score = std::numeric_limits<double>::infinity();
  for (CellId id : resident_) {
    if (!Evictable(cells_[id])) continue;
    const double score = Score(id);
    if (!best || score < best_score || (score == best_score && id < *best)) {
      best = id;
      best_score = score;
    }
  }
  return best;
}

bool CellPool::EvictOne() {
  const std::optional<CellId> victim = ChooseVictim();
  if (!victim) return false;
  ++evictions_;
  Drop(*victim);
  return true;
}

void CellPool::Clear() {
  for (Cell& c : cells_) {
    c.tensor = Tensor();
    c.recompute = nullptr;
  }
  resident_.clear();
}

}  // namespace dtr
}  // namespace remat
