// tapewise/op.hpp — the node vocabulary, generated from the op table (spec/ops.def, installed as
// <tapewise/ops.def>).
// Only names, arities and scalar names live here; the formulas live in cuda/ and reference/.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace tapewise {

enum class Op {
#define TAPEWISE_OP(name, ...) name,
#include <tapewise/ops.def>
#undef TAPEWISE_OP
};

struct OpInfo {
  Op op;
  const char* name;
  int arity;
  const char* scalar_names[2];  // "" when unused
  int domain_log2_lo;
  int domain_log2_hi;
  bool positive_only;
  const char* staged;
  int scalar_count() const { return (scalar_names[0][0] ? 1 : 0) + (scalar_names[1][0] ? 1 : 0); }
};

inline constexpr OpInfo kOps[] = {
#define TAPEWISE_OP(name, arity, s0, s1, lo, hi, pos, staged) \
  OpInfo{Op::name, #name, arity, {s0, s1}, lo, hi, pos != 0, staged},
#include <tapewise/ops.def>
#undef TAPEWISE_OP
};

inline constexpr int kOpCount = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));

inline const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }
inline const char* op_name(Op op) { return op_info(op).name; }

inline std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOps)
    if (name == info.name) return info.op;
  return std::nullopt;
}

// Scalars arrive as host doubles; the backend rounds each once to the buffer dtype.
struct Scalars {
  double s0 = 0.0;
  double s1 = 0.0;
};

}  // namespace tapewise
