// cuda/tape/tape.cpp — recording and reverse mode. Recording checks ids, shapes and dtypes, runs the
// forward (or defers it to the next program, for small nodes) and appends a data node; backward
// interprets nodes in descending id order, node by node or as one program. Nothing is appended or
// mutated until every step has succeeded, so an error leaves the tape unchanged, but for the one
// thing tape.hpp states: pending forwards that a flush before the failure has run.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <string>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"
#include "tape/backward_plan.hpp"
#include "kernels/program.hpp"

namespace tapewise {

static_assert(TapeOptions{}.max_pending_nodes == detail::kStepsPerLaunch,
              "a full pending list is meant to be exactly one CUDA launch of program steps");
constexpr std::int64_t kMostPendingNodes = 65536;  // TapeOptions::max_pending_nodes's upper bound

namespace {
std::string id_str(NodeId id) { return "#" + std::to_string(id); }

// Programs write into buffers the tape hands out as const (values computed late, slots being
// filled): the buffers are the tape's own.
void* writable(const Buffer& b) { return const_cast<void*>(b.data()); }

bool runs_as_program(std::int64_t numel, std::int64_t threshold) { return threshold > 0 && numel <= threshold; }

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

// Working storage of flush and backward, reused by every tape of the thread: a long recording and
// its backward then build their programs, plans and slot lists in memory that is already there
// (no large temporary allocated and freed, and touched afresh, per call). Neither calls the other
// while using its part, so one set per thread is enough.
struct Scratch {
  detail::Program flush_program;
  detail::Program backward_program;
  detail::BackwardPlan plan;
  std::vector<BufferSpec> specs;
  std::vector<std::size_t> slot_of;
  std::vector<void*> slot_address;
  std::vector<NodeId> internal_slots;
  std::vector<NodeId> large_zeros;
  std::vector<std::int64_t> reader_step;
  std::vector<std::uint8_t> accumulated, only_the_next_reads;
  std::vector<Buffer> slots;  // a program backward's gradient slots; empty between calls
};
thread_local Scratch scratch;

// Releases the buffer of each item, taking the backend's allocation lock once per 256 buffers rather
// than once each (a tape's teardown, a backward's slots).
template <class Items, class BufferOf>
void release_together(detail::Engine& engine, Items& items, BufferOf buffer_of) {
  Buffer* batch[256];
  std::size_t count = 0;
  for (auto& item : items) {
    batch[count++] = &buffer_of(item);
    if (count == std::size(batch)) {
      engine.release_buffers({batch, count});
      count = 0;
    }
  }
  engine.release_buffers({batch, count});
}

// For a backward returning only the wanted gradients: which slot writes of its program (the seed copy,
// then a step per visit) no step but the next reads, the slot not being returned — a slot no
// contribution accumulates onto, read only by its own node's visit — and so stay in registers.
void keep_unwanted_in_registers(const detail::BackwardPlan& plan, std::span<const Node> nodes, NodeId out,
                                detail::Program& program) {
  const std::size_t count = plan.wanted.size();
  std::vector<std::int64_t>& reader_step = scratch.reader_step;  // the step reading a node's slot as g
  std::vector<std::uint8_t>& accumulated = scratch.accumulated;
  reader_step.assign(count, -1);
  accumulated.assign(count, 0);
  for (std::size_t i = 0; i < plan.visits.size(); ++i) {
    const detail::Visit& visit = plan.visits[i];
    reader_step[static_cast<std::size_t>(visit.node)] = static_cast<std::int64_t>(i + 1);
    for (std::size_t k = 0; k < 2; ++k)
      if (visit.write[k] == detail::SlotWrite::accumulate)
        accumulated[static_cast<std::size_t>(nodes[static_cast<std::size_t>(visit.node)].parents[k])] = 1;
  }
  std::vector<std::uint8_t>& only_next = scratch.only_the_next_reads;
  only_next.assign(program.steps.size(), 0);
  auto mark = [&](std::size_t step, int k, NodeId node) {
    const auto id = static_cast<std::size_t>(node);
    if (!plan.wanted[id] && !accumulated[id] && (reader_step[id] < 0 || reader_step[id] == static_cast<std::int64_t>(step + 1)))
      only_next[step] |= static_cast<std::uint8_t>(1u << k);
  };
  mark(0, 0, out);  // the seed copy
  for (std::size_t i = 0; i < plan.visits.size(); ++i) {
    const detail::Visit& visit = plan.visits[i];
    for (int k = 0; k < 2; ++k)
      if (visit.write[static_cast<std::size_t>(k)] != detail::SlotWrite::none)
        mark(i + 1, k, nodes[static_cast<std::size_t>(visit.node)].parents[static_cast<std::size_t>(k)]);
  }
  detail::keep_in_registers(program, only_next);
}

}  // namespace

Buffer* Gradients::find(NodeId id) const {
  auto it = std::lower_bound(received_.begin(), received_.end(), id,
                             [](const std::pair<NodeId, Buffer>& slot, NodeId key) { return slot.first < key; });
  if (it == received_.end() || it->first != id || !it->second) return nullptr;
  return const_cast<Buffer*>(&it->second);
}

const Buffer* Gradients::get(NodeId id) const { return find(id); }

void Gradients::put(NodeId id, Buffer b) { received_.emplace_back(id, std::move(b)); }

Result<HostArray> Gradients::host(NodeId id) const {
  const Buffer* b = get(id);
  if (!b) return fail(ErrorCode::InvalidNodeId, "gradients: node " + id_str(id) + " received no gradient");
  return const_cast<Backend*>(b->backend())->download(*b);
}

Buffer Gradients::take(NodeId id) {
  Buffer* b = find(id);
  return b ? std::move(*b) : Buffer();
}

// The node storage of the last tape this thread released, kept for its next tape: a long recording
// then appends into memory that is already there, instead of growing a vector of a few hundred KB
// (which the C library maps and unmaps afresh) for every tape.
namespace {
struct SpareNodes {
  std::vector<Node> nodes;
  ~SpareNodes();
};
thread_local bool spare_nodes_gone = false;  // trivially destructible: readable to the thread's end
thread_local SpareNodes spare_nodes;
SpareNodes::~SpareNodes() { spare_nodes_gone = true; }
}  // namespace

Tape::Tape(std::shared_ptr<Backend> backend) : backend_(std::move(backend)) {
  if (!spare_nodes_gone) nodes_.swap(spare_nodes.nodes);
  // Recording never reallocates the pending list, so it never fails halfway.
  pending_.reserve(static_cast<std::size_t>(options_.max_pending_nodes));
}

Tape::~Tape() {
  if (!backend_) return;  // moved from
  release_together(detail::engine_of(*backend_), nodes_, [](Node& n) -> Buffer& { return n.value; });
  nodes_.clear();
  if (!spare_nodes_gone && nodes_.capacity() > spare_nodes.nodes.capacity()) nodes_.swap(spare_nodes.nodes);
}

Result<void> Tape::set_options(const TapeOptions& options) {
  if (options.program_threshold < 0)
    return fail(ErrorCode::InvalidArgument, "set_options: program_threshold " + std::to_string(options.program_threshold) +
                                                " is negative (an element count: 0 turns programs off)");
  if (options.max_pending_nodes < 1 || options.max_pending_nodes > kMostPendingNodes)
    return fail(ErrorCode::InvalidArgument, "set_options: max_pending_nodes " +
                                                std::to_string(options.max_pending_nodes) + " is outside 1 .. " +
                                                std::to_string(kMostPendingNodes));
  try {
    pending_.reserve(static_cast<std::size_t>(options.max_pending_nodes));
  } catch (const std::bad_alloc&) {
    return fail(ErrorCode::OutOfMemory, "set_options: no host memory for " +
                                            std::to_string(options.max_pending_nodes) + " pending nodes");
  }
  options_ = options;
  return {};
}

Result<void> Tape::flush() const {
  if (pending_.empty()) return {};
  detail::Program& program = scratch.flush_program;
  program.steps.clear();
  for (NodeId id : pending_) {
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    detail::Step& step = program.append();
    step.kind = detail::StepKind::forward;
    step.op = *n.op;
    step.dtype = n.value.dtype();
    step.numel = n.value.numel();
    step.s0 = n.scalars.s0;
    step.s1 = n.scalars.s1;
    for (int k = 0; k < n.arity; ++k) step.in[k] = nodes_[static_cast<std::size_t>(n.parents[k])].value.data();
    step.out[0] = writable(n.value);
    program.seal_last();
  }
  // On failure the nodes stay pending (tape.hpp says why) and the next read runs them again.
  if (auto ok = detail::engine_of(*backend_).run_program(program); !ok) return ok;
  pending_.clear();
  return {};
}

Result<void> Tape::check_id(const char* what, NodeId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size())
    return fail(ErrorCode::InvalidNodeId, std::string(what) + ": invalid node id " + std::to_string(id) +
                                              " (tape has " + std::to_string(nodes_.size()) + " nodes)");
  return {};
}

