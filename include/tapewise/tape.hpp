/// tapewise/tape.hpp — the reverse-mode tape. A node is data ({op, scalars, parents, value}); the
/// backward pass interprets it. A node's id carries its tape's serial and its position on the tape
/// (parents always have smaller positions): every tape refuses the ids of another (see NodeId).
/// Every method either succeeds or returns an Error, and a failed call leaves the tape as it was
/// but for one thing: a call that flushes (below) before it fails has still run the pending
/// forwards. Its ids, nodes, values as read, requires_grad and memory statistics are as before.
///
/// Small nodes run as programs. A node of at most options().program_threshold elements gets its
/// value buffer at record (so OutOfMemory still surfaces there), but its forward is deferred: it
/// joins the pending list, and one program computes all pending nodes at the next flush — before
/// anything reads a value (value, value_buffer, backward*), before recording a larger node, when
/// options().max_pending_nodes are pending, or when flush() is called. A fused backward whose output is that
/// small (every node it visits has the output's shape) runs as one program too, the gradient slots it
/// returns carved from one allocation (and, when only some are asked for, the others from one more, released
/// as it returns). Such a backward flushes only what it needs: the pending forwards run as one program
/// that stores the values its VJPs read and the output's; the rest (inputs of add, sub, neg and scale
/// alone, say) are computed in registers on the way and stay pending, so a read computes them again,
/// by the same per-element code. A long chain's forward then writes only what its backward reads.
/// Programs call the per-node path's per-element code in the same order, so values and gradients are
/// identical either way up to NaN: equal bits, or both NaN (a NaN's sign and payload may differ between
/// programs and per-node kernels, as between builds).
///
/// A failed flush (a kernel launch error: in practice a device that is gone) returns its error from
/// the call that flushed, and that call changes nothing: the nodes stay on the tape and pending,
/// and the next read tries again (a forward depends only on its inputs, so running it twice is
/// harmless). They are not removed, because their ids have already been handed out: removing them
/// would let later nodes reuse those ids. `node(id)` does not flush: its `value` may be pending.
/// The one state change a failing call can leave behind is that flush: a backward, a read or the
/// recording of a larger node that fails after flushing (say, OutOfMemory in a staged VJP's
/// workspace) has run the pending forwards, so pending() is then 0. Ids, values, requires_grad and
/// memory statistics are exactly as before the call.
/// Threads: a tape is used by one thread at a time (const methods may flush, so even reads change
/// it); tapes of different threads may share one backend (backend.hpp).
/// \file
#pragma once

#include "requires_cpp20.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "backend.hpp"

namespace tapewise {

/// A node's id: the serial of the tape that recorded it (Tape::serial()) in the high 32 bits, the
/// node's position on that tape in the low 32. An id is valid only on its own tape: every other
/// tape refuses it with InvalidNodeId naming both tapes, and a number no tape handed out (a bare
/// position such as 0) is refused by every tape. Ids of one tape ascend with position.
using NodeId = std::int64_t;
/// The position of node `id` on its tape: 0 for the first node recorded.
constexpr std::size_t node_position(NodeId id) { return static_cast<std::uint32_t>(id); }
/// The serial of the tape that recorded node `id` (0 for a number no tape handed out).
constexpr std::uint32_t node_tape(NodeId id) { return static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) >> 32); }
namespace detail {
struct BackwardPlan;  ///< the backward walk (cuda/tape/backward_plan.hpp): internal to the library
struct Program;       ///< a tape program (cuda/kernels/program.hpp): internal to the library
}  // namespace detail

/// The program threshold a tape on the CPU backend starts with: 16 elements. There a node's own loop
/// (vectorized, its exact math in two passes) beats the program interpreter from about 2^5 elements
/// up, by 2x at 2^12, while programs win on the smallest tensors (docs/performance.md).
inline constexpr std::int64_t kCpuProgramThreshold = 16;

/// How a tape runs small nodes (see the file's description); Tape::set_options checks them.
struct TapeOptions {
  /// Nodes of at most this many elements run as programs (their forwards deferred and flushed
  /// together, their fused backward one program); 0 runs every node with its own kernels. At least 0.
  /// The default, 2^26, is CUDA's: at every size measured (2^12 to 2^26, H200) a chain runs faster as
  /// programs than node by node — past L2 because a program keeps what a node hands the next in
  /// registers, where per-node kernels each read and write memory (1.3-2.3x faster at 2^26). Beyond
  /// 2^26 it is unmeasured. A tape on the CPU backend starts at kCpuProgramThreshold instead
  /// (docs/performance.md).
  std::int64_t program_threshold = std::int64_t{1} << 26;
  /// At most this many nodes wait for their forward; recording one more flushes first. From 1 to
  /// 65,536. The default, 4,096 (ten CUDA launches of program steps), lets a tape of that many nodes
  /// wait whole for its backward, which then stores only the values it reads: the 1,000-node fan-out
  /// chain ran 1.1-1.8x faster on the device at 2^12-2^20 than with 448, one launch, which flushed
  /// every value of its first 896 nodes while recording (H100, docs/performance.md).
  std::int64_t max_pending_nodes = 4096;
  /// Equal when both fields are.
  friend bool operator==(const TapeOptions&, const TapeOptions&) = default;
};

