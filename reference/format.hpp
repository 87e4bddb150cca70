// reference/format.hpp — each dtype's binary format, the one table the reference rounds to
// (reference.cpp) and the runner's input generators draw from (conform/library/cases.cpp).
// Light on purpose: no multiprecision header comes with it.
#pragma once

#include "tapewise/core.hpp"

namespace tapewise::reference {

// A dtype's binary format: significand bits p (with the implicit one), emin and emax.
struct FloatFormat {
  int precision;
  int min_exponent;  // exponent of the smallest normal value
  int max_exponent;  // exponent of the largest finite value
};
FloatFormat format_of(DType dtype);

}  // namespace tapewise::reference
