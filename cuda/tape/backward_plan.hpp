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

// Nodes are named by position here (node_position), their parents by id. One node's turn in the walk: its VJP (or, for max(a, a) / min(a, a), passing g on once) with
// the way each parent's contribution is written.
struct Visit {
  NodeId node = -1;
  bool pass_once = false;                // the coalesced-contribution rule: g goes to parents[0] as is
  std::array<SlotWrite, 2> write{};      // per parent; none where the parent does not require grad
};

struct BackwardPlan {
  std::vector<std::uint8_t> reached;  // per node: its slot receives a contribution (the output included)
  std::vector<std::uint8_t> wanted;   // per node: its gradient is returned (empty: every node's)
  std::vector<std::uint8_t> leads;    // per node: wanted, or a parent leads (its VJP feeds a wanted one)
  std::vector<Visit> visits;          // descending ids
  std::vector<NodeId> zero_slots;     // dense: wanted nodes requiring grad that receive nothing (+0 slots)

  bool is_wanted(NodeId id) const { return wanted.empty() || wanted[static_cast<std::size_t>(id)]; }
  bool has_slot(NodeId id, bool dense, const Node& n) const {
    return reached[static_cast<std::size_t>(id)] || (dense && n.requires_grad && is_wanted(id));
  }
};

// The coalesced-contribution rule: a node whose row says same_parent = once (max, min), with one
// node as both parents, gives it the upstream value once.
inline bool contributes_once(const Node& n) {
  return n.arity == 2 && n.parents[0] == n.parents[1] && op_info(*n.op).same_parent == SameParent::once;
}

// Which nodes lead to a wanted one (ascending ids: parents come first): a wanted node, and a node
// requiring grad with a parent that leads. Only they need a VJP or a slot; every contribution to a
// node that leads comes from a node that leads, so the wanted gradients are those of the full walk.
inline void mark_leads(std::span<const Node> nodes, BackwardPlan& plan) {
  plan.leads.assign(nodes.size(), 1);
  if (plan.wanted.empty()) return;
  for (std::size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    bool leads = plan.wanted[id] != 0;
    for (int k = 0; k < n.arity && !leads; ++k)
      leads = n.requires_grad && plan.leads[node_position(n.parents[k])];
    plan.leads[id] = leads;
  }
}

// The walk from `out` (a valid position) in descending positions: a node runs its VJP when it received a
// contribution, is not a leaf, requires grad and leads to a wanted node (plan.wanted, set by the
// caller; empty: every node is). A parent's first contribution is stored (dense: added to +0), later
// ones accumulate as existing + c, in parent order (a, b); a parent that does not require grad or
// leads nowhere gets none. Written into `plan`, whose vectors keep their capacity from an earlier walk.
inline void plan_backward(std::span<const Node> nodes, NodeId out, bool dense, BackwardPlan& plan) {
  mark_leads(nodes, plan);
  plan.reached.assign(nodes.size(), 0);
  plan.visits.clear();
  plan.zero_slots.clear();
  plan.reached[static_cast<std::size_t>(out)] = 1;
  const SlotWrite first = dense ? SlotWrite::store_dense : SlotWrite::store;
  for (NodeId id = out; id >= 0; --id) {
    const auto at = static_cast<std::size_t>(id);
    const Node& n = nodes[at];
    if (!plan.reached[at] || !n.op || !n.requires_grad || !plan.leads[at]) continue;
    Visit visit{id, contributes_once(n), {SlotWrite::none, SlotWrite::none}};
    for (int k = 0; k < (visit.pass_once ? 1 : n.arity); ++k) {
      const std::size_t parent = node_position(n.parents[k]);
      if (!nodes[parent].requires_grad || !plan.leads[parent]) continue;
      visit.write[k] = plan.reached[parent] ? SlotWrite::accumulate : first;
      plan.reached[parent] = 1;
    }
    plan.visits.push_back(visit);
  }
  if (dense)
    for (std::size_t id = 0; id < nodes.size(); ++id)
      if (!plan.reached[id] && nodes[id].requires_grad && plan.is_wanted(static_cast<NodeId>(id)))
        plan.zero_slots.push_back(static_cast<NodeId>(id));
}

}  // namespace tapewise::detail
