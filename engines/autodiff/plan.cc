#include "engines/autodiff/plan.h"

#include "engines/api/error.h"

namespace remat {
namespace {

const char* DecisionName(SaveDecision d) {
  switch (d) {
    case SaveDecision::kSave: return "save";
    case SaveDecision::kOffload: return "offload";
    case SaveDecision::kRecompute: return "recompute";
  }
  return "?";
}

std::string Bits(const std::vector<bool>& bits) {
  std::string out;
  for (bool b : bits) out += b ? '1' : '0';
  return out;
}

std::string LoopPlanText(const LoopPlan& plan) {
  if (plan.schedule) {
    return StrCat("schedule ", plan.schedule->name, " (", plan.schedule->forward.size(),
                  " forward actions, ", plan.schedule->backward.size(), " backward)");
  }
  if (plan.checkpoint_every > 0) return StrCat("checkpoint_every:", plan.checkpoint_every);
  return "no schedule (a scan step by step, a chain inline)";
}

}  // namespace

std::vector<std::string> Plan::Lines() const {
  std::vector<std::string> out;
  for (const Entry& e : order_) {
    const std::string op = Program::Describe(*e.op);
    switch (e.kind) {
      case Kind::kRegion: {
        const RegionPlan& r = regions_.at(e.op);
        out.push_back(StrCat("region ", op, ": ",
                             r.honour ? (r.may_save ? "honour (may save)" : "honour (saves nothing)")
                                      : "inline"));
        break;
      }
      case Kind::kSaves: {
        const std::vector<SaveDecision>& d = saves_.at({e.op, e.needs});
        std::string line = StrCat("saves  ", op, " needs ", Bits(e.needs), ":");
        const Program& body = *e.op->body;
        for (int v = body.num_params(); v < static_cast<int>(d.size()); ++v) {
          line += StrCat(" %", v, "=", DecisionName(d[v]));
        }
        out.push_back(line);
        break;
      }
      case Kind::kLoop: {
        const Loop& l = loops_.at({e.op, e.instance});
        out.push_back(StrCat("loop   ", op, " #", e.instance, " (", l.held_outside_bytes,
                             " bytes held outside): ", LoopPlanText(l.plan)));
        break;
      }
    }
  }
  return out;
}

RegionPlan PlanRecorder::PlanRegion(const Op& region) const {
  auto it = plan_->regions_.find(&region);
  if (it != plan_->regions_.end()) return it->second;
  const RegionPlan r = inner_->PlanRegion(region);
  plan_->regions_.emplace(&region, r);
  plan_->order_.push_back({Plan::Kind::kRegion, &region, {}, 0});
  return r;
}

std::vector<SaveDecision> PlanRecorder::PlanSaves(const Op& region,
                                                  const std::vector<bool>& param_needs) const {
  auto key = std::make_pair(&region, param_needs);
  auto it = plan_->saves_.find(key);
  if (it != plan_->saves_.end()) return it->second;
  std::vector<SaveDecision> d = inner_->PlanSaves(region, param_needs);
  plan_->saves_.emplace(key, d);
  plan_->order_.push_back({Plan::Kind::kSaves, &region, param_needs, 0});
  return d;
}

LoopPlan PlanRecorder::PlanLoop(const Op& loop, const LoopModel& model) const {
  const int64_t instance = instances_[&loop]++;
  Plan::Loop l;
  l.plan = inner_->PlanLoop(loop, model);
  l.held_outside_bytes = model.held_outside;
  plan_->loops_.emplace(std::make_pair(&loop, instance), l);
  plan_->order_.push_back({Plan::Kind::kLoop, &loop, {}, instance});
  return l.plan;
}

RegionPlan PlanReader::PlanRegion(const Op& region) const {
  auto it = plan_->regions_.find(&region);
  if (it == plan_->regions_.end()) {
    throw Error(StrCat("the run reached ", Program::Describe(region),
                       ", which its plan has no decision for: the planning run did not reach it"));
  }
  return it->second;
}

std::vector<SaveDecision> PlanReader::PlanSaves(const Op& region,
                                                const std::vector<bool>& param_needs) const {
  auto it = plan_->saves_.find({&region, param_needs});
  if (it == plan_->saves_.end()) {
    throw Error(StrCat("the run asked what ", Program::Describe(region), " saves with needs ",
                       Bits(param_needs),
                       ", which its plan has no decision for: the planning run did not ask"));
  }
  return it->second;
}

LoopPlan PlanReader::PlanLoop(const Op& loop, const LoopModel& model) const {
  const int64_t instance = instances_[&loop]++;
  auto it = plan_->loops_.find({&loop, instance});
  if (it == plan_->loops_.end()) {
    throw Error(StrCat("the run reached instance ", instance, " of ", Program::Describe(loop),
                       ", which its plan has no decision for: the planning run did not reach it"));
  }
  if (it->second.held_outside_bytes != model.held_outside) {
    throw Error(StrCat("instance ", instance, " of ", Program::Describe(loop), " starts with ",
                       model.held_outside, " bytes held outside it, where the planning run held ",
                       it->second.held_outside_bytes,
                       ": the run is not the run its plan was made for"));
  }
  return it->second.plan;
}

void PlanReader::CheckAllRead() const {
  for (const auto& [key, loop] : plan_->loops_) {
    auto it = instances_.find(key.first);
    const int64_t read = it == instances_.end() ? 0 : it->second;
    if (key.second >= read) {
      throw Error(StrCat("the plan decided instance ", key.second, " of ",
                         Program::Describe(*key.first),
                         ", which the run never reached: the run is not the run its plan was "
                         "made for"));
    }
  }
}

}  // namespace remat
