// cuda/tape/tape_internal.hpp — what recording (tape.cpp) and reverse mode (backward.cpp) share: how a
// node id is written in messages and why one is refused, which nodes run as programs, and a node's
// forward as a program step.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <tapewise/tape.hpp>

#include "kernels/program.hpp"

namespace tapewise::detail {

// A node by its position: the tape it is on is named where that matters (id_error).
inline std::string id_str(NodeId id) { return "#" + std::to_string(node_position(id)); }

// Whether `id` names one of the `size` nodes of the tape whose position-0 id is `base`: one unsigned
// comparison, so a negative id or another tape's id (other high bits) lands far above size.
inline bool names_node(NodeId id, NodeId base, std::size_t size) {
  return static_cast<std::uint64_t>(id) - static_cast<std::uint64_t>(base) < size;
}

// Why `id` is not a node of tape `serial` (of `size` nodes): another tape's id, a number no tape
// handed out, or a position past the end. `what` names the call, `role` the argument ("node",
// "output id", "wanted id").
inline Error id_error(const std::string& what, const char* role, NodeId id, std::uint32_t serial, std::size_t size) {
  const std::uint32_t owner = node_tape(id);
  std::string text = what + ": ";
  if (id >= 0 && owner != 0 && owner != serial)
    text += std::string(role) + " " + id_str(id) + " of tape " + std::to_string(owner) + " used on tape " +
            std::to_string(serial) + " (an id is valid only on the tape that recorded it)";
  else if (id >= 0 && owner == serial)
    text += "invalid " + std::string(role) + " " + id_str(id) + " (tape " + std::to_string(serial) + " has " +
            std::to_string(size) + " nodes)";
  else
    text += "invalid " + std::string(role) + " " + std::to_string(id) + " (no tape's id; tape " +
            std::to_string(serial) + " has " + std::to_string(size) + " nodes)";
  return Error{ErrorCode::InvalidNodeId, std::move(text)};
}

// Nodes of at most `threshold` elements run as programs (TapeOptions::program_threshold; 0: none).
inline bool runs_as_program(std::int64_t numel, std::int64_t threshold) { return threshold > 0 && numel <= threshold; }

// Fills a step Program::append made as node `n`'s forward, storing its value; `nodes` are the tape's
// (n's parents among them). The caller seals it. Programs write into the value the tape hands out as
// const: it is the tape's own.
inline void fill_forward_step(Step& step, const Node& n, std::span<const Node> nodes) {
  step.kind = StepKind::forward;
  step.op = *n.op;
  step.dtype = n.value.dtype();
  step.numel = n.value.numel();
  step.s0 = n.scalars.s0;
  step.s1 = n.scalars.s1;
  for (int k = 0; k < n.arity; ++k) step.in[k] = nodes[node_position(n.parents[k])].value.data();
  step.out[0] = const_cast<void*>(n.value.data());
}

}  // namespace tapewise::detail
