// cuda/tape/backward.cpp — reverse mode: a backward's checks and plan (backward_plan.hpp), then one of
// its two executors: node by node (a kernel per VJP, fused or staged, into fresh contribution buffers)
// or as one program (backward_program.hpp). Both run the same plan, so they cannot disagree; neither
// changes the tape.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"
#include "core/log.hpp"
#include "tape/backward_plan.hpp"
#include "tape/backward_program.hpp"
#include "tape/tape_internal.hpp"

namespace tapewise {

namespace {

// The arithmetic of detail::land_contribution on whole buffers (the per-node path): contribution c
// reaching a parent's slot, by the backend's prims.
struct BufferSums {
  detail::Engine& be;
  std::optional<Buffer>& slot;
  Buffer& c;
  Result<void> onto_existing() {
    const Buffer* in[2] = {&*slot, &c};
    return be.prim(Prim::add, 0.0, in, *slot);
  }
  Result<void> plus_zero() {
    const Buffer* in[1] = {&c};
    TAPEWISE_CHECK(be.prim(Prim::add_scalar, 0.0, in, c));
    return as_is();
  }
  Result<void> as_is() {
    slot = std::move(c);
    return {};
  }
  Result<void> dropped() { return {}; }
};

// The plan and the program builder of a backward, reused by every tape of the thread: a long tape's
// backward builds its plan and steps in memory already there. A backward never runs another, so one
// of each per thread is enough.
thread_local detail::BackwardPlan backward_plan;
thread_local detail::BackwardProgram backward_program;
// A byte per position, 1 where the node's forward is pending: which values a backward program may
// compute again (BackwardProgram::build).
thread_local std::vector<std::uint8_t> pending_at;

}  // namespace

Result<Gradients> Tape::run_backward(NodeId out, const HostArray& seed, VjpPath path, bool dense,
                                     const std::span<const NodeId>* wanted) const {
  TAPEWISE_CHECK(check_has_backend(dense ? "backward_dense" : "backward"));
  auto buf = backend_->upload(seed, AllocTag::gradient);
  TAPEWISE_CHECK(buf);
  return run_backward(out, *buf, path, dense, wanted, &*buf);
}

Result<void> Tape::check_backward_args(const char* what, NodeId out, const Buffer& seed) const {
  TAPEWISE_CHECK(check_id(what, out, "output id"));
  const Buffer& out_value = nodes_[node_position(out)].value;
  if (seed.backend() != backend_.get())
    return fail(ErrorCode::BackendMismatch, std::string(what) + ": seed belongs to another backend");
  if (seed.shape() != out_value.shape())
    return fail(ErrorCode::SeedShapeMismatch, std::string(what) + ": seed has shape " + seed.shape().str() +
                                                  ", output " + detail::id_str(out) + " has shape " + out_value.shape().str());
  if (seed.dtype() != out_value.dtype())
    return fail(ErrorCode::SeedDTypeMismatch, std::string(what) + ": seed is " + dtype_name(seed.dtype()) +
                                                  ", output " + detail::id_str(out) + " is " + dtype_name(out_value.dtype()));
  return {};
}

Result<Gradients> Tape::run_backward(NodeId out, const Buffer& seed, VjpPath path, bool dense,
                                     const std::span<const NodeId>* wanted, Buffer* seed_to_take) const {
  const char* what = dense ? "backward_dense" : "backward";
  TAPEWISE_CHECK(check_backward_args(what, out, seed));
  detail::BackwardPlan& plan = backward_plan;
  plan.wanted.clear();
  if (wanted) {
    plan.wanted.assign(nodes_.size(), 0);
    for (NodeId id : *wanted) {
      TAPEWISE_CHECK(check_id(what, id, "wanted id"));
      plan.wanted[node_position(id)] = 1;
    }
  }
  // From here on nodes are named by position; Gradients get ids again (id_at).
  const auto out_at = static_cast<NodeId>(node_position(out));
  detail::plan_backward(nodes_, out_at, dense, plan);
  // Every node the backward visits has the output's shape (a node's inputs have its shape), so
  // the output's size decides whether they are all small enough for one program.
  const std::int64_t numel = nodes_[node_position(out)].value.numel();
  const bool as_program = path == VjpPath::fused && detail::runs_as_program(numel, options_.program_threshold);
  TAPEWISE_LOG(info, "tape " + std::to_string(serial_) + ": " + what + " from " + detail::id_str(out) + ": " +
                         std::to_string(plan.visits.size()) + " VJPs " +
                         (as_program ? std::string("as one program (fused; ")
                                     : std::string("node by node (") + (path == VjpPath::fused ? "fused" : "staged") + "; ") +
                         std::to_string(numel) + " elements, program_threshold " +
                         std::to_string(options_.program_threshold) + ")" +
                         (wanted ? ", " + std::to_string(wanted->size()) + " wanted" : std::string()));
  if (as_program) return run_plan_as_program(plan, out_at, seed, dense);
  TAPEWISE_CHECK(flush());
  return run_plan_per_node(plan, out_at, seed, path, seed_to_take);
}

// The plan node by node: each VJP one kernel (fused) or the spec's stages, into fresh contribution
// buffers that then land in their parents' slots as the plan says.
Result<Gradients> Tape::run_plan_per_node(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                          VjpPath path, Buffer* seed_to_take) const {
  Backend& be = *backend_;
  detail::Engine& engine = detail::engine_of(be);
  std::vector<std::optional<Buffer>> slots(nodes_.size());
  auto fresh_copy = [&](const Buffer& source) -> Result<Buffer> {
    auto copy = be.allocate(source.shape(), source.dtype(), AllocTag::gradient);
    if (!copy) return copy;
    const Buffer* in[1] = {&source};
    TAPEWISE_CHECK(engine.prim(Prim::copy, 0.0, in, *copy));
    return copy;
  };
  auto land = [&](NodeId pid, Buffer contribution, detail::SlotWrite how) -> Result<void> {
    BufferSums sums{engine, slots[node_position(pid)], contribution};
    return detail::land_contribution(how, sums);
  };

  // The output's gradient is the seed: taken where backward uploaded it, copied where it is the
  // caller's and will be handed out, else read where it is (no node's contribution lands there).
  if (seed_to_take) {
    slots[static_cast<std::size_t>(out)] = std::move(*seed_to_take);
  } else if (plan.is_wanted(out)) {
    auto seed_copy = fresh_copy(seed);
    TAPEWISE_CHECK(seed_copy);
    slots[static_cast<std::size_t>(out)] = std::move(*seed_copy);
  }
  for (const detail::Visit& visit : plan.visits) {
    const Node& node = nodes_[static_cast<std::size_t>(visit.node)];
    const std::optional<Buffer>& slot = slots[static_cast<std::size_t>(visit.node)];
    const Buffer& g = visit.node == out && !slot ? seed : *slot;
    if (visit.pass_once) {
      auto once = fresh_copy(g);
      TAPEWISE_CHECK(once);
      TAPEWISE_CHECK(land(node.parents[0], std::move(*once), visit.write[0]));
      continue;
    }
    const Buffer* inputs[2] = {};
    Buffer contributions[2];
    Buffer* outs[2] = {&contributions[0], &contributions[1]};
    for (int k = 0; k < node.arity; ++k) {
      inputs[k] = &nodes_[node_position(node.parents[k])].value;
      auto c = be.allocate(g.shape(), g.dtype(), AllocTag::gradient);
      TAPEWISE_CHECK(c);
      contributions[k] = std::move(*c);
    }
    const std::span<const Buffer* const> in_span(inputs, static_cast<std::size_t>(node.arity));
    const std::span<Buffer* const> out_span(outs, static_cast<std::size_t>(node.arity));
    auto ok = path == VjpPath::fused ? be.vjp_fused(*node.op, node.scalars, in_span, g, out_span)
                                     : staged_vjp(be, *node.op, node.scalars, in_span, g, out_span);
    TAPEWISE_CHECK(ok);
    for (int k = 0; k < node.arity; ++k)
      TAPEWISE_CHECK(land(node.parents[k], std::move(contributions[k]), visit.write[k]));
    // An unwanted gradient is released once its node's VJP has read it (stream-ordered, like every
    // contribution buffer here).
    if (!plan.is_wanted(visit.node)) slots[static_cast<std::size_t>(visit.node)].reset();
  }
  for (NodeId id : plan.zero_slots) {
    auto zeros = be.allocate(nodes_[static_cast<std::size_t>(id)].value.shape(),
                             nodes_[static_cast<std::size_t>(id)].value.dtype(), AllocTag::gradient);
    TAPEWISE_CHECK(zeros);
    TAPEWISE_CHECK(engine.prim(Prim::fill, 0.0, {}, *zeros));
    slots[static_cast<std::size_t>(id)] = std::move(*zeros);
  }
  Gradients grads(nodes_.size());
  grads.serial_ = serial_;
  for (std::size_t at = 0; at < slots.size(); ++at)
    if (slots[at] && plan.is_wanted(static_cast<NodeId>(at))) grads.put(id_at(at), std::move(*slots[at]));
  return grads;
}

// The plan as one program (backward_program.hpp builds it): the same visits in the same order, each
// contribution written as the per-node executor lands it. The program is built and its slots allocated
// before the pending forwards it reads are flushed (building reads only the values' addresses, given at
// record), so a failing allocation changes nothing at all.
Result<Gradients> Tape::run_plan_as_program(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                            bool dense) const {
  detail::Engine& engine = detail::engine_of(*backend_);
  detail::BackwardProgram& builder = backward_program;
  struct Released {  // on every way out: the builder holds no buffer between calls
    detail::BackwardProgram& builder;
    ~Released() { builder.release(); }
  } released{builder};
  const char* what = dense ? "backward_dense" : "backward";
  TAPEWISE_CHECK(builder.allocate_slots(engine, plan, nodes_, out, dense));
  std::span<const std::uint8_t> pending;
  const Buffer& out_value = nodes_[static_cast<std::size_t>(out)].value;
  if (out_value.numel() >= detail::recompute_from(backend_->kind(), out_value.dtype())) {
    pending_at.assign(nodes_.size(), 0);
    for (NodeId at : pending_) pending_at[static_cast<std::size_t>(at)] = 1;
    pending = pending_at;
  }
  const detail::Program& program = builder.build(plan, nodes_, out, seed, options_.program_threshold, pending);
  TAPEWISE_CHECK(builder.allocate_internal_slots(engine, what));
  TAPEWISE_CHECK(flush_for_backward(builder.values_read(), out));
  TAPEWISE_CHECK(engine.run_program(program));
  TAPEWISE_CHECK(builder.fill_large_zeros(engine));
  Gradients grads(nodes_.size());
  grads.serial_ = serial_;
  builder.hand_out([&](NodeId at, Buffer slot) { grads.put(id_at(node_position(at)), std::move(slot)); });
  return grads;  // the internal slots released with the builder's, stream-ordered after the program
}

}  // namespace tapewise