Result<const Node*> Tape::node(NodeId id) const {
  TAPEWISE_CHECK(check_id("node", id));
  return &nodes_[static_cast<std::size_t>(id)];
}

// A moved-from tape has no backend: recording on it is an error naming that, not a null dereference.
Result<void> Tape::check_has_backend(const char* what) const {
  if (!backend_)
    return fail(ErrorCode::InvalidArgument,
                std::string(what) + ": this Tape was moved from (it has no backend); record on the tape it was moved to");
  return {};
}

Result<NodeId> Tape::leaf(Buffer value, bool requires_grad) {
  TAPEWISE_CHECK(check_has_backend("leaf"));
  if (!value) return fail(ErrorCode::InvalidArgument, "leaf: empty buffer");
  if (value.backend() != backend_.get())
    return fail(ErrorCode::BackendMismatch, "leaf: buffer belongs to another backend than this tape's");
  Node& n = nodes_.emplace_back();
  n.requires_grad = requires_grad;
  n.value = std::move(value);
  return static_cast<NodeId>(nodes_.size() - 1);
}

Result<NodeId> Tape::leaf(const HostArray& value, bool requires_grad) {
  TAPEWISE_CHECK(check_has_backend("leaf"));
  auto buf = backend_->upload(value, AllocTag::value);
  TAPEWISE_CHECK(buf);
  return leaf(std::move(*buf), requires_grad);
}

