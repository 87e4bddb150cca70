// cuda/tape/backward_program.cpp — the backward program's builder (backward_program.hpp): its slots,
// its steps, and the register pass with the piece boundaries it respects.
#include "tape/backward_program.hpp"

#include <atomic>
#include <cstddef>
#include <limits>
#include <string>

#include "tape/tape_internal.hpp"

namespace tapewise::detail {

namespace {
std::atomic<std::int64_t> recompute_override{-1};  // set_recompute_from's; -1: none
}  // namespace

std::int64_t recompute_from(BackendKind kind, DType dtype) {
  const std::int64_t set = recompute_override.load(std::memory_order_relaxed);
  if (set >= 0) return set;
  return kind == BackendKind::cuda && dtype == DType::float32 ? kRecomputeFromOnCuda : std::numeric_limits<std::int64_t>::max();
}
void set_recompute_from(std::int64_t elements) { recompute_override.store(elements, std::memory_order_relaxed); }

std::int64_t stand_in_index(std::span<const std::byte> stand_ins, const void* p) {
  const auto first = reinterpret_cast<std::uintptr_t>(stand_ins.data());
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  return p && at >= first && at - first < stand_ins.size() ? static_cast<std::int64_t>(at - first) : -1;
}

void RegisterPass::run(Program& program, std::span<const std::byte> internal) {
  if (internal.empty()) return;
  std::vector<Step>& steps = program.steps;
  auto slot_of = [&](const void* p) { return stand_in_index(internal, p); };
  last_store_.assign(internal.size(), -1);
  from_memory_.assign(steps.size(), 0);
  for (std::size_t r = 0; r < steps.size(); ++r) {
    const Step& reader = steps[r];
    for (int operand = 0; operand < kOperandCount; ++operand) {
      if (!reads(reader, operand)) continue;
      const std::int64_t slot = slot_of(operand_address(reader, operand));
      if (slot < 0) continue;
      const std::int64_t store = last_store_[static_cast<std::size_t>(slot)];
      const auto j = static_cast<std::size_t>(store / 2);
      const int k = static_cast<int>(store % 2);
      const bool in_register = store >= 0 && r - j <= static_cast<std::size_t>(kHistory) && steps[j].numel == reader.numel &&
                               source_code(reader.sources, operand) == register_source(static_cast<int>(r - j), k);
      if (in_register) continue;
      if (store >= 0) from_memory_[j] |= static_cast<std::uint8_t>(1u << k);
      // An accumulation reading its own slot from memory loads through the address it stores to.
      if (operand >= kSlot0) from_memory_[r] |= static_cast<std::uint8_t>(1u << (operand - kSlot0));
    }
    const Overwritten written = overwritten_by(reader);
    for (int k = 0; k < 2; ++k)
      if (const std::int64_t slot = slot_of(written.at[k]); slot >= 0)
        last_store_[static_cast<std::size_t>(slot)] = 2 * static_cast<std::int64_t>(r) + k;
  }
  for (std::size_t j = 0; j < steps.size(); ++j) {
    Step& step = steps[j];
    if (step.out[1] && step.out[1] == step.out[0]) continue;  // one buffer written twice: both stores kept
    for (int k = 0; k < 2; ++k)
      if (step.write[k] != SlotWrite::none && slot_of(step.out[k]) >= 0 && !((from_memory_[j] >> k) & 1u))
        step.out[k] = nullptr;
  }
}

Result<void> BackwardProgram::allocate_slots(Engine& engine, const BackwardPlan& plan, std::span<const Node> nodes,
                                             NodeId out, bool dense) {
  const std::size_t count = nodes.size();
  // A slot the walk reaches has the output's shape and dtype (a node's inputs have its own).
  const Buffer& like = nodes[static_cast<std::size_t>(out)].value;
  slot_of_.assign(count, kNoSlot);
  address_.assign(count, nullptr);
  internal_.clear();
  std::size_t returned = 0;
  for (std::size_t id = 0; id < count; ++id) {
    if (!plan.has_slot(static_cast<NodeId>(id), dense, nodes[id])) continue;
    if (!plan.is_wanted(static_cast<NodeId>(id))) {
      internal_.push_back(static_cast<NodeId>(id));
      continue;
    }
    // Slot specs written over the earlier ones: their shapes' storage is reused.
    if (returned == specs_.size()) specs_.emplace_back();
    specs_[returned].shape = nodes[id].value.shape();  // a dense zero slot may lie outside the output's graph
    specs_[returned].dtype = nodes[id].value.dtype();
    slot_of_[id] = returned++;
  }
  TAPEWISE_CHECK(engine.allocate_many_into({specs_.data(), returned}, AllocTag::gradient, slots_));
  // The internal slots get stand-in addresses, distinct and never a buffer's, until the register pass has
  // said which of them reach memory (allocate_internal_slots).
  internal_stride_ = (like.numel() * static_cast<std::int64_t>(dtype_size(like.dtype())) + 15) / 16 * 16;
  internal_dtype_ = like.dtype();
  stand_ins_.assign(internal_stride_ > 0 ? internal_.size() : 0, std::byte{});
  for (std::size_t i = 0; i < stand_ins_.size(); ++i) address_[static_cast<std::size_t>(internal_[i])] = &stand_ins_[i];
  for (std::size_t id = 0; id < count; ++id)
    if (slot_of_[id] != kNoSlot) address_[id] = slots_[slot_of_[id]].data();
  return {};
}

Result<void> BackwardProgram::allocate_internal_slots(Engine& engine, const char* what) {
  if (stand_ins_.empty()) return {};
  auto stand_in = [&](const void* p) { return stand_in_index(stand_ins_, p); };
  // A slot no step stores to holds nothing a step could load: its readers take it from a register.
  place_.assign(stand_ins_.size(), -1);
  std::int64_t stored = 0;
  for (const Step& step : program_.steps) {
    for (const void* out : step.out) {
      const std::int64_t i = stand_in(out);
      if (i >= 0 && place_[static_cast<std::size_t>(i)] < 0) place_[static_cast<std::size_t>(i)] = stored++;
    }
  }
  std::byte* base = nullptr;
  if (stored > 0) {
    if (stored > std::numeric_limits<std::int64_t>::max() / internal_stride_)
      return fail(ErrorCode::OutOfMemory, std::string(what) + ": " + std::to_string(stored) + " gradient slots of " +
                                              std::to_string(internal_stride_) + " bytes are too large to address");
    const auto per_element = static_cast<std::int64_t>(dtype_size(internal_dtype_));
    auto buffer = engine.allocate(Shape{stored * internal_stride_ / per_element}, internal_dtype_, AllocTag::gradient);
    TAPEWISE_CHECK(buffer);
    internal_slots_ = std::move(*buffer);
    base = static_cast<std::byte*>(internal_slots_.data());
  }
  auto placed = [&](const void* p) -> void* {
    const std::int64_t i = stand_in(p);
    if (i < 0) return const_cast<void*>(p);
    const std::int64_t at = place_[static_cast<std::size_t>(i)];
    return at < 0 ? nullptr : base + at * internal_stride_;
  };
  for (Step& step : program_.steps) {
    for (const void*& in : step.in) in = placed(in);
    step.g = placed(step.g);
    for (void*& out : step.out) out = placed(out);
  }
  return {};
}

const Program& BackwardProgram::build(const BackwardPlan& plan, std::span<const Node> nodes, NodeId out,
                                      const Buffer& seed, std::int64_t threshold, std::span<const std::uint8_t> pending) {
  auto at = [&](NodeId id) -> const Node& { return nodes[node_position(id)]; };
  auto slot = [&](NodeId id) { return address_[node_position(id)]; };
  const Buffer& like = at(out).value;
  program_.steps.clear();
  values_read_.clear();
  read_from_memory_.assign(nodes.size(), 0);
  if (!pending.empty()) {
    vjp_reads_.assign(nodes.size(), 0);
    for (const Visit& visit : plan.visits) {
      const Node& n = at(visit.node);
      if (visit.pass_once || op_info(*n.op).vjp_reads != VjpReads::inputs) continue;
      for (int k = 0; k < n.arity; ++k) ++vjp_reads_[node_position(n.parents[k])];
    }
  }
  // A new step of the program, filled where it lies (Program::append) and sealed once complete.
  auto new_step = [&](StepKind kind, const Buffer& shaped) -> Step& {
    Step& step = program_.append();
    step.kind = kind;
    step.dtype = shaped.dtype();
    step.numel = shaped.numel();
    return step;
  };
  Step& copy = new_step(StepKind::pass, seed);
  copy.in[0] = seed.data();
  copy.out[0] = slot(out);
  copy.write[0] = SlotWrite::store;
  program_.seal_last();
  for (const Visit& visit : plan.visits) {
    const Node& n = at(visit.node);
    void* g = slot(visit.node);
    if (!visit.pass_once && !pending.empty()) append_recomputes(n, nodes, pending);
    Step& step = new_step(visit.pass_once ? StepKind::pass : StepKind::vjp, like);
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
      if (visit.write[k] != SlotWrite::none) step.out[k] = slot(n.parents[k]);
    }
    program_.seal_last();
    if (!visit.pass_once) note_values_read(step, n);
  }
  // Dense: slots that received nothing hold +0; a large one (a node outside the output's graph) by a
  // fill kernel, so the program's threads stay as many as the output's elements. Each is returned.
  large_zeros_.clear();
  for (NodeId id : plan.zero_slots) {
    Buffer& zeros = slots_[slot_of_[static_cast<std::size_t>(id)]];
    if (!runs_as_program(zeros.numel(), threshold)) {
      large_zeros_.push_back(id);
      continue;
    }
    Step& zero = new_step(StepKind::zero, zeros);
    zero.out[0] = zeros.data();
    program_.seal_last();
  }
  register_pass_.run(program_, stand_ins_);
  // A value computed again (a backward's only forward steps) reaches the steps after it in a register; a
  // step that reads it from memory (past kHistory, or in the next piece) has it listed in values_read_,
  // so the flush stores it.
  for (Step& step : program_.steps)
    if (step.kind == StepKind::forward) step.out[0] = nullptr;
  return program_;
}

