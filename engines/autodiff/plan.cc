#include "engines/autodiff/plan.h"

#include <set>
#include <tuple>

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

const char* KindName(Plan::Kind kind) {
  switch (kind) {
    case Plan::Kind::kRegion: return "whether to honour";
    case Plan::Kind::kSaves: return "what to save in";
    case Plan::Kind::kLoop: return "how to reverse";
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

std::string Plan::Describe(const Decision& d) {
  Op op;
  op.kind = d.op_kind;
  op.site = d.site;
  op.scope = d.scope;
  return Program::Describe(op);
}

std::vector<std::string> Plan::Lines() const {
  std::vector<std::string> out;
  std::set<std::tuple<Kind, int, std::vector<bool>>> seen;
  for (const Decision& d : decisions_) {
    if (d.kind != Kind::kLoop && !seen.insert({d.kind, d.op, d.param_needs}).second) continue;
    const std::string described = StrCat("[", d.op, "] ", Describe(d));
    switch (d.kind) {
      case Kind::kRegion:
        out.push_back(StrCat("region ", described, ": ",
                             d.region.honour ? (d.region.may_save ? "honour (may save)"
                                                                  : "honour (saves nothing)")
                                             : "inline"));
        break;
      case Kind::kSaves: {
        std::string line = StrCat("saves  ", described, " needs ", Bits(d.param_needs), ":");
        for (size_t v = d.param_needs.size(); v < d.saves.size(); ++v) {
          line += StrCat(" %", v, "=", DecisionName(d.saves[v]));
        }
        out.push_back(line);
        break;
      }
      case Kind::kLoop:
        out.push_back(StrCat("loop   ", described, " #", d.instance, " (", d.held_outside_bytes,
                             " bytes held outside): ", LoopPlanText(d.loop)));
        break;
    }
  }
  return out;
}

Plan::Decision& PlanRecorder::Append(Plan::Kind kind, const Op& op) const {
  Plan::Decision& d = plan_->decisions_.emplace_back();
  d.kind = kind;
  d.op_kind = op.kind;
  d.site = op.site;
  d.scope = op.scope;
  auto [it, added] = ops_.emplace(&op, static_cast<int>(ops_.size()));
  d.op = it->second;
  if (added) instances_.push_back(0);
  return d;
}

RegionPlan PlanRecorder::PlanRegion(const Op& region) const {
  const RegionPlan r = inner_->PlanRegion(region);
  Append(Plan::Kind::kRegion, region).region = r;
  return r;
}

std::vector<SaveDecision> PlanRecorder::PlanSaves(const Op& region,
                                                  const std::vector<bool>& param_needs) const {
  std::vector<SaveDecision> saves = inner_->PlanSaves(region, param_needs);
  Plan::Decision& d = Append(Plan::Kind::kSaves, region);
  d.param_needs = param_needs;
  d.saves = saves;
  return saves;
}

LoopPlan PlanRecorder::PlanLoop(const Op& loop, const LoopModel& model) const {
  const LoopPlan plan = inner_->PlanLoop(loop, model);
  Plan::Decision& d = Append(Plan::Kind::kLoop, loop);
  d.loop = plan;
  d.instance = instances_[d.op]++;
  d.held_outside_bytes = model.held_outside;
  return plan;
}

const Plan::Decision& PlanReader::Next(Plan::Kind kind, const Op& op) const {
  const std::vector<Plan::Decision>& all = plan_->decisions();
  if (next_ >= all.size()) {
    throw Error(StrCat("the run asked ", KindName(kind), " ", Program::Describe(op),
                       " after the ", all.size(),
                       " decisions of its plan: the run is not the run its plan was made for"));
  }
  const Plan::Decision& d = all[next_];
  const int number = ops_.emplace(&op, static_cast<int>(ops_.size())).first->second;
  if (d.kind != kind || d.op != number || d.op_kind != op.kind || d.site != op.site) {
    throw Error(StrCat("the run asked ", KindName(kind), " ", Program::Describe(op),
                       " where decision ", next_ + 1, " of its plan is ", KindName(d.kind), " ",
                       Plan::Describe(d), ": the run is not the run its plan was made for"));
  }
  ++next_;
  return d;
}

RegionPlan PlanReader::PlanRegion(const Op& region) const {
  return Next(Plan::Kind::kRegion, region).region;
}

std::vector<SaveDecision> PlanReader::PlanSaves(const Op& region,
                                                const std::vector<bool>& param_needs) const {
  const Plan::Decision& d = Next(Plan::Kind::kSaves, region);
  if (d.param_needs != param_needs) {
    throw Error(StrCat("the run asked what to save in ", Plan::Describe(d), " with needs ",
                       Bits(param_needs), " where its plan decided for needs ",
                       Bits(d.param_needs)));
  }
  return d.saves;
}

LoopPlan PlanReader::PlanLoop(const Op& loop, const LoopModel& model) const {
  const Plan::Decision& d = Next(Plan::Kind::kLoop, loop);
  if (d.held_outside_bytes != model.held_outside) {
    throw Error(StrCat("instance ", d.instance, " of ", Plan::Describe(d), " starts with ",
                       model.held_outside, " bytes held outside it, where the planning run held ",
                       d.held_outside_bytes, ": the run is not the run its plan was made for"));
  }
  return d.loop;
}

void PlanReader::CheckAllRead() const {
  const std::vector<Plan::Decision>& all = plan_->decisions();
  if (next_ != all.size()) {
    throw Error(StrCat("the run came to ", next_, " of the ", all.size(),
                       " decisions of its plan (the next: ", KindName(all[next_].kind), " ",
                       Plan::Describe(all[next_]),
                       "): the run is not the run its plan was made for"));
  }
}

}  // namespace remat
