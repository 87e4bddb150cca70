// reference/bounds.cpp — the lookup over spec/bounds.def; the numbers live only in that table.
#include "bounds.hpp"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace tapewise::reference {

namespace {

struct BoundRow {
  Op op;
  DType dtype;
  Bound forward, vjp;
};

struct SweptRow {
  Op op;
  DType dtype;
  std::optional<Swept> swept;  // none: TAPEWISE_NOT_SWEPT
};

// spec/bounds.def holds five kinds of rows; each pass below reads one or two kinds and skips the
// others.
#define TAPEWISE_BOUND_EXACT(op, dtype, fwd_ulp, fwd_abs, vjp_ulp, vjp_abs)
#define TAPEWISE_SWEPT_SOURCE(path)
#define TAPEWISE_SWEPT(op, dtype, evidence, y, vjp_g1, vjp_g07, outside)
#define TAPEWISE_NOT_SWEPT(op, dtype)
constexpr BoundRow kBounds[] = {
#define TAPEWISE_BOUND(op, dtype, fwd_ulp, fwd_abs, vjp_ulp, vjp_abs) \
  BoundRow{Op::op, DType::dtype, Bound{fwd_ulp, fwd_abs}, Bound{vjp_ulp, vjp_abs}},
#include "../spec/bounds.def"
#undef TAPEWISE_BOUND
};
#undef TAPEWISE_NOT_SWEPT
#undef TAPEWISE_SWEPT

#define TAPEWISE_BOUND(op, dtype, fwd_ulp, fwd_abs, vjp_ulp, vjp_abs)
constexpr SweptRow kSwept[] = {
#define TAPEWISE_SWEPT(op, dtype, evidence, y, vjp_g1, vjp_g07, outside) \
  SweptRow{Op::op, DType::dtype, Swept{evidence, y, vjp_g1, vjp_g07, OutsideDomain::outside}},
#define TAPEWISE_NOT_SWEPT(op, dtype) SweptRow{Op::op, DType::dtype, std::nullopt},
#include "../spec/bounds.def"
#undef TAPEWISE_NOT_SWEPT
#undef TAPEWISE_SWEPT
};
#undef TAPEWISE_SWEPT_SOURCE

#define TAPEWISE_SWEPT(op, dtype, evidence, y, vjp_g1, vjp_g07, outside)
#define TAPEWISE_NOT_SWEPT(op, dtype)
#define TAPEWISE_SWEPT_SOURCE(path) constexpr const char* kSweptSource = path;
#include "../spec/bounds.def"
#undef TAPEWISE_SWEPT_SOURCE
#undef TAPEWISE_BOUND_EXACT

// Exact mode's rows: the nodes whose bound exact mode tightens.
#define TAPEWISE_SWEPT_SOURCE(path)
#define TAPEWISE_BOUND_EXACT(op, dtype, fwd_ulp, fwd_abs, vjp_ulp, vjp_abs) \
  BoundRow{Op::op, DType::dtype, Bound{fwd_ulp, fwd_abs}, Bound{vjp_ulp, vjp_abs}},
constexpr BoundRow kExactBounds[] = {
#include "../spec/bounds.def"
};
#undef TAPEWISE_BOUND_EXACT
#undef TAPEWISE_SWEPT_SOURCE
#undef TAPEWISE_NOT_SWEPT
#undef TAPEWISE_SWEPT
#undef TAPEWISE_BOUND

// --- compile-time rules of the table -----------------------------------------------------------
// Each node of the op table has, per dtype of kDTypes, exactly one TAPEWISE_BOUND row and exactly one sweep
// record (TAPEWISE_SWEPT or TAPEWISE_NOT_SWEPT). A missing or repeated row fails the build naming the
// rule, the node and the dtype, e.g. "call to non-constexpr function 'void tapewise::reference::
// {anonymous}::bounds_rule::one_sweep_record_per_node_and_dtype() [with Op op = Op::relu; DType
// dtype = DType::float64]'".
namespace bounds_rule {
template <Op op, DType dtype> void one_bound_row_per_node_and_dtype();
template <Op op, DType dtype> void one_sweep_record_per_node_and_dtype();
template <Op op, DType dtype> void at_most_one_exact_mode_row_per_node_and_dtype();

template <class Row, std::size_t n>
constexpr int rows_for(const Row (&rows)[n], Op op, DType dtype) {
  int count = 0;
  for (const Row& r : rows) count += r.op == op && r.dtype == dtype ? 1 : 0;
  return count;
}

template <std::size_t i, DType dtype>
constexpr bool node_has_its_rows() {
  constexpr Op op = kOps[i].op;
  if constexpr (rows_for(kBounds, op, dtype) != 1) one_bound_row_per_node_and_dtype<op, dtype>();
  if constexpr (rows_for(kSwept, op, dtype) != 1) one_sweep_record_per_node_and_dtype<op, dtype>();
  if constexpr (rows_for(kExactBounds, op, dtype) > 1) at_most_one_exact_mode_row_per_node_and_dtype<op, dtype>();
  return true;
}

template <std::size_t i, std::size_t... D>
constexpr bool node_has_rows_for_every_dtype(std::index_sequence<D...>) {
  return (node_has_its_rows<i, kDTypes[D]>() && ...);
}

// Every node, every dtype of kDTypes (float32, float64, bfloat16, float16).
template <std::size_t... I>
constexpr bool every_node_has_its_rows(std::index_sequence<I...>) {
  return (node_has_rows_for_every_dtype<I>(std::make_index_sequence<kDTypeCount>{}) && ...);
}
}  // namespace bounds_rule

static_assert(bounds_rule::every_node_has_its_rows(std::make_index_sequence<kOpCount>{}),
              "spec/bounds.def: a node lacks a row, or has two");

template <class Row, std::size_t n>
const Row& row(const Row (&rows)[n], Op op, DType dtype, const char* kind) {
  for (const Row& r : rows)
    if (r.op == op && r.dtype == dtype) return r;
  throw std::logic_error(std::string("spec/bounds.def has no ") + kind + " row for " + op_name(op) + " " +
                         dtype_name(dtype));
}

}  // namespace