// Which inputs are computed again: a node's whose forward is pending (the flush would otherwise store
// it for this VJP alone), unary (it reads one value, where the stored one would be one read), read by
// no other VJP of the plan and by no step from memory so far. One step back, the VJP finds it in a
// register; its input's node, if it qualifies too, is computed first, so that the VJP after this one
// finds its own input three steps back. At most kHistory - 1 steps go in between, so that this VJP
// still takes its gradient from the register of the VJP before it. A chain of sin and tanh nodes thus
// stores one value of three, where it stored each (the chain sin, tanh, sigmoid, scale, relu: two of
// five, where it stored four).
void BackwardProgram::append_recomputes(const Node& n, std::span<const Node> nodes, std::span<const std::uint8_t> pending) {
  if (op_info(*n.op).vjp_reads != VjpReads::inputs) return;
  auto worth = [&](std::size_t p) {
    const Node& v = nodes[p];
    return pending[p] && v.op && v.arity == 1 && vjp_reads_[p] == 1 && !read_from_memory_[p];
  };
  int room = kHistory - 1;
  for (int k = 0; k < n.arity && room > 0; ++k) {
    const std::size_t p = node_position(n.parents[k]);
    if (!worth(p)) continue;
    const std::size_t q = node_position(nodes[p].parents[0]);
    if (room >= 2 && worth(q)) {
      append_forward(q, nodes);
      --room;
    }
    append_forward(p, nodes);
    --room;
  }
}

void BackwardProgram::append_forward(std::size_t position, std::span<const Node> nodes) {
  const Node& n = nodes[position];
  Step& step = program_.append();
  fill_forward_step(step, n, nodes);  // its value's address too: sources_of finds the steps after it
  program_.seal_last();
  note_values_read(step, n);
}

void BackwardProgram::note_values_read(const Step& step, const Node& n) {
  for (int k = 0; k < n.arity; ++k) {
    if (!reads(step, kIn0 + k) || source_code(step.sources, kIn0 + k) != kFromMemory) continue;
    const std::size_t p = node_position(n.parents[k]);
    values_read_.push_back(static_cast<NodeId>(p));
    read_from_memory_[p] = 1;
  }
}

Result<void> BackwardProgram::fill_large_zeros(Engine& engine) {
  for (NodeId id : large_zeros_)
    TAPEWISE_CHECK(engine.prim(Prim::fill, 0.0, {}, slots_[slot_of_[static_cast<std::size_t>(id)]]));
  return {};
}

void BackwardProgram::release() {
  slots_.clear();
  internal_slots_ = Buffer();
}

}  // namespace tapewise::detail