Result<NodeId> Tape::apply(Op op, std::span<const NodeId> parents, Scalars scalars) {
  if (static_cast<int>(op) < 0 || static_cast<int>(op) >= kOpCount)
    return fail(ErrorCode::InvalidArgument, "apply: op " + std::to_string(static_cast<int>(op)) + " is not a node (0.." +
                                                std::to_string(kOpCount - 1) + ")");
  const OpInfo& info = op_info(op);
  if (static_cast<int>(parents.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + ": takes " + std::to_string(info.arity) +
                                                " inputs, got " + std::to_string(parents.size()));
  const Buffer* inputs[2] = {};
  bool requires_grad = false;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    TAPEWISE_CHECK(check_id(info.name, parents[i]));
    const Node& p = nodes_[static_cast<std::size_t>(parents[i])];
    inputs[i] = &p.value;
    requires_grad = requires_grad || p.requires_grad;
  }
  if (info.arity == 2) {
    const Buffer& a = *inputs[0];
    const Buffer& b = *inputs[1];
    if (a.shape() != b.shape())
      return fail(ErrorCode::ShapeMismatch, std::string(info.name) + ": a " + id_str(parents[0]) + " has shape " +
                                                a.shape().str() + ", b " + id_str(parents[1]) + " has shape " + b.shape().str());
    if (a.dtype() != b.dtype())
      return fail(ErrorCode::DTypeMismatch, std::string(info.name) + ": a " + id_str(parents[0]) + " is " +
                                                dtype_name(a.dtype()) + ", b " + id_str(parents[1]) + " is " + dtype_name(b.dtype()));
  }
  // Allocation first: a failure then leaves even the pending list as it was.
  auto value = detail::engine_of(*backend_).allocate_like(*inputs[0], AllocTag::value);
  TAPEWISE_CHECK(value);
  const bool deferred = runs_as_program(inputs[0]->numel(), options_.program_threshold);
  if (deferred) {
    if (pending_.size() >= static_cast<std::size_t>(options_.max_pending_nodes))
      TAPEWISE_CHECK(flush());
  } else {
    // A larger node runs now, on its own kernel, after whatever is pending (its inputs may be
    // pending nodes when the threshold was lowered since they were recorded).
    TAPEWISE_CHECK(flush());
    TAPEWISE_CHECK(backend_->forward(op, scalars, {inputs, parents.size()}, *value));
  }
  Node& n = nodes_.emplace_back();
  n.op = op;
  n.scalars = scalars;
  n.arity = info.arity;
  for (std::size_t i = 0; i < parents.size(); ++i) n.parents[i] = parents[i];
  n.requires_grad = requires_grad;
  n.value = std::move(*value);
  const auto id = static_cast<NodeId>(nodes_.size() - 1);
  if (deferred) pending_.push_back(id);  // within the reserved capacity: cannot fail
  return id;
}

