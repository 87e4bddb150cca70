// conform/commands.hpp — the subcommands of tapewise-conform (run, audit, eval, vectors,
// check), their options, and what they share: exit codes, op/dtype selection, finding spec files.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cases.hpp"  // kMaxCases
#include "exec.hpp"
#include "files.hpp"
#include "graph.hpp"  // graph: GraphCommandOptions, graph_command
#include "special_points.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace tapewise::conform {

// Exit status of every subcommand: kUsageError also stands for "no verdict" (nothing graded).
enum ExitCode : int { kConforms = 0, kViolation = 1, kUsageError = 2 };

// --quiet: main sends the human text (standard output) to /dev/null; the commands also leave out
// what they say on stderr that is not an error, a warning or a reason for no verdict.
inline bool& quiet_mode() {
  static bool quiet = false;
  return quiet;
}

struct Selection {
  std::vector<Op> ops;        // in op-table order
  std::vector<DType> dtypes;  // in kDTypes order: float32, float64, bfloat16, float16
};
// The dtypes of the subcommands: run, vectors, eval, audit, sweep and prove cover all four.
// ops: "all" for every node, else a comma-separated list of node names; dtype: "all" for every dtype
// in `covered`, else those of them named (one, or a comma-separated list; cases.hpp:
// dtype_from_name), in the order of `covered`. An empty value or item is an error.
[[nodiscard]] Result<Selection> parse_selection(const std::string& ops, const std::string& dtype,
                                                std::span<const DType> covered = kDTypes);
[[nodiscard]] Result<BackendChoice> parse_backend(const std::string& name);
// --math: "" (the backend's default), aten or exact.
[[nodiscard]] Result<std::optional<MathMode>> parse_math(const std::string& name);

// Where spec/special_points is: `given` (--special-points) when not empty; else
// <folder of this binary>/../share/tapewise/special_points (the install layout, which the build tree
// has too, so a copied build or install tree works); else ./spec/special_points. No path of the
// machine that built the binary is consulted.
[[nodiscard]] Result<std::string> find_special_points(const std::string& given);
// Reads the file `find_special_points` found. It must be a regular file of at most
// kMaxSpecialPointsBytes holding at least one row: an empty file (or a folder) grades nothing and
// must not pass for a conforming run.
[[nodiscard]] Result<SpecialPoints> load_spec_points(const std::string& path);
// Every selected node and dtype must have rows in `spec` (read from `path`): a pass of a node with no
// special point would say nothing of its conventions. The error names each one missing.
[[nodiscard]] Result<void> require_rows_for(const SpecialPoints& spec, const Selection& selection,
                                            const std::string& path);
inline constexpr std::uint64_t kMaxSpecialPointsBytes = std::uint64_t{16} << 20;  // the spec's is ~43 KB

// --cases: a whole number in decimal from 0 to kMaxCases; --seed: one from 0 to 2^64-1 (never a
// negative number wrapped around). `option` names the option in messages.
[[nodiscard]] Result<std::int64_t> parse_cases(const std::string& text, const std::string& option);
// A whole number in decimal digits only (no sign, spaces, hex, exponent or fraction) from `min` to
// `max`, e.g. sweep's --devices 1..64; the message names `option`, the text given and the range.
[[nodiscard]] Result<std::int64_t> parse_whole_number(const std::string& text, const std::string& option,
                                                      std::int64_t min, std::int64_t max);
[[nodiscard]] Result<std::uint64_t> parse_seed(const std::string& text, const std::string& option);

struct RunOptions {
  Selection selection;
  BackendChoice backend = BackendChoice::automatic;
  std::optional<MathMode> math;  // --math; none: the backend's default (CUDA aten, CPU exact)
  std::int64_t cases = 0;
  std::uint64_t seed = 0;
  std::string json_path;
  std::string junit_path;  // --junit: JUnit XML, one test case per node and dtype
  std::string special_points_path;
};
int run_command(const RunOptions& options);

struct AuditOptions {
  Selection selection;
  BackendChoice backend = BackendChoice::automatic;
  std::optional<MathMode> math;  // --math; none: the backend's default (CUDA aten, CPU exact)
  std::string markdown_path;  // empty: the terminal table only
  std::string json_path;      // empty: none; "-": standard output (the text then goes to stderr)
  std::string junit_path;     // --junit: JUnit XML, one test case per node and dtype
  std::string special_points_path;
};
int audit_command(const AuditOptions& options);

struct EvalOptions {
  std::string op;
  BackendChoice backend = BackendChoice::automatic;
  std::optional<MathMode> math;  // --math; none: the backend's default (CUDA aten, CPU exact)
  std::string x, a, b, g;  // .npy paths
  bool same = false;       // a binary node recorded as op(a, a): --a only, one total gradient da
  std::map<std::string, double> scalars;  // --NAME VALUE, for the scalar names of the op table
  VjpPath path = VjpPath::fused;
  std::string out_dir = ".";
  std::string prefix;  // prepended to the output file names (check's layout uses "out_")
  // Empty: the files' dtype, whatever it is. Else every file must be of this dtype; "bfloat16"
  // also lets '<u2' files hold bfloat16 bits (npy.hpp), the only way .npy carries bfloat16.
  std::string dtype;
};
int eval_command(const EvalOptions& options);

struct VectorsOptions {
  std::string dir;
  Selection selection;
  std::int64_t cases = 0;
  std::uint64_t seed = 0;
  std::string special_points_path;
};
int vectors_command(const VectorsOptions& options);

struct CheckOptions {
  std::string dir;
  std::string json_path;
  std::string junit_path;
  std::string special_points_path;  // the special suites are regraded from this file, never from the folder's
};
int check_command(const CheckOptions& options);

// `sweep` (sweep.cpp): adds the subcommand and its options to `app`; the function returned runs it
// after parsing when it was chosen and gives its exit status (nullopt when another one was).
std::function<std::optional<int>()> add_sweep_subcommand(CLI::App& app);

// Per-node, per-dtype default count of random cases (run, vectors): sized so that the default run
// finishes in well under a minute on two CPU cores.
inline constexpr std::int64_t kDefaultCases = 10000;

// Runs a subcommand; anything it still throws (a filesystem or JSON error, out of memory) becomes
// a message and the usage-error exit status rather than an abort.
template <class Body>
int guarded(const char* command, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    std::cerr << "tapewise-conform " << command << ": out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "tapewise-conform " << command << ": " << escaped(e.what()) << "\n";
  }
  return kUsageError;
}

}  // namespace tapewise::conform
