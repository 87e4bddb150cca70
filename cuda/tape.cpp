// cuda/tape.cpp — recording and reverse mode. Recording checks ids, shapes and dtypes, runs the
// forward and appends a data node; backward interprets nodes in descending id order. Nothing is
// appended or mutated until every step has succeeded, so an error leaves the tape unchanged.
#include <string>

#include <tapewise/tape.hpp>

namespace tapewise {

namespace {
std::string id_str(NodeId id) { return "#" + std::to_string(id); }
}  // namespace

bool Gradients::has(NodeId id) const {
  return id >= 0 && static_cast<std::size_t>(id) < slots_.size() && slots_[static_cast<std::size_t>(id)].has_value();
}

const Buffer* Gradients::get(NodeId id) const {
  return has(id) ? &*slots_[static_cast<std::size_t>(id)] : nullptr;
}

Result<HostArray> Gradients::host(NodeId id) const {
  const Buffer* b = get(id);
  if (!b) return fail(ErrorCode::InvalidNodeId, "gradients: node " + id_str(id) + " received no gradient");
  return const_cast<Backend*>(b->backend())->download(*b);
}

Buffer Gradients::take(NodeId id) {
  if (!has(id)) return Buffer();
  Buffer b = std::move(*slots_[static_cast<std::size_t>(id)]);
  slots_[static_cast<std::size_t>(id)].reset();
  return b;
}

Tape::Tape(std::shared_ptr<Backend> backend) : backend_(std::move(backend)) {}

Result<void> Tape::check_id(const char* what, NodeId id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= nodes_.size())
    return fail(ErrorCode::InvalidNodeId, std::string(what) + ": invalid node id " + std::to_string(id) +
                                              " (tape has " + std::to_string(nodes_.size()) + " nodes)");
  return {};
}

Result<NodeId> Tape::leaf(Buffer value, bool requires_grad) {
  if (!value) return fail(ErrorCode::InvalidArgument, "leaf: empty buffer");
  if (value.backend() != backend_.get())
    return fail(ErrorCode::BackendMismatch, "leaf: buffer belongs to another backend than this tape's");
  Node n;
  n.requires_grad = requires_grad;
  n.value = std::move(value);
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

Result<NodeId> Tape::leaf(const HostArray& value, bool requires_grad) {
  auto buf = backend_->upload(value, AllocTag::value);
  if (!buf) return tl::unexpected(buf.error());
  return leaf(std::move(*buf), requires_grad);
}

Result<NodeId> Tape::apply(Op op, std::span<const NodeId> parents, Scalars scalars) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(parents.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + ": takes " + std::to_string(info.arity) +
                                                " inputs, got " + std::to_string(parents.size()));
  const Buffer* inputs[2] = {};
  bool requires_grad = false;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    if (auto ok = check_id(info.name, parents[i]); !ok) return tl::unexpected(ok.error());
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
  auto value = backend_->allocate(inputs[0]->shape(), inputs[0]->dtype(), AllocTag::value);
  if (!value) return tl::unexpected(value.error());
  if (auto ok = backend_->forward(op, scalars, {inputs, parents.size()}, *value); !ok)
    return tl::unexpected(ok.error());
  Node n;
  n.op = op;
  n.scalars = scalars;
  n.arity = info.arity;
  for (std::size_t i = 0; i < parents.size(); ++i) n.parents[i] = parents[i];
  n.requires_grad = requires_grad;
  n.value = std::move(*value);
  nodes_.push_back(std::move(n));
  return static_cast<NodeId>(nodes_.size() - 1);
}

Result<const Buffer*> Tape::value_buffer(NodeId id) const {
  if (auto ok = check_id("value", id); !ok) return tl::unexpected(ok.error());
  return &nodes_[static_cast<std::size_t>(id)].value;
}

Result<HostArray> Tape::value(NodeId id) const {
  if (auto ok = check_id("value", id); !ok) return tl::unexpected(ok.error());
  return backend_->download(nodes_[static_cast<std::size_t>(id)].value);
}

Result<Gradients> Tape::backward(NodeId out, const Buffer& seed, VjpPath path) const {
  return run_backward(out, seed, path, false);
}
Result<Gradients> Tape::backward_dense(NodeId out, const Buffer& seed, VjpPath path) const {
  return run_backward(out, seed, path, true);
}
Result<Gradients> Tape::backward(NodeId out, const HostArray& seed, VjpPath path) const {
  auto buf = backend_->upload(seed, AllocTag::gradient);
  if (!buf) return tl::unexpected(buf.error());
  return run_backward(out, *buf, path, false);
}
Result<Gradients> Tape::backward_dense(NodeId out, const HostArray& seed, VjpPath path) const {
  auto buf = backend_->upload(seed, AllocTag::gradient);
  if (!buf) return tl::unexpected(buf.error());
  return run_backward(out, *buf, path, true);
}

