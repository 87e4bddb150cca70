// cuda/tape/backward_program.hpp — a backward as one tape program, built in one place: the gradient
// slots (the returned ones as buffers, the ones in between that reach memory in one allocation), the steps
// in the plan's order, and the register pass that keeps gradients nobody returns out of memory, with
// the piece boundaries it must respect. The tape's program executor (backward.cpp) and the tests use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"
#include "kernels/program.hpp"
#include "tape/backward_plan.hpp"

namespace tapewise::detail {

// From how many elements a backward program over `dtype` values on a `kind` backend computes values
// again instead of reading them stored (BackwardProgram::build says which values). A stored value
// costs a write in the forward's flush and a read in the backward, where computing a unary node's
// value again from its input costs its instructions. Measured on an H100 (2026-12-07, the unary chain
// sin, tanh, sigmoid, scale 0.9, relu; device time per node): float32 1.45-1.50x faster at 2^22-2^26
// (100 nodes) and 1.37x at 2^20 (1,000 nodes), but 1.37x slower at 2^12, whose values stay in L2;
// bfloat16, half the bytes for the same math, 1.27-1.31x slower at 2^22-2^26. So on CUDA float32 from
// 2^20 elements; the other dtypes and the sizes between are unmeasured and keep their values. The
// CPU's interpreter is bound by instructions, not memory (the 100-node unary chain at 2^12 took 1.37x
// as long computing again): never there.
inline constexpr std::int64_t kRecomputeFromOnCuda = std::int64_t{1} << 20;
std::int64_t recompute_from(BackendKind kind, DType dtype);
// Sets it for every backend, process-wide (tapewise-bench --recompute-from, and the tests, to measure
// and test both ways); -1 restores each backend's own.
void set_recompute_from(std::int64_t elements);

// The internal slot whose stand-in address (a byte of `stand_ins` each) p is, else -1.
std::int64_t stand_in_index(std::span<const std::byte> stand_ins, const void* p);

// The register pass: the stores to gradient slots in between (`internal`, the builder's stand-in
// addresses, a byte per slot; nobody reads those slots after the program) that no step reads from
// memory become nullptr. A store at step j is read from memory by a later step reading the slot before
// the slot's next write, unless that step takes it from step j's register (sources_of: within
// kHistory steps of one piece, of j's numel). The interpreter then stores nothing and hands the value
// on in the register, so a chain's gradients, and a fan-out's a few steps apart, never reach memory.
// Run once the program is complete (sources final); O(steps). Keeps its work space between calls.
class RegisterPass {
 public:
  void run(Program& program, std::span<const std::byte> internal);

 private:
  std::vector<std::int64_t> last_store_;  // per internal slot: 2 j + k of the last step j storing it (out[k]), else -1
  std::vector<std::uint8_t> from_memory_;  // per step: bit k where out[k] is read from memory (by a later step, or by its own accumulation)
};

// The builder of one backward program. Reused by every backward of a thread (backward.cpp keeps one
// per thread), so a long tape's backward builds its steps and slot lists in memory already there; it
// holds no buffer between calls (release()).
class BackwardProgram {
 public:
  // The returned gradient slots of `plan`'s walk from `out`, a buffer each, and stand-in addresses for the
  // others. Called before anything runs, so that a failing allocation changes nothing.
  [[nodiscard]] Result<void> allocate_slots(Engine& engine, const BackwardPlan& plan, std::span<const Node> nodes,
                                            NodeId out, bool dense);
  // The program over the slots: the seed copy, a step per visit, then dense zeros of at most
  // `threshold` elements (a larger one is a fill kernel: fill_large_zeros); when only some gradients
  // are wanted, the register pass. Not runnable before allocate_internal_slots.
  // `pending` (a byte per position, 1 where the node's forward is pending; empty: none) lets a VJP's
  // step be preceded by forward steps that compute its input again in registers (append_recomputes),
  // so that the flush need not store that value.
  const Program& build(const BackwardPlan& plan, std::span<const Node> nodes, NodeId out, const Buffer& seed,
                       std::int64_t threshold, std::span<const std::uint8_t> pending = {});
  // The positions of the nodes whose values the built program reads from memory (the inputs of VJPs
  // that depend on them and of the forwards it computes again, where no register holds them; repeats
  // possible): the pending forwards it needs stored (Tape::flush_for_backward).
  std::span<const NodeId> values_read() const { return values_read_; }
  // Memory for the slots in between that a step of the built program stores to, in one allocation, and
  // their addresses in the steps; the others (the register pass kept them out of memory: a chain's
  // gradients) get none, so a long chain's backward holds about one slot's memory, as node by node.
  [[nodiscard]] Result<void> allocate_internal_slots(Engine& engine, const char* what);
  // The dense zero slots too large for the program, by fill kernels queued after it.
  [[nodiscard]] Result<void> fill_large_zeros(Engine& engine);
  // Hands each returned slot to put(id, Buffer), ascending ids.
  template <class Put>
  void hand_out(Put put) {
    for (std::size_t id = 0; id < slot_of_.size(); ++id)
      if (slot_of_[id] != kNoSlot) put(static_cast<NodeId>(id), std::move(slots_[slot_of_[id]]));
  }
  // Drops every buffer the builder holds (the internal slots' release is stream-ordered after the
  // program). Called on every way out of a backward.
  void release();

 private:
  static constexpr std::size_t kNoSlot = SIZE_MAX;

  // Before the VJP step of `n`: forward steps computing again the inputs it reads, where that saves
  // storing them. Their stores are dropped once the program is complete (build).
  void append_recomputes(const Node& n, std::span<const Node> nodes, std::span<const std::uint8_t> pending);
  void append_forward(std::size_t position, std::span<const Node> nodes);
  // Lists the values `step` (of node `n`) reads from memory in values_read_.
  void note_values_read(const Step& step, const Node& n);

  Program program_;
  std::vector<BufferSpec> specs_;
  std::vector<std::size_t> slot_of_;   // a returned slot's index in slots_, else kNoSlot
  std::vector<void*> address_;         // every slot's address, returned or internal
  std::vector<NodeId> internal_;       // the slots in between
  std::vector<std::byte> stand_ins_;   // their addresses until allocate_internal_slots: internal_[i]'s is &stand_ins_[i]
  std::vector<std::int64_t> place_;    // internal_[i]'s position in internal_slots_, -1 if it never reaches memory
  std::int64_t internal_stride_ = 0;   // bytes apart in internal_slots_ (16-byte aligned, as allocate_many's parts)
  DType internal_dtype_ = DType::float32;
  std::vector<NodeId> large_zeros_;
  std::vector<NodeId> values_read_;
  std::vector<std::uint8_t> read_from_memory_;  // per position: listed in values_read_
  std::vector<std::uint32_t> vjp_reads_;        // per position: the VJPs of the plan that read its value
  RegisterPass register_pass_;
  std::vector<Buffer> slots_;          // the returned slots; empty between calls
  Buffer internal_slots_;
};

}  // namespace tapewise::detail