Result<const Buffer*> Tape::value_buffer(NodeId id) const {
  TAPEWISE_CHECK(check_id("value", id));
  TAPEWISE_CHECK(flush());
  return &nodes_[static_cast<std::size_t>(id)].value;
}

Result<HostArray> Tape::value(NodeId id) const {
  TAPEWISE_CHECK(check_id("value", id));
  TAPEWISE_CHECK(flush());
  return backend_->download(nodes_[static_cast<std::size_t>(id)].value);
}

Result<Gradients> Tape::backward(NodeId out, const Buffer& seed, VjpPath path) const {
  return run_backward(out, seed, path, false, nullptr);
}
Result<Gradients> Tape::backward_dense(NodeId out, const Buffer& seed, VjpPath path) const {
  return run_backward(out, seed, path, true, nullptr);
}
Result<Gradients> Tape::backward(NodeId out, const HostArray& seed, VjpPath path) const {
  return run_backward(out, seed, path, false, nullptr);
}
Result<Gradients> Tape::backward_dense(NodeId out, const HostArray& seed, VjpPath path) const {
  return run_backward(out, seed, path, true, nullptr);
}
Result<Gradients> Tape::backward(NodeId out, const Buffer& seed, std::span<const NodeId> wanted, VjpPath path) const {
  return run_backward(out, seed, path, false, &wanted);
}
Result<Gradients> Tape::backward(NodeId out, const HostArray& seed, std::span<const NodeId> wanted,
                                 VjpPath path) const {
  return run_backward(out, seed, path, false, &wanted);
}
Result<Gradients> Tape::backward_dense(NodeId out, const Buffer& seed, std::span<const NodeId> wanted,
                                       VjpPath path) const {
  return run_backward(out, seed, path, true, &wanted);
}
Result<Gradients> Tape::backward_dense(NodeId out, const HostArray& seed, std::span<const NodeId> wanted,
                                       VjpPath path) const {
  return run_backward(out, seed, path, true, &wanted);
}

Result<Gradients> Tape::run_backward(NodeId out, const HostArray& seed, VjpPath path, bool dense,
                                     const std::span<const NodeId>* wanted) const {
  TAPEWISE_CHECK(check_has_backend(dense ? "backward_dense" : "backward"));
  auto buf = backend_->upload(seed, AllocTag::gradient);
  TAPEWISE_CHECK(buf);
  return run_backward(out, *buf, path, dense, wanted);
}

Result<void> Tape::check_backward_args(const char* what, NodeId out, const Buffer& seed) const {
  if (out < 0 || static_cast<std::size_t>(out) >= nodes_.size())
    return fail(ErrorCode::InvalidNodeId, std::string(what) + ": invalid output id " + std::to_string(out) +
                                              " (tape has " + std::to_string(nodes_.size()) + " nodes)");
  const Buffer& out_value = nodes_[static_cast<std::size_t>(out)].value;
  if (seed.backend() != backend_.get())
    return fail(ErrorCode::BackendMismatch, std::string(what) + ": seed belongs to another backend");
  if (seed.shape() != out_value.shape())
    return fail(ErrorCode::SeedShapeMismatch, std::string(what) + ": seed has shape " + seed.shape().str() +
                                                  ", output " + id_str(out) + " has shape " + out_value.shape().str());
  if (seed.dtype() != out_value.dtype())
    return fail(ErrorCode::SeedDTypeMismatch, std::string(what) + ": seed is " + dtype_name(seed.dtype()) +
                                                  ", output " + id_str(out) + " is " + dtype_name(out_value.dtype()));
  return {};
}

