/// tapewise/op.hpp — the node vocabulary, generated from the op table (spec/ops.def, installed as
/// <tapewise/ops.def>; every column is explained there). Only names, numbers and the staged form as
/// text live here; the formulas live in cuda/ and reference/.
/// \file
#pragma once

#if !defined(__CUDACC_RTC__)  // NVRTC (compiled pieces) is always C++20
#include "requires_cpp20.hpp"
#endif

#include <cstddef>
#include <initializer_list>
// Kernels compiled at run time (NVRTC, which has no C++ standard library) see the table, not its
// string helpers or compile-time rules.
#if !defined(__CUDACC_RTC__)
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#endif

namespace tapewise {

/// The nodes, one per row of spec/ops.def, in table order (add = 0).
enum class Op {
#define TAPEWISE_OP(name, ...) name,
#include <tapewise/ops.def>
#undef TAPEWISE_OP
};

/// Scalars arrive as host doubles; the backend rounds each once to the buffer dtype.
struct Scalars {
  /// The first scalar (scale's c, clamp's lo, safeLog's eps); 0 when unused.
  double s0 = 0.0;
  /// The second scalar (clamp's hi); 0 when unused.
  double s1 = 0.0;
};

/// A short list of scalar sets, as a column of the table writes it: ({0.37}, {0x1.000001p+0}).
class ScalarSets {
 public:
  /// The most sets a list holds.
  static constexpr int kCapacity = 6;
  constexpr ScalarSets() = default;
  /// The sets given (at most kCapacity).
  constexpr ScalarSets(std::initializer_list<Scalars> sets) {
    for (const Scalars& s : sets) sets_[count_++] = s;  // more than kCapacity: not a constant expression
  }
  /// The number of sets.
  constexpr int size() const { return count_; }
  /// True when there is none.
  constexpr bool empty() const { return count_ == 0; }
  /// Set i.
  constexpr const Scalars& operator[](int i) const { return sets_[i]; }
  /// Iteration over the sets.
  constexpr const Scalars* begin() const { return sets_; }
  /// Iteration over the sets.
  constexpr const Scalars* end() const { return sets_ + count_; }

