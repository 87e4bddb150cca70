// reference/bounds.cpp — the lookup over spec/bounds.def; the numbers live only in that table.
#include "bounds.hpp"

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

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

// spec/bounds.def holds four kinds of rows; each pass below reads one or two kinds and skips the
// others.
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
#undef TAPEWISE_NOT_SWEPT
#undef TAPEWISE_SWEPT
#undef TAPEWISE_BOUND

static_assert(sizeof(kSwept) / sizeof(kSwept[0]) == sizeof(kBounds) / sizeof(kBounds[0]),
              "spec/bounds.def: every TAPEWISE_BOUND row needs its TAPEWISE_SWEPT or TAPEWISE_NOT_SWEPT row");

template <class Row, std::size_t n>
const Row& row(const Row (&rows)[n], Op op, DType dtype, const char* kind) {
  for (const Row& r : rows)
    if (r.op == op && r.dtype == dtype) return r;
  throw std::logic_error(std::string("spec/bounds.def has no ") + kind + " row for " + op_name(op) + " " +
                         dtype_name(dtype));
}

}  // namespace

Bound forward_bound(Op op, DType dtype) { return row(kBounds, op, dtype, "TAPEWISE_BOUND").forward; }
Bound vjp_bound(Op op, DType dtype) { return row(kBounds, op, dtype, "TAPEWISE_BOUND").vjp; }
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