Result<Gradients> Tape::run_backward(NodeId out, const Buffer& seed, VjpPath path, bool dense,
                                     const std::span<const NodeId>* wanted) const {
  const char* what = dense ? "backward_dense" : "backward";
  TAPEWISE_CHECK(check_backward_args(what, out, seed));
  detail::BackwardPlan& plan = scratch.plan;
  plan.wanted.clear();
  if (wanted) {
    plan.wanted.assign(nodes_.size(), 0);
    for (NodeId id : *wanted) {
      if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size())
        return fail(ErrorCode::InvalidNodeId, std::string(what) + ": invalid wanted id " + std::to_string(id) +
                                                  " (tape has " + std::to_string(nodes_.size()) + " nodes)");
      plan.wanted[static_cast<std::size_t>(id)] = 1;
    }
  }
  detail::plan_backward(nodes_, out, dense, plan);
  // Every node the backward visits has the output's shape (a node's inputs have its shape), so
  // the output's size decides whether they are all small enough for one program.
  const std::int64_t numel = nodes_[static_cast<std::size_t>(out)].value.numel();
  if (path == VjpPath::fused && runs_as_program(numel, options_.program_threshold))
    return run_plan_as_program(plan, out, seed, dense);
  TAPEWISE_CHECK(flush());
  return run_plan_per_node(plan, out, seed, path);
}

// The plan node by node: each VJP one kernel (fused) or the spec's stages, into fresh contribution
// buffers that then land in their parents' slots as the plan says.
Result<Gradients> Tape::run_plan_per_node(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                          VjpPath path) const {
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
    BufferSums sums{engine, slots[static_cast<std::size_t>(pid)], contribution};
    return detail::land_contribution(how, sums);
  };

  auto seed_copy = fresh_copy(seed);
  TAPEWISE_CHECK(seed_copy);
  slots[static_cast<std::size_t>(out)] = std::move(*seed_copy);
  for (const detail::Visit& visit : plan.visits) {
    const Node& node = nodes_[static_cast<std::size_t>(visit.node)];
    const Buffer& g = *slots[static_cast<std::size_t>(visit.node)];
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
      inputs[k] = &nodes_[static_cast<std::size_t>(node.parents[k])].value;
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
  for (std::size_t id = 0; id < slots.size(); ++id)
    if (slots[id] && plan.is_wanted(static_cast<NodeId>(id))) grads.put(static_cast<NodeId>(id), std::move(*slots[id]));
  return grads;
}