/// Which VJP form backward runs: one fused kernel per node (production) or the spec's stages, each a
/// primitive buffer op with its intermediates in workspace buffers. Both give identical results up to
/// NaN: equal bits, or both NaN.
enum class VjpPath { fused, staged };

/// A recorded node: its op, scalars, parents and value.
struct Node {
  /// A leaf with no value. Written out so that recording a node sets its fields one by one: the
  /// implicit constructor's value-initialization first zeroed all 200 bytes (`rep stos`), 15% of recording.
  Node() noexcept {}
  std::optional<Op> op;  ///< nullopt for a leaf
  Scalars scalars;       ///< as given (doubles); rounded to the dtype when used
  /// Input ids; -1 where unused.
  std::array<NodeId, 2> parents{-1, -1};
  /// Inputs: 0 for a leaf, 1 or 2.
  int arity = 0;
  /// Whether backward computes a gradient for it.
  bool requires_grad = true;
  /// The value (its contents may still be pending: see Tape).
  Buffer value;
};

/// Gradients returned by backward: one slot per tape node; owned by the caller.
class TAPEWISE_API Gradients {
 public:
  /// n empty slots, of no tape.
  explicit Gradients(std::size_t n = 0) : size_(n) {}
  /// The number of slots (the tape's size at backward).
  std::size_t size() const { return size_; }
  /// The serial of the tape whose backward made them (Tape::serial()).
  std::uint32_t tape_serial() const { return serial_; }
  /// Success when `id` names a node of that tape recorded before the backward, else InvalidNodeId
  /// naming both tapes (or the slot count).
  [[nodiscard]] Result<void> check_id(NodeId id) const;
  /// Whether node id received a gradient (false for an id of another tape).
  bool has(NodeId id) const { return get(id) != nullptr; }
  const Buffer* get(NodeId id) const;  ///< nullptr when the node received no gradient
  /// A copy of node id's gradient on the host (InvalidNodeId when none, or when id is of another tape).
  [[nodiscard]] Result<HostArray> host(NodeId id) const;
  Buffer take(NodeId id);  ///< moves the buffer out (empty when none)

 private:
  friend class Tape;
  void put(NodeId id, Buffer b);  ///< the gradient of id, above every id put before
  Buffer* find(NodeId id) const;
  std::size_t size_;
  std::uint32_t serial_ = 0;
  /// The slots that received a gradient, by ascending id: a backward returning the leaves' gradients
  /// of a long tape holds a few, not one per node.
  std::vector<std::pair<NodeId, Buffer>> received_;
};

/// The reverse-mode tape (see the file's description).
class TAPEWISE_API Tape {
 public:
  /// An empty tape recording on `backend`, with the default TapeOptions.
  explicit Tape(std::shared_ptr<Backend> backend);
  /// Releases the nodes' values.
  ~Tape();
  /// The moved-from tape is left empty and without a backend: leaf and backward with a host seed
  /// are InvalidArgument, every call naming a node is InvalidNodeId; destroy it or assign to it.
  Tape(Tape&&) = default;
  /// As the move constructor, after releasing this tape's own values.
  Tape& operator=(Tape&& other) noexcept;

  /// How the tape runs small nodes.
  const TapeOptions& options() const { return options_; }
  /// Sets options() for what is recorded and run from now on. A field out of its range is
  /// InvalidArgument naming it, and the options stay as they were. Pending nodes stay pending (a
  /// lower max_pending_nodes flushes at the next record).
  [[nodiscard]] Result<void> set_options(const TapeOptions& options);

