// reference/bounds.hpp — each op's allowed error against the reference, read from spec/bounds.def
// (the only place a tolerance is written down), and what the exhaustive sweep recorded beside it.
// Not the check itself: that is measure.hpp.
#pragma once

#include <optional>

#include "tapewise/backend.hpp"  // MathMode
#include "tapewise/core.hpp"
#include "tapewise/op.hpp"

namespace tapewise::reference {

// allowed |produced - exact| = ulp * ulp_of(R(exact)) + abs * eps(dtype) * w   (see measure.hpp)
struct Bound {
  double ulp = 0.0;
  double abs = 0.0;
};

// The bound of a node's forward and VJP in a math mode: exact mode's TAPEWISE_BOUND_EXACT row where
// the node and dtype have one, else the TAPEWISE_BOUND row (the only one in aten mode).
Bound forward_bound(Op op, DType dtype, MathMode math);
Bound vjp_bound(Op op, DType dtype, MathMode math);

// The magnitudes [2^lo, 2^hi) of inputs and cotangents a dtype's bounds are stated for (and the
// runner and conform/measure_bounds.cpp draw from): spec/ops.def's domain for float32, float64 and
// bfloat16 (float32's exponent range); for float16, that domain intersected with [2^-3, 2^3), where
// no stage but a node's last leaves float16's normal range (its largest finite value is 65504; the
// stagings square and invert: div's a/b/b, inv's r*r, exp's e^x, gelu's x^3), so that a bound says
// nothing of float16's overflow and underflow, as float32's says nothing of its own (spec/bounds.def).
struct DomainLog2 {
  int lo, hi;
};
DomainLog2 bounds_domain(const OpInfo& info, DType dtype);

// Which causes of a value above its bound spec/bounds.def accepts outside the node's domain: an
// intermediate of the staging that overflows, one that underflows, both, or none
// (spec/conventions.md §4.1; the sweep classifies, reference/sweep_reference.hpp).
enum class OutsideDomain { none, overflow, underflow, overflow_underflow };
bool accepts_overflow(OutsideDomain outside);
bool accepts_underflow(OutsideDomain outside);
const char* outside_domain_name(OutsideDomain outside);  // "none", "overflow", ...

// What `tapewise-conform sweep` measured, recorded beside each bound (spec/bounds.def,
// TAPEWISE_SWEPT): the largest error in ULPs inside the domain of y and of the VJP (the larger of
// da and db for a binary node) at g = 1 and g = R(0.7), on the evidence named. None for a node
// spec/bounds.def records as not swept yet (TAPEWISE_NOT_SWEPT).
struct Swept {
  const char* evidence;  // "exhaustive 2^32", "2^32 exponent pairs", "2^32 random", "<N> random"
  double y_ulps;
  double vjp_g1_ulps;
  double vjp_g07_ulps;
  OutsideDomain outside;
};
std::optional<Swept> swept(Op op, DType dtype);
// The causes the sweep record accepts outside the domain; none for a node not swept yet, whose first
// sweep reports every value above its bound there.
OutsideDomain accepted_outside_domain(Op op, DType dtype);
// The folder of the sweep JSON files those numbers were read from, relative to the repository.
const char* swept_source();

}  // namespace tapewise::reference
