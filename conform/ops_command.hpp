// conform/ops_command.hpp — `tapewise-conform ops`: the op table this binary was built from
// (spec/ops.def), as a terminal table or as JSON for the scripts that do not read C++
// (conform/aten_parity.py, bench/bench_torch.py).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "report.hpp"  // Json

namespace CLI {
class App;
}  // namespace CLI

namespace tapewise::conform {

// Schema of the JSON: {"schema", "tapewise_version", "spec_sha256", "ops": [one object per node, in
// table order: name, index, arity, scalars (names), domain_log2_lo, domain_log2_hi, positive_only,
// kink, bench_inputs, aten_parity, run_scalars, graded_scalars, edge_scalars (each a list of
// {scalar name: value}), staged], "dtypes": [float32, float64, bfloat16, float16], "bounds": [one
// object per node and dtype: op, dtype, eps (the abs term's unit: 2^-23, 2^-52, 2^-7, 2^-10),
// forward and vjp ({ulp, abs})]}. The words and numbers are spec/ops.def's and spec/bounds.def's
// (the keys after "ops" were added within schema 1: a reader of the first keys is unaffected).
inline constexpr const char* kOpTableSchema = "tapewise-conform.ops/1";
Json op_table_json();

// Adds `ops [--json FILE]` to `app`; the function returned runs it when it was given (its exit
// status), else returns nullopt. FILE "-" is standard output.
std::function<std::optional<int>()> add_ops_subcommand(CLI::App& app);

}  // namespace tapewise::conform