  /// The backend the tape records on (none for a moved-from tape: not to be called on one).
  Backend& backend() const { return *backend_; }
  /// The number of nodes.
  std::size_t size() const { return nodes_.size(); }
  /// The tape's serial, carried by every id it hands out and named in errors: from 1 to 2^31 - 1, no
  /// two of the last 2^31 - 1 tapes made in the process share one. A tape moved to takes its
  /// source's serial (and so accepts its ids).
  std::uint32_t serial() const { return serial_; }
  /// The id of the node at `position` (ids ascend with position); an id this tape refuses when
  /// position >= size(). For code that walks the nodes in order.
  NodeId id_at(std::size_t position) const { return base_ + static_cast<NodeId>(position); }
  /// The node's record (InvalidNodeId for an id not on the tape); its value's contents may still be
  /// pending (see above): read values through value() or value_buffer(), which flush. Its parents
  /// are ids of this tape.
  [[nodiscard]] Result<const Node*> node(NodeId id) const;

  /// Nodes whose forward is deferred; flush() runs them now (as one program).
  std::size_t pending() const { return pending_.size(); }
  /// Runs the pending forwards now.
  [[nodiscard]] Result<void> flush() const;

  /// A leaf whose value is `value` (a buffer of this tape's backend, moved in).
  [[nodiscard]] Result<NodeId> leaf(Buffer value, bool requires_grad = true);
  /// A leaf whose value is uploaded from the host.
  [[nodiscard]] Result<NodeId> leaf(const HostArray& value, bool requires_grad = true);

  /// Generic recording: checks ids, shapes and dtypes, runs the forward, appends the node.
  [[nodiscard]] Result<NodeId> apply(Op op, std::span<const NodeId> parents, Scalars scalars = {});

  /// One call per op: apply(Op::name, ...) with the op's inputs and scalars (spec/ops.def).
  ///@{
  [[nodiscard]] Result<NodeId> add(NodeId a, NodeId b) { return binary(Op::add, a, b); }
  [[nodiscard]] Result<NodeId> sub(NodeId a, NodeId b) { return binary(Op::sub, a, b); }
  [[nodiscard]] Result<NodeId> mul(NodeId a, NodeId b) { return binary(Op::mul, a, b); }
  [[nodiscard]] Result<NodeId> max(NodeId a, NodeId b) { return binary(Op::max, a, b); }
  [[nodiscard]] Result<NodeId> min(NodeId a, NodeId b) { return binary(Op::min, a, b); }
  [[nodiscard]] Result<NodeId> div(NodeId a, NodeId b) { return binary(Op::div, a, b); }
  [[nodiscard]] Result<NodeId> neg(NodeId x) { return unary(Op::neg, x); }
  [[nodiscard]] Result<NodeId> scale(NodeId x, double c) { return unary(Op::scale, x, {c, 0.0}); }
  [[nodiscard]] Result<NodeId> abs(NodeId x) { return unary(Op::abs, x); }
  [[nodiscard]] Result<NodeId> sqrt(NodeId x) { return unary(Op::sqrt, x); }
  [[nodiscard]] Result<NodeId> clamp(NodeId x, double lo, double hi) { return unary(Op::clamp, x, {lo, hi}); }
  [[nodiscard]] Result<NodeId> relu(NodeId x) { return unary(Op::relu, x); }
  [[nodiscard]] Result<NodeId> exp(NodeId x) { return unary(Op::exp, x); }
  [[nodiscard]] Result<NodeId> sin(NodeId x) { return unary(Op::sin, x); }
  [[nodiscard]] Result<NodeId> cos(NodeId x) { return unary(Op::cos, x); }
  [[nodiscard]] Result<NodeId> log(NodeId x) { return unary(Op::log, x); }
  [[nodiscard]] Result<NodeId> inv(NodeId x) { return unary(Op::inv, x); }
  [[nodiscard]] Result<NodeId> safeLog(NodeId x, double eps) { return unary(Op::safeLog, x, {eps, 0.0}); }
  [[nodiscard]] Result<NodeId> sigmoid(NodeId x) { return unary(Op::sigmoid, x); }
  [[nodiscard]] Result<NodeId> tanh(NodeId x) { return unary(Op::tanh, x); }
  [[nodiscard]] Result<NodeId> silu(NodeId x) { return unary(Op::silu, x); }
  [[nodiscard]] Result<NodeId> gelu(NodeId x) { return unary(Op::gelu, x); }
  [[nodiscard]] Result<NodeId> softplus(NodeId x) { return unary(Op::softplus, x); }
  ///@}

  /// A copy of the node's value on the host (flushes).
  [[nodiscard]] Result<HostArray> value(NodeId id) const;
  /// The node's value buffer, computed (flushes).
  [[nodiscard]] Result<const Buffer*> value_buffer(NodeId id) const;

