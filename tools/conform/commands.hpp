// tools/conform/commands.hpp — the subcommands of tapewise-conform (run, audit, eval, vectors,
// check), their options, and what they share: exit codes, op/dtype selection, finding spec files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exec.hpp"
#include "special_points.hpp"

namespace tapewise::conform {

// Exit status of every subcommand.
enum ExitCode : int { kConforms = 0, kViolation = 1, kUsageError = 2 };

struct Selection {
  std::vector<Op> ops;        // in op-table order
  std::vector<DType> dtypes;  // float32 first
};
// ops: "" or "all" for every node, else a comma-separated list of node names; dtype: "all" (or
// ""), "float32"/"f32" or "float64"/"f64".
Result<Selection> parse_selection(const std::string& ops, const std::string& dtype);
Result<BackendChoice> parse_backend(const std::string& name);

// spec/special_points: `given` when not empty, else the source tree this binary was built from,
// else spec/ beside the binary's build folder (build/bin/../../spec), else ./spec.
Result<std::string> find_special_points(const std::string& given);
Result<SpecialPoints> load_spec_points(const std::string& given);

struct RunOptions {
  Selection selection;
  BackendChoice backend = BackendChoice::automatic;
  std::int64_t cases = 0;
  std::uint64_t seed = 0;
  std::string json_path;
  std::string special_points_path;
};
int run_command(const RunOptions& options);

struct AuditOptions {
  Selection selection;
  BackendChoice backend = BackendChoice::automatic;
  std::string markdown_path;  // empty: the terminal table only
  std::string special_points_path;
};
int audit_command(const AuditOptions& options);

struct EvalOptions {
  std::string op;
  BackendChoice backend = BackendChoice::automatic;
  std::string x, a, b, g;  // .npy paths
  bool same = false;       // a binary node recorded as op(a, a): --a only, one total gradient da
  std::optional<double> c, lo, hi, eps;
  VjpPath path = VjpPath::fused;
  std::string out_dir = ".";
  std::string prefix;  // prepended to the output file names (check's layout uses "out_")
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
};
int check_command(const CheckOptions& options);

// Per-node, per-dtype default count of random cases (run, vectors): sized so that the default run
// finishes in well under a minute on two CPU cores.
inline constexpr std::int64_t kDefaultCases = 10000;

}  // namespace tapewise::conform