DomainLog2 bounds_domain(const OpInfo& info, DType dtype) {
  if (dtype != DType::float16) return {info.domain_log2_lo, info.domain_log2_hi};
  constexpr int kFloat16Lo = -3, kFloat16Hi = 3;
  return {std::max(info.domain_log2_lo, kFloat16Lo), std::min(info.domain_log2_hi, kFloat16Hi)};
}

namespace {
const BoundRow& bound_row(Op op, DType dtype, MathMode math) {
  if (math == MathMode::exact)
    for (const BoundRow& r : kExactBounds)
      if (r.op == op && r.dtype == dtype) return r;
  return row(kBounds, op, dtype, "TAPEWISE_BOUND");
}
}  // namespace

Bound forward_bound(Op op, DType dtype, MathMode math) { return bound_row(op, dtype, math).forward; }
Bound vjp_bound(Op op, DType dtype, MathMode math) { return bound_row(op, dtype, math).vjp; }
std::optional<Swept> swept(Op op, DType dtype) {
  return row(kSwept, op, dtype, "TAPEWISE_SWEPT or TAPEWISE_NOT_SWEPT").swept;
}
OutsideDomain accepted_outside_domain(Op op, DType dtype) {
  const std::optional<Swept> record = swept(op, dtype);
  return record ? record->outside : OutsideDomain::none;
}
const char* swept_source() { return kSweptSource; }

bool accepts_overflow(OutsideDomain outside) {
  return outside == OutsideDomain::overflow || outside == OutsideDomain::overflow_underflow;
}
bool accepts_underflow(OutsideDomain outside) {
  return outside == OutsideDomain::underflow || outside == OutsideDomain::overflow_underflow;
}
const char* outside_domain_name(OutsideDomain outside) {
  switch (outside) {
    case OutsideDomain::none: return "none";
    case OutsideDomain::overflow: return "overflow";
    case OutsideDomain::underflow: return "underflow";
    case OutsideDomain::overflow_underflow: return "overflow_underflow";
  }
  return "?";
}

}  // namespace tapewise::reference
