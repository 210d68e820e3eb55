// CellPool: the tensor cache of Dynamic Tensor Rematerialization (Kirisame
// et al., "Dynamic Tensor Rematerialization", ICLR 2021), for one run.
//
// Every value a run computes is a cell: its tensor while resident, and what
// it takes to compute it again (its parent cells and a function of their
// tensors). When memory runs short the pool evicts the resident cell with the
// lowest heuristic score h; a cell that is needed again is recomputed from
// its parents, recursively (parents that were evicted too are recomputed
// first).
//
//   CellPool pool(Heuristic::kDtr);
//   CellId x = pool.AddPermanent(arg, "argument x");
//   CellId y = pool.AddComputed(relu_x, {x}, cost, recompute, "output of relu", /*uses=*/1);
//   Tensor t = pool.Acquire(y);  // resident again if it was evicted; pinned
//   ...
//   pool.Unpin(y);
//   pool.ReleaseUse(y);          // its last use: freed, kept recomputable
//
// Contract:
// - Cells are never evicted while pinned (Acquire pins; Unpin unpins; pins
//   nest), nor when permanent (arguments: nothing to recompute them from;
//   the run's result), nor when they hold no bytes.
// - A cell's `uses` count the reads still to come (the caller adds and
//   releases them). When they reach zero the tensor is freed at once (as
//   DTR frees a tensor whose last reference dies) but the cell stays
//   recomputable: an evicted descendant may need it. A cell whose uses are
//   zero and whose every child is banished or permanent can never be needed
//   again: it is banished (freed for good, out of every neighbourhood). So a
//   cell gains children only while it has uses (a reader is a use until it
//   has run): AddComputed with uses = 0 makes a cell nothing may read.
// - The score of a resident cell t, with c its compute cost, m its bytes and
//   s its staleness (clock - last access + 1, in ticks of a logical clock the
//   caller advances once per op, so that runs are reproducible):
//     kDtr:        h(t) = (c(t) + sum of c(u) over u in e*(t)) / (m(t) s(t)),
//                  e*(t) the evicted neighbourhood: the evicted cells that
//                  recomputing t would recompute (ancestors reached through
//                  evicted cells) and those that would need t resident to be
//                  recomputed (descendants reached through evicted cells),
//                  found exactly by search.
//     kDtrEqClass: h(t) = (c(t) + sum of the costs of the equivalence
//                  classes of t's evicted neighbours) / (m(t) s(t)): the
//                  paper's h_DTR^eq. Evicted cells that touch are merged in a
//                  union-find forest whose roots carry their classes' summed
//                  cost; a recomputed cell subtracts its cost from its class
//                  but does not split it (union-find cannot), so the estimate
//                  may count cells that no longer connect.
//     kLocal:      h(t) = c(t) / (m(t) s(t)): no neighbourhood.
//   Ties go to the cell created first. The pool touches no clock of its own
//   and reads no time: the same calls give the same evictions.
// - Costs are the caller's (the engine passes an op's FLOPs).
// - Tensors a caller holds beyond its pins keep their buffers alive: evicting
//   such a cell frees nothing. Callers drop their copies when they unpin.
#ifndef REMAT_ENGINES_DTR_CELL_POOL_H_
#define REMAT_ENGINES_DTR_CELL_POOL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engines/api/tensor.h"

namespace remat {
namespace dtr {

enum class Heuristic { kDtr, kDtrEqClass, kLocal };
const char* HeuristicName(Heuristic h);  // "dtr", "dtr_eq", "dtr_local"

using CellId = int;

// Recomputes a cell's tensor from its parents' tensors (in the order the
// parents were given; resident and pinned while it runs).
using RecomputeFn = std::function<Tensor(const std::vector<Tensor>& parents)>;

class CellPool {
 public:
  explicit CellPool(Heuristic heuristic) : heuristic_(heuristic) {}
  CellPool(const CellPool&) = delete;
  CellPool& operator=(const CellPool&) = delete;

  // A cell that is resident for the pool's life and has no parents: an
  // argument. `name` is what listings and errors call it.
  CellId AddPermanent(Tensor tensor, std::string name);
  // A computed cell, resident, last accessed now, with `uses` reads to come
  // (0: freed at once, recomputable). `parents` may repeat a cell (mul(x, x)).
  CellId AddComputed(Tensor tensor, std::vector<CellId> parents, int64_t cost,
                     RecomputeFn recompute, std::string name, int64_t uses);
  // From now on `cell` is never evicted nor freed by uses (the run's result);
  // rematerializes it first if it is not resident.
  void MakePermanent(CellId cell);