 private:
  Scalars sets_[kCapacity]{};
  int count_ = 0;
};

/// What a node needs of its scalars once rounded to the dtype (spec/ops.def, `scalar_contract`).
enum class ScalarContract { none, any, finite, positive };
/// Where the spec decides a derivative by a convention (spec/ops.def, `kink`).
enum class Kink { none, zero, bounds, tie };
/// What op(a, a) gives a's gradient (spec/ops.def, `same_parent`): none (unary), both contributions
/// added, or the upstream value once (max, min).
enum class SameParent { none, twice, once };
/// What the benchmarks feed a node: N(0, 1), or |N(0, 1)| + 0.5.
enum class BenchInputs { normal, positive };
/// What conform/aten_parity.py does with the node: grade its ATen transcription of the staging, only
/// report it (TorchLean's staging is not published), or nothing (TorchLean has no such node).
enum class AtenParity { graded, ungraded, none };
/// What the fused VJP reads: g alone (add, sub, neg, scale) or g and every input.
enum class VjpReads { g, inputs };
/// Whether the exhaustive sweep's own transcription (reference/sweep_reference.hpp) has the node.
enum class SweepReference { transcribed, none };

/// The words of spec/ops.def for these columns (also the JSON's and Python's).
constexpr const char* scalar_contract_name(ScalarContract c) {
  constexpr const char* names[] = {"none", "any", "finite", "positive"};
  return names[static_cast<int>(c)];
}
/// "none", "zero", "bounds" or "tie".
constexpr const char* kink_name(Kink k) {
  constexpr const char* names[] = {"none", "zero", "bounds", "tie"};
  return names[static_cast<int>(k)];
}
/// "none", "twice" or "once".
constexpr const char* same_parent_name(SameParent p) {
  constexpr const char* names[] = {"none", "twice", "once"};
  return names[static_cast<int>(p)];
}
/// "normal" or "positive".
constexpr const char* bench_inputs_name(BenchInputs b) { return b == BenchInputs::normal ? "normal" : "positive"; }
/// "graded", "ungraded" or "none".
constexpr const char* aten_parity_name(AtenParity a) {
  constexpr const char* names[] = {"graded", "ungraded", "none"};
  return names[static_cast<int>(a)];
}
/// "g" or "inputs".
constexpr const char* vjp_reads_name(VjpReads r) { return r == VjpReads::g ? "g" : "inputs"; }
/// "transcribed" or "none".
constexpr const char* sweep_reference_name(SweepReference r) {
  return r == SweepReference::transcribed ? "transcribed" : "none";
}

/// One row of the op table (spec/ops.def explains each column).
struct OpInfo {
  /// The node.
  Op op;
  /// Its name, e.g. "add".
  const char* name;
  /// Inputs: 1 or 2.
  int arity;
  const char* scalar_names[2];  ///< "" when unused
  /// What it needs of its scalars once rounded.
  ScalarContract scalar_contract;
  int domain_log2_lo;           ///< random magnitudes in [2^lo, 2^hi)
  /// See domain_log2_lo.
  int domain_log2_hi;
  /// Whether the node is defined only on positive inputs.
  bool positive_only;
  /// Where a derivative is decided by a convention.
  Kink kink;
  /// What op(a, a) gives a's gradient.
  SameParent same_parent;
  /// What the benchmarks feed it.
  BenchInputs bench_inputs;
  /// What conform/aten_parity.py does with it.
  AtenParity aten_parity;
  /// What its fused VJP reads.
  VjpReads vjp_reads;
  /// Whether the sweep transcribes it.
  SweepReference sweep_reference;
  ScalarSets run_scalars;     ///< the runner's sets; the first is the benchmarks'
  ScalarSets graded_scalars;  ///< more sets inside the contract (tests graded against the reference)
  ScalarSets edge_scalars;    ///< sets outside it (tests comparing bits only)
  /// The staged VJP as text (the `staged` column).
  const char* staged;
  /// Scalars the node takes: 0, 1 or 2.
  constexpr int scalar_count() const { return (scalar_names[0][0] ? 1 : 0) + (scalar_names[1][0] ? 1 : 0); }
};

#define TAPEWISE_SCALAR_SETS_(...) ScalarSets{__VA_ARGS__}
/// The op table, indexed by Op.
inline constexpr OpInfo kOps[] = {
#define TAPEWISE_OP(name, arity, s0, s1, contract, lo, hi, pos, kink, same, bench, aten, reads, sweep, run, graded, \
                    edge, staged)                                                                             \
  OpInfo{Op::name, #name, arity, {s0, s1}, ScalarContract::contract, lo, hi, pos != 0, Kink::kink,             \
         SameParent::same, BenchInputs::bench, AtenParity::aten,                                               \
         VjpReads::reads, SweepReference::sweep, TAPEWISE_SCALAR_SETS_ run, TAPEWISE_SCALAR_SETS_ graded, TAPEWISE_SCALAR_SETS_ edge, staged},
#include <tapewise/ops.def>
#undef TAPEWISE_OP
};
#undef TAPEWISE_SCALAR_SETS_

/// The number of ops.
inline constexpr int kOpCount = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));

/// The op's row of the table.
constexpr const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }
/// The op's name, e.g. "add".
constexpr const char* op_name(Op op) { return op_info(op).name; }

#if !defined(__CUDACC_RTC__)
/// The op's name, or "op N (not a node)" for a value outside the table: how an error names it.
inline std::string op_label(Op op) {
  const int index = static_cast<int>(op);
  return index >= 0 && index < kOpCount ? std::string(op_name(op)) : "op " + std::to_string(index) + " (not a node)";
}

/// The op of that name, or nullopt.
inline std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (name == info.name) return info.op;
  return std::nullopt;
}

#endif  // !defined(__CUDACC_RTC__)

/// The node's first run set ({} without scalars): what a single sample call (the benchmarks, an
/// example) passes.
constexpr Scalars default_scalars(const OpInfo& info) {
  return info.run_scalars.empty() ? Scalars{} : info.run_scalars[0];
}

/// The scalar sets the tests graded against the reference use: run_scalars, then graded_scalars;
/// one empty set for a node without scalars. (At most 2 * ScalarSets::kCapacity.)
struct ScalarSetList {
  /// The sets; the first `count` are used.
  Scalars sets[2 * ScalarSets::kCapacity]{};
  /// The number of sets used.
  int count = 0;
  /// Iteration over the sets used.
  const Scalars* begin() const { return sets; }
  /// Iteration over the sets used.
  const Scalars* end() const { return sets + count; }
};
/// The ScalarSetList of a node (see ScalarSetList).
constexpr ScalarSetList graded_scalar_sets(const OpInfo& info) {
  ScalarSetList out;
  for (const ScalarSets* column : {&info.run_scalars, &info.graded_scalars})
    for (const Scalars& s : *column) out.sets[out.count++] = s;
  if (out.count == 0) out.count = 1;  // the one empty set
  return out;
}

