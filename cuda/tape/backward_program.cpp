// cuda/tape/backward_program.cpp — the backward program's builder (backward_program.hpp): its slots,
// its steps, and the register pass with the piece boundaries it respects.
#include "tape/backward_program.hpp"

#include <cstddef>
#include <limits>
#include <string>

#include "tape/tape_internal.hpp"

namespace tapewise::detail {

void keep_in_registers(Program& program, std::span<const std::uint8_t> only_the_next_reads) {
  std::vector<Step>& steps = program.steps;
  std::size_t next_piece = 0;  // the first step of the piece after the current one
  for (std::size_t j = 0; j < steps.size(); ++j) {
    if (j == next_piece) next_piece += static_cast<std::size_t>(piece_at(program, j, kStepsPerLaunch).count);
    Step& step = steps[j];
    if (step.out[1] && step.out[1] == step.out[0]) continue;  // one buffer written twice: both stores kept
    for (int k = 0; k < 2; ++k) {
      const SlotWrite how = step.write[k];
      const bool first_contribution = how == SlotWrite::store || how == SlotWrite::store_dense;
      if (!first_contribution || !step.out[k] || !((only_the_next_reads[j] >> k) & 1u)) continue;
      bool in_register = true;  // every read of the slot by step j + 1 comes from the register
      if (j + 1 < steps.size()) {
        const Step& next = steps[j + 1];
        for (int operand = 0; operand < kOperandCount; ++operand) {
          if (!reads(next, operand) || operand_address(next, operand) != step.out[k]) continue;
          const unsigned from_register = (1u << (kFromWritten0 + operand)) | (1u << (kFromWritten1 + operand));
          in_register = in_register && j + 1 != next_piece && next.numel == step.numel && (next.sources & from_register);
        }
      }
      if (in_register) step.out[k] = nullptr;
    }
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
  const auto first = reinterpret_cast<std::uintptr_t>(stand_ins_.data());
  auto stand_in = [&](const void* p) -> std::int64_t {  // the internal slot p stands in for, else -1
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    return at >= first && at - first < stand_ins_.size() ? static_cast<std::int64_t>(at - first) : -1;
  };
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
                                      const Buffer& seed, std::int64_t threshold) {
  auto at = [&](NodeId id) -> const Node& { return nodes[node_position(id)]; };
  auto slot = [&](NodeId id) { return address_[node_position(id)]; };
  const Buffer& like = at(out).value;
  program_.steps.clear();
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
  if (!plan.wanted.empty()) keep_unwanted_in_registers(plan, nodes, out);
  return program_;
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

// For a backward returning only the wanted gradients: which slot writes of its program (the seed copy,
// then a step per visit) no step but the next reads, the slot not being returned — a slot no
// contribution accumulates onto, read only by its own node's visit — and so stay in registers.
void BackwardProgram::keep_unwanted_in_registers(const BackwardPlan& plan, std::span<const Node> nodes, NodeId out) {
  const std::size_t count = plan.wanted.size();
  reader_step_.assign(count, -1);  // the step reading a node's slot as g
  accumulated_.assign(count, 0);
  for (std::size_t i = 0; i < plan.visits.size(); ++i) {
    const Visit& visit = plan.visits[i];
    reader_step_[static_cast<std::size_t>(visit.node)] = static_cast<std::int64_t>(i + 1);
    for (std::size_t k = 0; k < 2; ++k)
      if (visit.write[k] == SlotWrite::accumulate)
        accumulated_[node_position(nodes[static_cast<std::size_t>(visit.node)].parents[k])] = 1;
  }
  only_the_next_reads_.assign(program_.steps.size(), 0);
  auto mark = [&](std::size_t step, int k, NodeId node) {
    const std::size_t id = node_position(node);
    if (!plan.wanted[id] && !accumulated_[id] &&
        (reader_step_[id] < 0 || reader_step_[id] == static_cast<std::int64_t>(step + 1)))
      only_the_next_reads_[step] |= static_cast<std::uint8_t>(1u << k);
  };
  mark(0, 0, out);  // the seed copy
  for (std::size_t i = 0; i < plan.visits.size(); ++i) {
    const Visit& visit = plan.visits[i];
    for (int k = 0; k < 2; ++k)
      if (visit.write[static_cast<std::size_t>(k)] != SlotWrite::none)
        mark(i + 1, k, nodes[static_cast<std::size_t>(visit.node)].parents[static_cast<std::size_t>(k)]);
  }
  keep_in_registers(program_, only_the_next_reads_);
}

}  // namespace tapewise::detail