Result<Gradients> Tape::run_backward(NodeId out, const Buffer& seed, VjpPath path, bool dense) const {
  const char* what = dense ? "backward_dense" : "backward";
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
  Backend& be = *backend_;
  Gradients grads(nodes_.size());
  auto& slots = grads.slots_;

  auto fresh_gradient = [&](const Buffer& like) { return be.allocate(like.shape(), like.dtype(), AllocTag::gradient); };

  // Folds one contribution into a parent's slot: kept as is when first (dense: +0 + g), else
  // existing + g computed in place on the existing slot.
  auto accumulate = [&](NodeId pid, Buffer contribution) -> Result<void> {
    const Node& parent = nodes_[static_cast<std::size_t>(pid)];
    if (!parent.requires_grad) return {};
    auto& slot = slots[static_cast<std::size_t>(pid)];
    const Buffer* in[2] = {nullptr, &contribution};
    if (slot) {
      in[0] = &*slot;
      return be.prim(Prim::add, 0.0, {in, 2}, *slot);
    }
    if (dense) {
      in[0] = &contribution;
      if (auto ok = be.prim(Prim::add_scalar, 0.0, {in, 1}, contribution); !ok) return ok;
    }
    slot = std::move(contribution);
    return {};
  };

  {
    auto seed_copy = fresh_gradient(seed);
    if (!seed_copy) return tl::unexpected(seed_copy.error());
    const Buffer* in[1] = {&seed};
    if (auto ok = be.prim(Prim::copy, 0.0, in, *seed_copy); !ok) return tl::unexpected(ok.error());
    slots[static_cast<std::size_t>(out)] = std::move(*seed_copy);
  }

  for (NodeId id = out; id >= 0; --id) {
    const Node& node = nodes_[static_cast<std::size_t>(id)];
    auto& slot = slots[static_cast<std::size_t>(id)];
    if (!slot || !node.op || !node.requires_grad) continue;
    const Buffer& g = *slot;
    const Op op = *node.op;
    const bool repeated = node.arity == 2 && node.parents[0] == node.parents[1];
    if (repeated && (op == Op::max || op == Op::min)) {
      // The coalesced-contribution rule: the same parent twice receives the upstream value once.
      auto once = fresh_gradient(g);
      if (!once) return tl::unexpected(once.error());
      const Buffer* in[1] = {&g};
      if (auto ok = be.prim(Prim::copy, 0.0, in, *once); !ok) return tl::unexpected(ok.error());
      if (auto ok = accumulate(node.parents[0], std::move(*once)); !ok) return tl::unexpected(ok.error());
      continue;
    }
    const Buffer* inputs[2] = {};
    Buffer contributions[2];
    Buffer* outs[2] = {&contributions[0], &contributions[1]};
    for (int k = 0; k < node.arity; ++k) {
      inputs[k] = &nodes_[static_cast<std::size_t>(node.parents[k])].value;
      auto c = fresh_gradient(g);
      if (!c) return tl::unexpected(c.error());
      contributions[k] = std::move(*c);
    }
    const std::span<const Buffer* const> in_span(inputs, static_cast<std::size_t>(node.arity));
    const std::span<Buffer* const> out_span(outs, static_cast<std::size_t>(node.arity));
    auto ok = path == VjpPath::fused ? be.vjp_fused(op, node.scalars, in_span, g, out_span)
                                     : staged_vjp(be, op, node.scalars, in_span, g, out_span);
    if (!ok) return tl::unexpected(ok.error());
    for (int k = 0; k < node.arity; ++k)
      if (auto acc = accumulate(node.parents[k], std::move(contributions[k])); !acc) return tl::unexpected(acc.error());
  }

  if (dense) {
    for (std::size_t id = 0; id < nodes_.size(); ++id) {
      if (slots[id] || !nodes_[id].requires_grad) continue;
      auto zeros = fresh_gradient(nodes_[id].value);
      if (!zeros) return tl::unexpected(zeros.error());
      if (auto ok = be.prim(Prim::fill, 0.0, {}, *zeros); !ok) return tl::unexpected(ok.error());
      slots[id] = std::move(*zeros);
    }
  }
  return grads;
}

}  // namespace tapewise