  // Makes `cell` resident (recomputing evicted ancestors first, depth first,
  // each parent pinned once resident until its child is computed), pins it,
  // marks it accessed now and returns its tensor. Recomputing allocates, so
  // it may evict other unpinned cells; it throws what the allocator throws
  // (MemoryCapError when nothing more can be evicted).
  Tensor Acquire(CellId cell);
  void Unpin(CellId cell);

  void AddUses(CellId cell, int64_t n);
  // One use fewer; at zero the tensor is freed (see the contract above).
  void ReleaseUse(CellId cell);
  // Frees `cell` if it has no uses left (a value nothing reads).
  void FreeIfUnused(CellId cell);

  // Advances the logical clock by one (the caller: once per op executed).
  void Tick() { ++clock_; }
  int64_t clock() const { return clock_; }

  // The resident, unpinned, evictable cell with the lowest score, if any.
  std::optional<CellId> ChooseVictim() const;
  // Evicts ChooseVictim(); false if there is none.
  bool EvictOne();
  // h(cell) as above (for tests, and the choice).
  double Score(CellId cell) const;
  // The sum of costs over e*(cell) as the heuristic estimates it.
  int64_t NeighbourhoodCost(CellId cell) const;

  // Observers.
  int num_cells() const { return static_cast<int>(cells_.size()); }
  bool resident(CellId cell) const { return cells_.at(cell).tensor.defined(); }
  bool banished(CellId cell) const { return cells_.at(cell).banished; }
  bool permanent(CellId cell) const { return cells_.at(cell).permanent; }
  int64_t uses(CellId cell) const { return cells_.at(cell).uses; }
  int64_t cost(CellId cell) const { return cells_.at(cell).cost; }
  int64_t bytes(CellId cell) const { return cells_.at(cell).bytes; }
  const std::string& name(CellId cell) const { return cells_.at(cell).name; }
  // A checkpoint_name label on the cell's value: " named 'LABEL'" is added to
  // its name, as the residual listing shows it (CONTRACT.md section 4).
  void AddLabel(CellId cell, const std::string& label) {
    cells_.at(cell).name += " named '" + label + "'";
  }
  // The resident tensor, undefined if evicted (no recomputation, no pin).
  const Tensor& tensor(CellId cell) const { return cells_.at(cell).tensor; }
  int64_t evictions() const { return evictions_; }
  int64_t recomputations() const { return recomputations_; }

  // Drops every tensor (the pool's memory back to the tracker) before the
  // pool itself goes: after this, only observers may be called.
  void Clear();

 private:
  struct Cell {
    std::string name;
    std::vector<CellId> parents;
    std::vector<CellId> children;
    RecomputeFn recompute;  // empty for permanent cells added as such
    Tensor tensor;          // defined iff resident
    int64_t bytes = 0;
    int64_t cost = 0;
    int64_t last_access = 0;
    int64_t uses = 0;
    int pins = 0;
    bool permanent = false;
    bool banished = false;
    // Its uses reached zero while it was pinned: freed when unpinned.
    bool free_when_unpinned = false;
    int uf_node = -1;        // kDtrEqClass: its node while evicted, else -1
    int resident_slot = -1;  // its index in resident_, or -1
  };

  // Evicted: recomputable, not resident (evicted or freed by its uses).
  bool Evicted(const Cell& c) const { return !c.tensor.defined() && !c.banished; }
  bool Evictable(const Cell& c) const {
    return c.tensor.defined() && c.pins == 0 && !c.permanent && c.bytes > 0;
  }
  // Frees the tensor of a cell (an eviction, or its last use) and enters it
  // in the evicted neighbourhood structures.
  void Drop(CellId id);
  // Recomputes one evicted cell whose parents are resident and pinned.
  void Recompute(CellId id);
  // Banishes `id` if it can never be needed again, then its parents.
  void MaybeBanish(CellId id);

  // The union-find forest of kDtrEqClass: a node per eviction.
  int UfFind(int node) const;
  void UfUnion(int a, int b);
  void UfEnter(CellId id);  // on eviction
  void UfLeave(CellId id);  // on recomputation or banishment

  void EnterResident(CellId id);
  void LeaveResident(CellId id);

  Heuristic heuristic_;
  std::vector<Cell> cells_;
  // The resident cells that are not permanent: the candidates for eviction.
  std::vector<CellId> resident_;
  int64_t clock_ = 0;
  int64_t evictions_ = 0;
  int64_t recomputations_ = 0;
  // kDtrEqClass: parent of each node (itself at a root) and, at roots, the
  // summed cost of the class. Mutable: Find compresses paths.
  mutable std::vector<int> uf_parent_;
  std::vector<int64_t> uf_cost_;
  // kDtr: the search's marks, by cell.
  mutable std::vector<int64_t> visit_mark_;
  mutable int64_t visit_stamp_ = 0;
};

}  // namespace dtr
}  // namespace remat

#endif  // REMAT_ENGINES_DTR_CELL_POOL_H_
