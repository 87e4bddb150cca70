// cuda/tape/staging.hpp — spec/stagings.def read as data: each node's forward and VJP as a list of
// stages, one primitive buffer op each (parsed once, checked: names defined before use, each output
// written once). staged_vjp.cpp runs them; the tests compare their text with spec/ops.def and
// spec/conventions.md.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <tapewise/core.hpp>
#include <tapewise/op.hpp>

#include "kernels/prim.hpp"

namespace tapewise::staging {

enum class Pass : std::uint8_t { forward, vjp };

/// A stage's constant, resolved against the node's scalars and the dtype by value_in().
struct Constant {
  enum class Kind : std::uint8_t { none, literal, scalar0, scalar1, rounded, tripled } kind = Kind::none;
  double value = 0.0;  ///< literal, rounded: the value; tripled: v of R(3 * R(v))
  /// The double handed to the prim (which rounds it once to the dtype).
  double value_in(DType d, const Scalars& s) const;
};

/// One stage: `result = prim(operands..., constant)`. Operands and result are slots: the node's
/// inputs first (x, or a and b; then g for a VJP), then its outputs (y, or dx, or da and db), then
/// the workspace buffers in the order the stages define them.
struct Stage {
  Prim prim = Prim::copy;
  int result = 0;
  std::array<int, 3> operands = {-1, -1, -1};
  Constant constant;
  std::string text;  ///< as written in the file, e.g. "ws p = x > z"
};

struct Staging {
  Op op = Op::add;
  Pass pass = Pass::forward;
  int inputs = 0, outputs = 0, workspace = 0;  ///< slot counts, in slot order
  std::vector<Stage> stages;
  std::vector<std::string> workspace_names;  ///< in slot order
  std::string text;                          ///< the file's text for this node and pass
};

/// The node's staging for the pass, parsed and checked on first use; the error names the node, the
/// stage and what is wrong with it.
[[nodiscard]] Result<const Staging*> staging_of(Op op, Pass pass);

/// Parses one staging's text (what staging_of does with the file's rows); public for the tests.
[[nodiscard]] Result<Staging> parse_staging(Op op, Pass pass, const std::string& text);

}  // namespace tapewise::staging
