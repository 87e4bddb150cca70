// reference/bounds.cpp — the lookup over spec/bounds.def; the numbers live only in that table.
#include "bounds.hpp"

#include <stdexcept>
#include <string>

namespace tapewise::reference {

namespace {

struct BoundRow {
  Op op;
  DType dtype;
  Bound forward, vjp;
};

constexpr BoundRow kBounds[] = {
#define TAPEWISE_BOUND(op, dtype, fwd_ulp, fwd_abs, vjp_ulp, vjp_abs) \
  BoundRow{Op::op, DType::dtype, Bound{fwd_ulp, fwd_abs}, Bound{vjp_ulp, vjp_abs}},
#include "../spec/bounds.def"
#undef TAPEWISE_BOUND
};

const BoundRow& row(Op op, DType dtype) {
  for (const BoundRow& r : kBounds)
    if (r.op == op && r.dtype == dtype) return r;
  throw std::logic_error(std::string("spec/bounds.def has no row for ") + op_name(op) + " " +
                         dtype_name(dtype));
}

}  // namespace

Bound forward_bound(Op op, DType dtype) { return row(op, dtype).forward; }
Bound vjp_bound(Op op, DType dtype) { return row(op, dtype).vjp; }

}  // namespace tapewise::reference
