// tapewise/tape.hpp — the reverse-mode tape. A node is data ({op, scalars, parents, value}); the
// backward pass interprets it. Ids are array positions, so parents always have smaller ids.
// Every method either succeeds or returns an Error and leaves the tape exactly as it was.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend.hpp"

namespace tapewise {

using NodeId = std::int64_t;

// Which VJP form backward runs: one fused kernel per node (production) or the spec's stages, each a
// primitive buffer op with its intermediates in workspace buffers. Both give the same bits.
enum class VjpPath { fused, staged };

struct Node {
  std::optional<Op> op;  // nullopt for a leaf
  Scalars scalars;       // as given (doubles); rounded to the dtype when used
  std::array<NodeId, 2> parents{-1, -1};
  int arity = 0;
  bool requires_grad = true;
  Buffer value;
};

// Gradients returned by backward: one slot per tape node; owned by the caller.
class Gradients {
 public:
  explicit Gradients(std::size_t n = 0) : slots_(n) {}
  std::size_t size() const { return slots_.size(); }
  bool has(NodeId id) const;
  const Buffer* get(NodeId id) const;  // nullptr when the node received no gradient
  Result<HostArray> host(NodeId id) const;
  Buffer take(NodeId id);  // moves the buffer out (empty when none)

 private:
  friend class Tape;
  std::vector<std::optional<Buffer>> slots_;
};

class Tape {
 public:
  explicit Tape(std::shared_ptr<Backend> backend);

  Backend& backend() const { return *backend_; }
  std::size_t size() const { return nodes_.size(); }
  const Node& node(NodeId id) const { return nodes_.at(static_cast<std::size_t>(id)); }

  Result<NodeId> leaf(Buffer value, bool requires_grad = true);
  Result<NodeId> leaf(const HostArray& value, bool requires_grad = true);

  // Generic recording: checks ids, shapes and dtypes, runs the forward, appends the node.
  Result<NodeId> apply(Op op, std::span<const NodeId> parents, Scalars scalars = {});

  Result<NodeId> add(NodeId a, NodeId b) { return binary(Op::add, a, b); }
  Result<NodeId> sub(NodeId a, NodeId b) { return binary(Op::sub, a, b); }
  Result<NodeId> mul(NodeId a, NodeId b) { return binary(Op::mul, a, b); }
  Result<NodeId> max(NodeId a, NodeId b) { return binary(Op::max, a, b); }
  Result<NodeId> min(NodeId a, NodeId b) { return binary(Op::min, a, b); }
  Result<NodeId> div(NodeId a, NodeId b) { return binary(Op::div, a, b); }
  Result<NodeId> neg(NodeId x) { return unary(Op::neg, x); }
  Result<NodeId> scale(NodeId x, double c) { return unary(Op::scale, x, {c, 0.0}); }
  Result<NodeId> abs(NodeId x) { return unary(Op::abs, x); }
  Result<NodeId> sqrt(NodeId x) { return unary(Op::sqrt, x); }
  Result<NodeId> clamp(NodeId x, double lo, double hi) { return unary(Op::clamp, x, {lo, hi}); }
  Result<NodeId> relu(NodeId x) { return unary(Op::relu, x); }
  Result<NodeId> exp(NodeId x) { return unary(Op::exp, x); }
  Result<NodeId> sin(NodeId x) { return unary(Op::sin, x); }
  Result<NodeId> cos(NodeId x) { return unary(Op::cos, x); }
  Result<NodeId> log(NodeId x) { return unary(Op::log, x); }
  Result<NodeId> inv(NodeId x) { return unary(Op::inv, x); }
  Result<NodeId> safeLog(NodeId x, double eps) { return unary(Op::safeLog, x, {eps, 0.0}); }
  Result<NodeId> sigmoid(NodeId x) { return unary(Op::sigmoid, x); }
  Result<NodeId> tanh(NodeId x) { return unary(Op::tanh, x); }
  Result<NodeId> silu(NodeId x) { return unary(Op::silu, x); }
  Result<NodeId> gelu(NodeId x) { return unary(Op::gelu, x); }
  Result<NodeId> softplus(NodeId x) { return unary(Op::softplus, x); }

  Result<HostArray> value(NodeId id) const;
  Result<const Buffer*> value_buffer(NodeId id) const;

  // Sparse (training) convention: the first contribution to a slot is kept bit-exact, later ones
  // accumulate as existing + g. Only nodes reachable from `out` that require grad run their VJP.
  Result<Gradients> backward(NodeId out, const Buffer& seed, VjpPath path = VjpPath::fused) const;
  Result<Gradients> backward(NodeId out, const HostArray& seed,
                             VjpPath path = VjpPath::fused) const;
  // Dense convention: every slot of a node that requires grad starts at +0 (so a first
  // contribution of -0 becomes +0); every such node gets a gradient buffer.
  Result<Gradients> backward_dense(NodeId out, const Buffer& seed,
                                   VjpPath path = VjpPath::fused) const;
  Result<Gradients> backward_dense(NodeId out, const HostArray& seed,
                                   VjpPath path = VjpPath::fused) const;

 private:
  Result<NodeId> unary(Op op, NodeId x, Scalars s = {}) { return apply(op, {&x, 1}, s); }
  Result<NodeId> binary(Op op, NodeId a, NodeId b) {
    const NodeId ids[2] = {a, b};
    return apply(op, ids, {});
  }
  Result<void> check_id(const char* what, NodeId id) const;
  Result<Gradients> run_backward(NodeId out, const Buffer& seed, VjpPath path, bool dense) const;

  std::shared_ptr<Backend> backend_;
  std::vector<Node> nodes_;
};

// The VJP of one node as the spec stages it (workspace buffers, released before return).
Result<void> staged_vjp(Backend& be, Op op, const Scalars& s,
                        std::span<const Buffer* const> inputs, const Buffer& g,
                        std::span<Buffer* const> grads);

}  // namespace tapewise