// The plan as one program: the same visits in the same order, each contribution written as the
// per-node executor lands it. The slots returned are buffers carved from one allocation; the others
// (the gradients in between, when only some are wanted) are addresses in one more, released once the
// program is queued: no buffer object per node. Both are made before the pending forwards are
// flushed, so a failing allocation changes nothing at all.
Result<Gradients> Tape::run_plan_as_program(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                            bool dense) const {
  Backend& be = *backend_;
  detail::Engine& engine = detail::engine_of(be);
  const std::size_t count = nodes_.size();
  auto at = [&](NodeId id) -> const Node& { return nodes_[static_cast<std::size_t>(id)]; };
  // A slot the walk reaches has the output's shape and dtype (a node's inputs have its own).
  const Buffer& like = at(out).value;
  // Slot specs written over the scratch's earlier ones: their shapes' storage is reused.
  std::vector<BufferSpec>& specs = scratch.specs;
  std::vector<std::size_t>& slot_of = scratch.slot_of;  // a returned slot's index in `slots`
  std::vector<void*>& address = scratch.slot_address;
  std::vector<NodeId>& internal = scratch.internal_slots;
  slot_of.assign(count, SIZE_MAX);
  address.assign(count, nullptr);
  internal.clear();
  std::size_t returned = 0;
  for (std::size_t id = 0; id < count; ++id) {
    if (!plan.has_slot(static_cast<NodeId>(id), dense, nodes_[id])) continue;
    if (!plan.is_wanted(static_cast<NodeId>(id))) {
      internal.push_back(static_cast<NodeId>(id));
      continue;
    }
    if (returned == specs.size()) specs.emplace_back();
    specs[returned].shape = nodes_[id].value.shape();  // a dense zero slot may lie outside the output's graph
    specs[returned].dtype = nodes_[id].value.dtype();
    slot_of[id] = returned++;
  }
  std::vector<Buffer>& slots = scratch.slots;
  Buffer internal_slots;
  struct Emptied {  // on every way out, so that the scratch holds no buffer between calls
    std::vector<Buffer>& slots;
    ~Emptied() { slots.clear(); }
  } emptied{slots};
  TAPEWISE_CHECK(engine.allocate_many_into({specs.data(), returned}, AllocTag::gradient, slots));
  if (!internal.empty()) {
    // One buffer of the internal slots end to end, each 16-byte aligned as allocate_many's parts are.
    const std::int64_t stride = (like.numel() * static_cast<std::int64_t>(dtype_size(like.dtype())) + 15) / 16 * 16;
    const auto slots_inside = static_cast<std::int64_t>(internal.size());
    if (stride > 0 && slots_inside > std::numeric_limits<std::int64_t>::max() / stride)
      return fail(ErrorCode::OutOfMemory, std::string(dense ? "backward_dense" : "backward") + ": " +
                                              std::to_string(slots_inside) + " gradient slots of " + like.shape().str() +
                                              " are too large to address");
    auto buffer = engine.allocate(Shape{slots_inside * stride / static_cast<std::int64_t>(dtype_size(like.dtype()))},
                                  like.dtype(), AllocTag::gradient);
    TAPEWISE_CHECK(buffer);
    internal_slots = std::move(*buffer);
    if (stride > 0)  // else every internal slot is empty, its address null as an empty buffer's
      for (std::size_t i = 0; i < internal.size(); ++i)
        address[static_cast<std::size_t>(internal[i])] = static_cast<std::byte*>(internal_slots.data()) + i * stride;
  }
  for (std::size_t id = 0; id < count; ++id)
    if (slot_of[id] != SIZE_MAX) address[id] = slots[slot_of[id]].data();
  TAPEWISE_CHECK(flush());
  auto slot = [&](NodeId id) { return address[static_cast<std::size_t>(id)]; };
  detail::Program& program = scratch.backward_program;
  program.steps.clear();
  // A new step of the program, filled where it lies (Program::append) and sealed once complete.
  auto new_step = [&](detail::StepKind kind, const Buffer& shaped) -> detail::Step& {
    detail::Step& step = program.append();
    step.kind = kind;
    step.dtype = shaped.dtype();
    step.numel = shaped.numel();
    return step;
  };
  detail::Step& copy = new_step(detail::StepKind::pass, seed);
  copy.in[0] = seed.data();
  copy.out[0] = slot(out);
  copy.write[0] = detail::SlotWrite::store;
  program.seal_last();
  for (const detail::Visit& visit : plan.visits) {
    const Node& n = at(visit.node);
    void* g = slot(visit.node);
    detail::Step& step = new_step(visit.pass_once ? detail::StepKind::pass : detail::StepKind::vjp, like);
    step.in[0] = g;
    if (!visit.pass_once) {
      step.op = *n.op;
      step.s0 = n.scalars.s0;
      step.s1 = n.scalars.s1;
      step.g = g;
      for (int k = 0; k < n.arity; ++k) step.in[k] = at(n.parents[k]).value.data();
    }
    for (int k = 0; k < (visit.pass_once ? 1 : n.arity); ++k) {
      step.write[k] = visit.write[k];
      if (visit.write[k] != detail::SlotWrite::none) step.out[k] = slot(n.parents[k]);
    }
    program.seal_last();
  }
  // Dense: slots that received nothing hold +0; a large one (a node outside the output's graph)
  // by a fill kernel, so the program's threads stay as many as the output's elements. Each is returned.
  std::vector<NodeId>& large_zeros = scratch.large_zeros;
  large_zeros.clear();
  for (NodeId id : plan.zero_slots) {
    Buffer& zeros = slots[slot_of[static_cast<std::size_t>(id)]];
    if (!runs_as_program(zeros.numel(), options_.program_threshold)) {
      large_zeros.push_back(id);
      continue;
    }
    detail::Step& zero = new_step(detail::StepKind::zero, zeros);
    zero.out[0] = zeros.data();
    program.seal_last();
  }
  if (!plan.wanted.empty()) keep_unwanted_in_registers(plan, nodes_, out, program);
  TAPEWISE_CHECK(engine.run_program(program));
  for (NodeId id : large_zeros)
    TAPEWISE_CHECK(engine.prim(Prim::fill, 0.0, {}, slots[slot_of[static_cast<std::size_t>(id)]]));

  Gradients grads(count);
  for (std::size_t id = 0; id < count; ++id)
    if (slot_of[id] != SIZE_MAX) grads.put(static_cast<NodeId>(id), std::move(slots[slot_of[id]]));
  return grads;  // internal_slots released here, stream-ordered after the program
}

}  // namespace tapewise
