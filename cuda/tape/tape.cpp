// cuda/tape/tape.cpp — recording: a node's checks (ids, shapes, dtypes), its forward run now or deferred
// to the next program (small nodes, flushed together), and the data node appended; the tape's values
// and its teardown. A node stays appended only once every step has succeeded (else it is taken off, its
// value released), so an error leaves the tape unchanged, but for the one thing tape.hpp states: pending
// forwards that a flush before the failure has run. Reverse mode is backward.cpp.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>
#include <new>
#include <string>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"
#include "core/log.hpp"
#include "kernels/program.hpp"
#include "tape/tape_internal.hpp"

namespace tapewise {

static_assert(TapeOptions{}.max_pending_nodes >= detail::kStepsPerLaunch,
              "a full pending list by default fills at least one CUDA launch of program steps");
constexpr std::int64_t kMostPendingNodes = 65536;  // TapeOptions::max_pending_nodes's upper bound
constexpr std::size_t kMostNodes = std::size_t{1} << 32;  // a position fills an id's low 32 bits
constexpr std::uint32_t kMostSerials = 0x7fffffff;         // serials 1 .. 2^31 - 1 keep every id positive

namespace {
using detail::id_str;
using detail::runs_as_program;

std::uint32_t next_serial() {
  static std::atomic<std::uint32_t> made{0};
  return made.fetch_add(1, std::memory_order_relaxed) % kMostSerials + 1;
}

// The flush's program, reused by every tape of the thread: a long recording builds its programs in
// memory that is already there (no large temporary allocated and freed, and touched afresh, per call).
thread_local detail::Program flush_program;

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

}  // namespace

Buffer* Gradients::find(NodeId id) const {
  auto it = std::lower_bound(received_.begin(), received_.end(), id,
                             [](const std::pair<NodeId, Buffer>& slot, NodeId key) { return slot.first < key; });
  if (it == received_.end() || it->first != id || !it->second) return nullptr;
  return const_cast<Buffer*>(&it->second);
}

const Buffer* Gradients::get(NodeId id) const { return find(id); }

Result<void> Gradients::check_id(NodeId id) const {
  if (detail::names_node(id, static_cast<NodeId>(serial_) << 32, size_)) return {};
  return tl::unexpected(detail::id_error("gradients", "node id", id, serial_, size_));
}

void Gradients::put(NodeId id, Buffer b) { received_.emplace_back(id, std::move(b)); }

Result<HostArray> Gradients::host(NodeId id) const {
  TAPEWISE_CHECK(check_id(id));
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

Tape::Tape(std::shared_ptr<Backend> backend)
    : backend_(std::move(backend)), serial_(next_serial()), base_(static_cast<NodeId>(serial_) << 32) {
  if (backend_ && backend_->kind() == BackendKind::cpu) options_.program_threshold = kCpuProgramThreshold;
  if (!spare_nodes_gone) nodes_.swap(spare_nodes.nodes);
  // Recording never reallocates the pending list, so it never fails halfway.
  pending_.reserve(static_cast<std::size_t>(options_.max_pending_nodes));
}

Tape::~Tape() {
  if (!backend_) return;  // moved from
  release_values();
  nodes_.clear();
  if (!spare_nodes_gone && nodes_.capacity() > spare_nodes.nodes.capacity()) nodes_.swap(spare_nodes.nodes);
}

// The values first, while backend_ still holds the backend their owner pointers do not count.
Tape& Tape::operator=(Tape&& other) noexcept {
  if (this != &other) {
    if (backend_) release_values();
    backend_ = std::move(other.backend_);
    serial_ = other.serial_;
    base_ = other.base_;
    options_ = other.options_;
    nodes_ = std::move(other.nodes_);
    pending_ = std::move(other.pending_);
    other.nodes_.clear();
    other.pending_.clear();
  }
  return *this;
}

void Tape::release_values() {
  release_together(detail::engine_of(*backend_), nodes_, [](Node& n) -> Buffer& { return n.value; });
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

// The pending forwards as one program, a step per node in pending_'s order, each storing its value.
detail::Program& Tape::pending_program() const {
  detail::Program& program = flush_program;
  program.steps.clear();
  for (NodeId at : pending_) {
    detail::fill_forward_step(program.append(), nodes_[static_cast<std::size_t>(at)], nodes_);
    program.seal_last();
  }
  return program;
}

Result<void> Tape::flush() const {
  if (pending_.empty()) return {};
  const detail::Program& program = pending_program();
  TAPEWISE_LOG(debug, "tape " + std::to_string(serial_) + ": flush: " + std::to_string(pending_.size()) +
                          " pending nodes run as one program");
  // On failure the nodes stay pending (tape.hpp says why) and the next read tries again.
  if (auto ok = detail::engine_of(*backend_).run_program(program); !ok) return ok;
  pending_.clear();
  return {};
}

namespace {
// Which pending nodes a program backward's flush stores, by position from the first pending one.
thread_local std::vector<std::uint8_t> flush_stores;
}  // namespace

// The pending forwards a program backward needs, run as one program that stores only the values that
// some step reads from memory: the backward's (`read`, positions: its VJPs' inputs), the output's (the
// value a caller reads next), and those a later pending forward reads from memory rather than from a
// register (sources_of: within kHistory steps of one piece). The others run in registers only and stay
// pending, in order, so a later read computes them again from their stored inputs by the same code (a
// forward depends only on its inputs). A chain whose VJPs read few of its values then writes few.
Result<void> Tape::flush_for_backward(std::span<const NodeId> read, NodeId out) const {
  if (pending_.empty()) return {};
  detail::Program& program = pending_program();
  const auto first = static_cast<std::size_t>(pending_.front());
  std::vector<std::uint8_t>& stores = flush_stores;
  stores.assign(nodes_.size() - first, 0);
  auto mark = [&](NodeId position) {
    if (static_cast<std::size_t>(position) >= first) stores[static_cast<std::size_t>(position) - first] = 1;
  };
  for (NodeId position : read) mark(position);
  mark(out);
  for (std::size_t j = 0; j < program.steps.size(); ++j) {
    const Node& n = nodes_[static_cast<std::size_t>(pending_[j])];
    for (int k = 0; k < n.arity; ++k)
      if (detail::source_code(program.steps[j].sources, detail::kIn0 + k) == detail::kFromMemory)
        mark(static_cast<NodeId>(node_position(n.parents[k])));
  }
  std::size_t left = 0;
  for (std::size_t j = 0; j < program.steps.size(); ++j)
    if (!stores[static_cast<std::size_t>(pending_[j]) - first]) {
      program.steps[j].out[0] = nullptr;
      ++left;
    }
  TAPEWISE_LOG(debug, "tape " + std::to_string(serial_) + ": flush for a backward: " + std::to_string(pending_.size()) +
                          " pending nodes run as one program, " + std::to_string(left) + " of them left pending");
  if (auto ok = detail::engine_of(*backend_).run_program(program); !ok) return ok;
  std::erase_if(pending_, [&](NodeId position) { return stores[static_cast<std::size_t>(position) - first] != 0; });
  return {};
}

Result<void> Tape::check_id(const char* what, NodeId id, const char* role) const {
  if (detail::names_node(id, base_, nodes_.size())) return {};
  return tl::unexpected(detail::id_error(what, role, id, serial_, nodes_.size()));
}

// A position must fit an id's low 32 bits: a tape of 2^32 nodes (hundreds of GB of host memory for
// the records alone) takes no more.
Result<void> Tape::check_room(const char* what) const {
  if (nodes_.size() < kMostNodes) return {};
  return fail(ErrorCode::InvalidArgument, std::string(what) + ": tape " + std::to_string(serial_) + " is full (" +
                                              std::to_string(kMostNodes) + " nodes)");
}

Result<const Node*> Tape::node(NodeId id) const {
  TAPEWISE_CHECK(check_id("node", id, "node id"));
  return &nodes_[node_position(id)];
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
  if (nodes_.size() >= kMostNodes) [[unlikely]]
    TAPEWISE_CHECK(check_room("leaf"));
  Node& n = nodes_.emplace_back();
  n.requires_grad = requires_grad;
  n.value = std::move(value);
  return id_at(nodes_.size() - 1);
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
  if (nodes_.size() >= kMostNodes) [[unlikely]]  // the Result only where it fails: recording stays a compare
    TAPEWISE_CHECK(check_room(info.name));
  // Room for the node first: it is then appended without moving the nodes the inputs point into.
  if (nodes_.size() == nodes_.capacity()) nodes_.reserve(std::max<std::size_t>(64, 2 * nodes_.capacity()));
  const Buffer* inputs[2] = {};
  bool requires_grad = false;
  for (std::size_t i = 0; i < parents.size(); ++i) {
    TAPEWISE_CHECK(check_id(info.name, parents[i], "node id"));
    const Node& p = nodes_[node_position(parents[i])];
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
  // The node is appended first, its value made inside it (no buffer moved in), and taken off again
  // if anything fails: the caller sees no change. Allocation comes first, so a failure leaves even
  // the pending list as it was.
  const bool deferred = runs_as_program(inputs[0]->numel(), options_.program_threshold);
  const std::size_t at = nodes_.size();
  Node& n = nodes_.emplace_back();  // within the capacity reserved above: inputs stay valid
  if (auto made = detail::engine_of(*backend_).allocate_value_into(*inputs[0], n.value); !made) {
    nodes_.pop_back();
    return tl::unexpected(std::move(made).error());
  }
  Result<void> ran;
  if (deferred) {
    if (pending_.size() >= static_cast<std::size_t>(options_.max_pending_nodes)) ran = flush();
  } else {
    // A larger node runs now, on its own kernel, after whatever is pending (its inputs may be
    // pending nodes when the threshold was lowered since they were recorded).
    TAPEWISE_LOG(debug, "tape " + std::to_string(serial_) + ": " + info.name + " " + id_str(id_at(at)) +
                            " runs node by node, now: " + std::to_string(inputs[0]->numel()) +
                            " elements, above program_threshold " + std::to_string(options_.program_threshold));
    ran = flush();
    if (ran) ran = backend_->forward(op, scalars, {inputs, parents.size()}, n.value);
  }
  if (!ran) {
    nodes_.pop_back();  // releases the value made for it
    return tl::unexpected(std::move(ran).error());
  }
  n.op = op;
  n.scalars = scalars;
  n.arity = info.arity;
  for (std::size_t i = 0; i < parents.size(); ++i) n.parents[i] = parents[i];
  n.requires_grad = requires_grad;
  if (deferred) pending_.push_back(static_cast<NodeId>(at));  // within the reserved capacity: cannot fail
  return id_at(at);
}

Result<const Buffer*> Tape::value_buffer(NodeId id) const {
  TAPEWISE_CHECK(check_id("value", id, "node id"));
  TAPEWISE_CHECK(flush());
  return &nodes_[node_position(id)].value;
}

Result<HostArray> Tape::value(NodeId id) const {
  TAPEWISE_CHECK(check_id("value", id, "node id"));
  TAPEWISE_CHECK(flush());
  return backend_->download(nodes_[node_position(id)].value);
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

}  // namespace tapewise
