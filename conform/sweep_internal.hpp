// conform/sweep_internal.hpp — what the files of `tapewise-conform sweep` share: its options, plans,
// workers and results, and the steps one file runs for another. Private to conform/sweep*.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <iosfwd>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec.hpp"    // BackendChoice
#include "report.hpp"  // Json, JunitCase
#include "sweep.hpp"

namespace tapewise::conform {

struct SweepOptions {
  std::vector<Op> ops;        // in op-table order
  std::vector<Op> not_swept;  // --ops all, unary or binary: the nodes left out, without a sweep reference
  std::vector<DType> dtypes;  // float32 first
  bool range_given = false;
  std::uint64_t range_lo = 0, range_hi = 0;  // case indices [lo, hi), clamped to each node's count
  std::uint32_t stride = 1;                  // every stride-th case of the range (device sweeps)
  BackendChoice backend = BackendChoice::automatic;
  std::optional<MathMode> math;  // --math; none: the backend's default (CUDA aten, CPU exact)
  int devices = 1;
  std::string json_path;
  std::string junit_path;  // --junit: JUnit XML, one test case per node and dtype
  int pair_log2 = 16;                  // binary float32: 2^this cases per exponent pair (0..16)
  int float64_log2 = 32;               // float64 on the device: 2^this random cases per node (0..32)
  bool float64_mpfr = false;           // float64 libm nodes: MPFR on the host instead of double-double
  std::int64_t host_cases = 20000;     // ... that many cases per node
  std::int64_t validate = 1000000;     // reference vs MPFR: random cases in all
  std::uint64_t seed = 20261130;
  std::int64_t chunk = 0;              // elements per chunk; 0: 2^28 on CUDA, 2^20 on the CPU
  bool allow_long = false;             // run a CPU sweep estimated past kCpuSweepLimitSeconds
};
// A CPU sweep estimated to take longer than this is refused without --allow-long: the defaults
// sweep 2^32 cases per node, hours on a CPU, which nobody means by accident.
inline constexpr double kCpuSweepLimitSeconds = 30 * 60;
int sweep_command(const SweepOptions& options);
// "LO:HI", each decimal or 0x-hex, HI <= 2^32, LO < HI.
[[nodiscard]] Result<std::pair<std::uint64_t, std::uint64_t>> parse_sweep_range(const std::string& text);

using namespace sweep;

// Named, where one file's anonymous namespace was, so that the four files can share these; a
// namespace of their own keeps them apart from the rest of the runner's names.
namespace sweep_internal {

// printf into a string (the table's columns).
template <class... Args>
std::string text(const char* format, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

constexpr std::uint64_t kFullRange = std::uint64_t{1} << 32;
constexpr double kSecondG = 0.7;  // the second upstream value, R(0.7) in the dtype: not a power of two

enum class Method { device_exhaustive, device_every_pair, device_pairs, device_random, host_mpfr };

struct Plan {
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;  // as given to the backend
  Method method = Method::device_exhaustive;
  Job job;
  std::uint64_t lo = 0, hi = 0;  // case indices [lo, hi), every stride-th (job.case_stride)
  std::vector<OutputRequest> outputs;
  std::uint64_t cases() const { return (hi - lo + job.case_stride - 1) / job.case_stride; }
};

struct Workers {
  std::vector<std::shared_ptr<Backend>> backends;
  std::vector<std::unique_ptr<ChunkEngine>> engines;  // made per plan (slot counts differ)
  std::string name, why;
};

// A rechecked worst case: the sweep's reading beside MPFR's.
struct Recheck {
  std::string why;  // "worst in domain", "worst finite", "worst ratio", "above bound", "<cause> example"
  std::uint32_t index = 0;
  Inputs in;
  double produced = 0, expected = 0;  // expected: R(exact) by MPFR
  double mpfr_ulps = 0, mpfr_ratio = 0;
  bool mpfr_within = true;
  double sweep_ulps = 0;
  bool sweep_within = true;
  bool agrees = true;  // the sweep's verdict equals MPFR's
  int cause = kCauseInDomain;  // of a value above its bound (sweep_reference.hpp, cause_of)
};

struct OutputResult {
  OutputRequest request;
  OutputTally tally{};
  std::vector<Recheck> rechecks;
};

struct NodeResult {
  Plan plan;
  double seconds = 0;
  std::vector<OutputResult> outputs;
  std::string error;
};

struct Validation {
  std::int64_t values = 0;
  std::int64_t failures = 0;
  double max_error_ulps = 0;         // |reference - exact| / ulp_of(R(exact)), host copy
  double max_device_error_ulps = 0;  // the device's copy (CUDA only)
  bool device_checked = false;
  std::vector<std::string> examples;
};

// sweep_engine.cpp
[[nodiscard]] Result<Workers> open_backends(const SweepOptions& o);
std::vector<Plan> make_plans(const SweepOptions& o, MathMode math);
std::int64_t default_chunk(const Workers& w);
[[nodiscard]] Result<void> check_cpu_duration(Workers& w, const std::vector<Plan>& plans, const SweepOptions& o);
std::vector<NodeResult> sweep_plans(Workers& w, const std::vector<Plan>& plans, std::int64_t chunk);

// sweep_recheck.cpp
[[nodiscard]] Result<void> recheck_with_mpfr(Backend& backend, NodeResult& node);
[[nodiscard]] Result<std::vector<OutputTally>> grade_on_host_with_mpfr(Backend& backend, const Plan& p);
[[nodiscard]] Result<Validation> validate_reference(const std::vector<Plan>& plans, const SweepOptions& o,
                                                    bool on_device);

// sweep_report.cpp
const char* output_name(Op op, int output);
std::string node_label(const Plan& p);
std::string duration_text(double seconds);
const char* cause_name(int cause);
void print_plans(std::ostream& out, const Workers& w, const SweepOptions& o, std::int64_t chunk,
                 const std::vector<Plan>& plans);
void print_table(std::ostream& out, const std::vector<NodeResult>& nodes);
void print_rechecks(std::ostream& out, const std::vector<NodeResult>& nodes);
void print_causes(std::ostream& out, const std::vector<NodeResult>& nodes);
void print_validation(std::ostream& out, const Validation& v);
bool print_verdict(std::ostream& out, const std::vector<NodeResult>& nodes, const Validation& v);
Json sweep_report_json(const Workers& w, const SweepOptions& o, const std::vector<NodeResult>& nodes,
                       const Validation& v, bool conforms);

}  // namespace sweep_internal

using namespace sweep_internal;

// sweep_report.cpp
std::vector<JunitCase> sweep_junit_cases(const SweepOptions& o, const std::vector<NodeResult>& nodes, const Validation& v);

}  // namespace tapewise::conform