  /// Sparse (training) convention: the first contribution to a slot is kept bit-exact, later ones
  /// accumulate as existing + g. Only nodes reachable from `out` that require grad run their VJP.
  [[nodiscard]] Result<Gradients> backward(NodeId out, const Buffer& seed, VjpPath path = VjpPath::fused) const;
  /// backward with the seed given on the host.
  [[nodiscard]] Result<Gradients> backward(NodeId out, const HostArray& seed,
                             VjpPath path = VjpPath::fused) const;
  /// Dense convention: every slot of a node that requires grad starts at +0 (so a first
  /// contribution of -0 becomes +0); every such node gets a gradient buffer.
  [[nodiscard]] Result<Gradients> backward_dense(NodeId out, const Buffer& seed,
                                   VjpPath path = VjpPath::fused) const;
  /// backward_dense with the seed given on the host.
  [[nodiscard]] Result<Gradients> backward_dense(NodeId out, const HostArray& seed,
                                   VjpPath path = VjpPath::fused) const;

  /// backward, returning only the gradients of `wanted` (ids of this tape; another tape's or a bare number is
  /// InvalidNodeId, and nothing runs): a node's VJP runs only when it leads to a wanted node, and the
  /// gradients of the nodes in between are not returned — a tape program keeps them in registers,
  /// never writing them to memory. Each gradient returned is backward()'s, identical up to NaN.
  [[nodiscard]] Result<Gradients> backward(NodeId out, const Buffer& seed, std::span<const NodeId> wanted,
                                           VjpPath path = VjpPath::fused) const;
  /// backward with `wanted`, the seed given on the host.
  [[nodiscard]] Result<Gradients> backward(NodeId out, const HostArray& seed, std::span<const NodeId> wanted,
                                           VjpPath path = VjpPath::fused) const;
  /// backward_dense returning only the gradients of `wanted` (as backward with `wanted`): each wanted
  /// node that requires grad gets a gradient, +0 where nothing reaches it.
  [[nodiscard]] Result<Gradients> backward_dense(NodeId out, const Buffer& seed, std::span<const NodeId> wanted,
                                                 VjpPath path = VjpPath::fused) const;
  /// backward_dense with `wanted`, the seed given on the host.
  [[nodiscard]] Result<Gradients> backward_dense(NodeId out, const HostArray& seed, std::span<const NodeId> wanted,
                                                 VjpPath path = VjpPath::fused) const;

 private:
  [[nodiscard]] Result<NodeId> unary(Op op, NodeId x, Scalars s = {}) { return apply(op, {&x, 1}, s); }
  [[nodiscard]] Result<NodeId> binary(Op op, NodeId a, NodeId b) {
    const NodeId ids[2] = {a, b};
    return apply(op, ids, {});
  }
  void release_values();  ///< every node's value back to the backend (the nodes stay, their values empty)
  [[nodiscard]] Result<void> check_id(const char* what, NodeId id, const char* role = "node id") const;
  [[nodiscard]] Result<void> check_room(const char* what) const;
  [[nodiscard]] Result<void> check_has_backend(const char* what) const;
  [[nodiscard]] Result<void> check_backward_args(const char* what, NodeId out, const Buffer& seed) const;
  // seed_to_take: the seed itself where backward uploaded it from the host, so that node by node it
  // becomes the output's gradient instead of being copied into one (null: the caller's buffer).
  [[nodiscard]] Result<Gradients> run_backward(NodeId out, const Buffer& seed, VjpPath path, bool dense,
                                               const std::span<const NodeId>* wanted,
                                               Buffer* seed_to_take = nullptr) const;
  [[nodiscard]] Result<Gradients> run_backward(NodeId out, const HostArray& seed, VjpPath path, bool dense,
                                               const std::span<const NodeId>* wanted) const;
  [[nodiscard]] Result<Gradients> run_plan_per_node(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                      VjpPath path, Buffer* seed_to_take) const;
  detail::Program& pending_program() const;
  [[nodiscard]] Result<void> flush_for_backward(std::span<const NodeId> read, NodeId out) const;
  [[nodiscard]] Result<Gradients> run_plan_as_program(const detail::BackwardPlan& plan, NodeId out, const Buffer& seed,
                                        bool dense) const;

  /// The backend, held for as long as any node's value: a value made by recording does not count
  /// itself an owner of the backend (releasing the values comes first in every way a tape ends).
  std::shared_ptr<Backend> backend_;
  std::uint32_t serial_;
  NodeId base_;  ///< serial_ << 32: the id of position 0
  TapeOptions options_;
  std::vector<Node> nodes_;
  /// Positions of the nodes whose forward has not run yet, ascending. Flushing computes their values, a
  /// cache of what was recorded, so const readers may flush.
  mutable std::vector<NodeId> pending_;
};

}  // namespace tapewise