#if !defined(__CUDACC_RTC__)
// --- compile-time rules of the table -----------------------------------------------------------
/// A row that breaks one fails the build naming the rule and the node, e.g. "call to non-constexpr
/// function 'void tapewise::op_table_rule::kink_tie_needs_two_inputs() [with Op op = Op::relu]'".
namespace op_table_rule {
template <Op op> void rows_in_enum_order();
template <Op op> void arity_is_1_or_2();
template <Op op> void domain_lo_below_hi();
template <Op op> void scalar1_only_after_scalar0();
template <Op op> void run_scalars_given_for_a_node_with_scalars();
template <Op op> void no_scalar_sets_for_a_node_without_scalars();
template <Op op> void unused_scalars_are_0_in_every_set();
template <Op op> void kink_zero_needs_one_input();
template <Op op> void kink_bounds_needs_two_scalars();
template <Op op> void kink_tie_needs_two_inputs();
template <Op op> void positive_only_nodes_benchmark_positive_inputs();
template <Op op> void scalar_contract_none_exactly_without_scalars();
template <Op op> void same_parent_none_exactly_for_unary_nodes();
template <Op op> void kink_tie_passes_g_once_for_the_same_parent();

constexpr bool unused_scalars_zero(const OpInfo& r) {
  for (const ScalarSets* column : {&r.run_scalars, &r.graded_scalars, &r.edge_scalars})
    for (const Scalars& s : *column)
      if ((r.scalar_count() < 1 && s.s0 != 0.0) || (r.scalar_count() < 2 && s.s1 != 0.0)) return false;
  return true;
}

template <std::size_t i>
constexpr bool row_follows_rules() {
  constexpr const OpInfo& r = kOps[i];
  constexpr bool has_scalars = r.scalar_count() > 0;
  constexpr bool any_sets = !r.run_scalars.empty() || !r.graded_scalars.empty() || !r.edge_scalars.empty();
  if constexpr (static_cast<std::size_t>(r.op) != i) rows_in_enum_order<r.op>();
  if constexpr (r.arity != 1 && r.arity != 2) arity_is_1_or_2<r.op>();
  if constexpr (r.domain_log2_lo >= r.domain_log2_hi) domain_lo_below_hi<r.op>();
  if constexpr (!r.scalar_names[0][0] && r.scalar_names[1][0]) scalar1_only_after_scalar0<r.op>();
  if constexpr (has_scalars && r.run_scalars.empty()) run_scalars_given_for_a_node_with_scalars<r.op>();
  if constexpr (!has_scalars && any_sets) no_scalar_sets_for_a_node_without_scalars<r.op>();
  if constexpr (!unused_scalars_zero(r)) unused_scalars_are_0_in_every_set<r.op>();
  if constexpr (r.kink == Kink::zero && r.arity != 1) kink_zero_needs_one_input<r.op>();
  if constexpr (r.kink == Kink::bounds && (r.arity != 1 || r.scalar_count() != 2)) kink_bounds_needs_two_scalars<r.op>();
  if constexpr (r.kink == Kink::tie && r.arity != 2) kink_tie_needs_two_inputs<r.op>();
  if constexpr (r.positive_only && r.bench_inputs != BenchInputs::positive)
    positive_only_nodes_benchmark_positive_inputs<r.op>();
  if constexpr ((r.scalar_contract == ScalarContract::none) != !has_scalars)
    scalar_contract_none_exactly_without_scalars<r.op>();
  if constexpr ((r.same_parent == SameParent::none) != (r.arity == 1)) same_parent_none_exactly_for_unary_nodes<r.op>();
  // A tie splits g in halves; with one node as both parents the halves would be one value, so the
  // spec passes g once (the tie's rule and the repeated-parent rule are one decision).
  if constexpr (r.kink == Kink::tie && r.same_parent != SameParent::once) kink_tie_passes_g_once_for_the_same_parent<r.op>();
  return true;
}

template <std::size_t... I>
constexpr bool all_rows_follow_rules(std::index_sequence<I...>) {
  return (row_follows_rules<I>() && ...);
}
}  // namespace op_table_rule

static_assert(op_table_rule::all_rows_follow_rules(std::make_index_sequence<kOpCount>{}),
              "spec/ops.def: a row breaks a rule of the table");
#endif  // !defined(__CUDACC_RTC__)

}  // namespace tapewise
