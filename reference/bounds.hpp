// reference/bounds.hpp — each op's allowed error against the reference, read from spec/bounds.def
// (the only place a tolerance is written down). Not the check itself: that is measure.hpp.
#pragma once

#include "tapewise/core.hpp"
#include "tapewise/op.hpp"

namespace tapewise::reference {

// allowed |produced - exact| = ulp * ulp_of(R(exact)) + abs * eps(dtype) * w   (see measure.hpp)
struct Bound {
  double ulp = 0.0;
  double abs = 0.0;
};

Bound forward_bound(Op op, DType dtype);
Bound vjp_bound(Op op, DType dtype);

}  // namespace tapewise::reference
