// cuda/tape/backward_plan.hpp — the one backward walk: which nodes receive a gradient, in which order
// their VJPs run, and how each contribution lands in its parent's slot (TorchLean's accumulation
// rules). Computed once on the host; the per-node executor (kernels, fused or staged) and the
// program executor (one kernel) both just run the plan, so they cannot disagree.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include <tapewise/tape.hpp>

#include "kernels/program.hpp"

namespace tapewise::detail {

// One node's turn in the walk: its VJP (or, for max(a, a) / min(a, a), passing g on once) with
// the way each parent's contribution is written.
struct Visit {
  NodeId node = -1;
  bool pass_once = false;                // the coalesced-contribution rule: g goes to parents[0] as is
  std::array<SlotWrite, 2> write{};      // per parent; none where the parent does not require grad
};

struct BackwardPlan {
  std::vector<std::uint8_t> reached;  // per node: its slot receives a contribution (the output included)
  std::vector<Visit> visits;          // descending ids
  std::vector<NodeId> zero_slots;     // dense: nodes requiring grad that receive nothing (+0 slots)

  bool has_slot(NodeId id, bool dense, const Node& n) const {
    return reached[static_cast<std::size_t>(id)] || (dense && n.requires_grad);
  }
};

// The coalesced-contribution rule: max(a, a) / min(a, a) give their parent the upstream value once.
inline bool contributes_once(const Node& n) {
  return n.arity == 2 && n.parents[0] == n.parents[1] && (*n.op == Op::max || *n.op == Op::min);
}

// The walk from `out` (a valid id) in descending ids: a node runs its VJP when it received a
// contribution, is not a leaf and requires grad. A parent's first contribution is stored (dense:
// added to +0), later ones accumulate as existing + c, in parent order (a, b). Written into `plan`,
// whose vectors keep their capacity from an earlier walk.
inline void plan_backward(std::span<const Node> nodes, NodeId out, bool dense, BackwardPlan& plan) {
  plan.reached.assign(nodes.size(), 0);
  plan.visits.clear();
  plan.zero_slots.clear();
  plan.reached[static_cast<std::size_t>(out)] = 1;
  const SlotWrite first = dense ? SlotWrite::store_dense : SlotWrite::store;
  for (NodeId id = out; id >= 0; --id) {
    const Node& n = nodes[static_cast<std::size_t>(id)];
    if (!plan.reached[static_cast<std::size_t>(id)] || !n.op || !n.requires_grad) continue;
    Visit visit{id, contributes_once(n), {SlotWrite::none, SlotWrite::none}};
    for (int k = 0; k < (visit.pass_once ? 1 : n.arity); ++k) {
      const auto parent = static_cast<std::size_t>(n.parents[k]);
      if (!nodes[parent].requires_grad) continue;
      visit.write[k] = plan.reached[parent] ? SlotWrite::accumulate : first;
      plan.reached[parent] = 1;
    }
    plan.visits.push_back(visit);
  }
  if (dense)
    for (std::size_t id = 0; id < nodes.size(); ++id)
      if (!plan.reached[id] && nodes[id].requires_grad) plan.zero_slots.push_back(static_cast<NodeId>(id));
}

}  // namespace tapewise::detail
