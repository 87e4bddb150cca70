// proptest/fuzz/special_points_fuzz.cpp — libFuzzer harness of the spec/special_points parser
// (reference/special_points.hpp, parse_special_points from text) on any text: rows or an error,
// never a crash, a leak or UB; every accepted row fits its op's arity.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "special_points.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = tapewise::parse_special_points(text, "fuzz");
  if (!spec) return 0;
  for (const tapewise::SpecialPoint& p : spec->points) {
    const int arity = tapewise::op_info(p.op).arity;
    const std::size_t expected = p.same ? 1 : static_cast<std::size_t>(arity);
    if (p.inputs.size() != expected || p.grads.size() != expected || p.line < 1) std::abort();
  }
  return 0;
}
