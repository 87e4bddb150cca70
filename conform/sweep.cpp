// conform/sweep.cpp — `tapewise-conform sweep`: plans one job per node, dtype and run scalar
// set, drives the production kernels chunk by chunk over the case range (on one or several devices,
// or the CPU), re-checks the worst cases and one case of each cause with MPFR, validates the sweep's
// reference against MPFR, and prints the table, the causes and the JSON. The grading itself, and the
// causes, are sweep_reference.hpp, on the device or in host loops.
// Here: its options and steps; the engine, the MPFR re-checks and the report are sweep_engine.cpp,
// sweep_recheck.cpp and sweep_report.cpp (their shared names: sweep_internal.hpp).
#include "sweep_internal.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "commands.hpp"

namespace tapewise::conform {

namespace {

// A verdict needs every planned sweep to hold cases (a --range past a node's cases holds none) and
// the reference to be validated against MPFR on at least one value.
[[nodiscard]] Result<void> require_cases(const std::vector<Plan>& plans, const SweepOptions& o) {
  const bool uses_reference =
      std::any_of(plans.begin(), plans.end(), [](const Plan& p) { return p.method != Method::host_mpfr; });
  if (uses_reference && o.validate == 0) return fail(ErrorCode::InvalidArgument, "--validate 0 leaves the sweep's reference unchecked; a verdict needs at least 1");
  std::string empty;
  for (const Plan& p : plans)
    if (p.cases() == 0) empty += (empty.empty() ? "" : ", ") + node_label(p) + " " + dtype_name(p.dtype);
  if (empty.empty()) return {};
  return fail(ErrorCode::InvalidArgument, "no case to sweep for " + empty +
                                              (o.range_given ? " (--range lies past their cases)" : "") +
                                              "; a verdict needs at least one per node");
}

// After the run: an output with no graded value, or a validation of no value, cannot pass.
std::string missing_evidence(const std::vector<NodeResult>& nodes, const Validation& v) {
  const bool uses_reference = std::any_of(nodes.begin(), nodes.end(),
                                         [](const NodeResult& n) { return n.plan.method != Method::host_mpfr; });
  if (uses_reference && v.values == 0) return "the sweep's reference was validated on no value";
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs) {
      unsigned long long graded = 0;
      for (int b = 0; b < kBucketCount; ++b) graded += o.tally.histogram[b];
      if (graded == 0)
        return node_label(n.plan) + " " + dtype_name(n.plan.dtype) + " " + output_name(n.plan.op, o.request.output) +
               ": no value graded";
    }
  return "";
}

}  // namespace

[[nodiscard]] Result<std::pair<std::uint64_t, std::uint64_t>> parse_sweep_range(const std::string& text) {
  const auto colon = text.find(':');
  auto number = [](std::string part) -> std::optional<std::uint64_t> {
    int base = 10;
    if (part.starts_with("0x") || part.starts_with("0X")) {
      part = part.substr(2);
      base = 16;
    }
    std::uint64_t v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v, base);
    if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size()) return std::nullopt;
    return v;
  };
  const auto bad = [&] { return fail(ErrorCode::InvalidArgument, "--range: '" + text + "' is not LO:HI (decimal or 0x hex, LO < HI <= 2^32)"); };
  if (colon == std::string::npos) return bad();
  const auto lo = number(text.substr(0, colon)), hi = number(text.substr(colon + 1));
  if (!lo || !hi || *lo >= *hi || *hi > kFullRange) return bad();
  return std::pair{*lo, *hi};
}

int sweep_command(const SweepOptions& o) {
  for (const auto& [path, option] : {std::pair{o.json_path, "--json"}, std::pair{o.junit_path, "--junit"}})
    if (!path.empty())
      if (auto ok = check_output(path, option); !ok) {
        std::cerr << "tapewise-conform sweep: " << ok.error().message << "\n";
        return kUsageError;
      }
  auto workers = open_backends(o);
  if (!workers) {
    std::cerr << "tapewise-conform sweep: " << workers.error().str() << "\n";
    return kUsageError;
  }
  Workers& w = *workers;
  if (o.devices > 1 && w.name != "cuda") {
    std::cerr << "tapewise-conform sweep: --devices " << o.devices << " splits a sweep over CUDA devices, but the backend is "
              << w.name << " (" << w.why << "); give --devices 1 or --backend cuda\n";
    return kUsageError;
  }
  const std::int64_t chunk = o.chunk > 0 ? o.chunk : default_chunk(w);
  const std::vector<Plan> plans = make_plans(o, math_mode(*w.backends.front()));
  if (auto empty = require_cases(plans, o); !empty) {
    std::cerr << "tapewise-conform sweep: " << empty.error().message << "\n";
    return kUsageError;
  }
  if (auto duration = check_cpu_duration(w, plans, o); !duration) {
    std::cerr << "tapewise-conform sweep: " << duration.error().message << "\n";
    return kUsageError;
  }
  print_plans(std::cout, w, o, chunk, plans);
  const std::vector<NodeResult> nodes = sweep_plans(w, plans, chunk);

  auto validation = validate_reference(plans, o, w.name == "cuda");
  if (!validation) {
    std::cerr << "tapewise-conform sweep: validation: " << validation.error().str() << "\n";
    return kUsageError;
  }
  print_table(std::cout, nodes);
  print_rechecks(std::cout, nodes);
  print_causes(std::cout, nodes);
  print_validation(std::cout, *validation);
  for (const NodeResult& n : nodes)
    std::cout << text("time %-9s %-8s %.2f s\n", node_label(n.plan).c_str(), dtype_name(n.plan.dtype), n.seconds);
  const bool ok = print_verdict(std::cout, nodes, *validation);
  if (const std::string missing = missing_evidence(nodes, *validation); ok && !missing.empty()) {
    std::cerr << "tapewise-conform sweep: no verdict: " << missing << "\n";
    return kUsageError;
  }

  if (!o.json_path.empty())
    if (auto r = write_json_output(o.json_path, "--json", sweep_report_json(w, o, nodes, *validation, ok)); !r) {
      std::cerr << "tapewise-conform sweep: " << r.error().str() << "\n";
      return kUsageError;
    }
  if (!o.junit_path.empty())
    if (auto r = write_junit(o.junit_path, "sweep", sweep_junit_cases(o, nodes, *validation)); !r) {
      std::cerr << "tapewise-conform sweep: " << r.error().str() << "\n";
      return kUsageError;
    }
  return ok ? kConforms : kViolation;
}

namespace {

// The sweep's command line, as text until parsed (CLI11 would wrap negative numbers around).
struct SweepCli {
  std::string ops = "all", dtype = "float32", backend = "auto", math, range, json, junit, seed = "20261130";
  std::string devices = "1", pair_log2 = "16", float64_log2 = "32", host_cases = "20000", validate = "1000000",
              chunk = "0", stride = "1";
  bool float64_mpfr = false, allow_long = false;
};

// The numeric options, each strictly decimal within its range (parse_whole_number).
[[nodiscard]] Result<void> read_numbers(const SweepCli& cli, SweepOptions& o) {
  TAPEWISE_TRY(devices, parse_whole_number(cli.devices, "--devices", 1, 64));
  TAPEWISE_TRY(stride, parse_whole_number(cli.stride, "--stride", 1, std::int64_t{1} << 31));
  TAPEWISE_TRY(pair_log2, parse_whole_number(cli.pair_log2, "--pair-log2", 0, 16));
  TAPEWISE_TRY(float64_log2, parse_whole_number(cli.float64_log2, "--float64-log2", 0, 32));
  TAPEWISE_TRY(host_cases, parse_whole_number(cli.host_cases, "--host-cases", 0, kMaxCases));
  TAPEWISE_TRY(validate, parse_whole_number(cli.validate, "--validate", 0, kMaxCases));
  TAPEWISE_TRY(chunk, parse_whole_number(cli.chunk, "--chunk", 0, std::int64_t{1} << 30));
  o.devices = static_cast<int>(devices);
  o.stride = static_cast<std::uint32_t>(stride);
  o.pair_log2 = static_cast<int>(pair_log2);
  o.float64_log2 = static_cast<int>(float64_log2);
  o.host_cases = host_cases;
  o.validate = validate;
  o.chunk = chunk;
  return {};
}

int usage(const std::string& message) {
  std::cerr << "tapewise-conform sweep: " << message << "\n";
  return kUsageError;
}

// --ops: node names, each of which must have a sweep reference (sweep_reference.hpp); or all, unary
// or binary: every node (of that arity) that has one, the others noted as not swept.
[[nodiscard]] Result<void> choose_nodes(const std::string& ops, const Selection& selection, SweepOptions& o) {
  const bool by_arity = ops == "unary" || ops == "binary";
  const bool every = ops.empty() || ops == "all" || by_arity;
  for (const OpInfo& info : kOps) {
    const bool selected = std::find(selection.ops.begin(), selection.ops.end(), info.op) != selection.ops.end();
    if (!selected || (by_arity && info.arity != (ops == "unary" ? 1 : 2))) continue;
    if (has_sweep_reference(info.op)) {
      o.ops.push_back(info.op);
    } else if (every) {
      o.not_swept.push_back(info.op);
    } else {
      return fail(ErrorCode::InvalidArgument,
                  std::string("--ops: ") + info.name +
                      " has no sweep reference yet (reference/sweep_reference.hpp transcribes each node the "
                      "sweep grades; spec/bounds.def records it as TAPEWISE_NOT_SWEPT)");
    }
  }
  if (o.ops.empty()) return fail(ErrorCode::InvalidArgument, "--ops '" + ops + "': no node with a sweep reference");
  return {};
}

int run_sweep_cli(const SweepCli& cli) {
  SweepOptions o;
  const bool by_arity = cli.ops == "unary" || cli.ops == "binary";
  auto selection = parse_selection(by_arity ? "all" : cli.ops, cli.dtype);
  if (!selection) return usage(selection.error().message);
  auto backend = parse_backend(cli.backend);
  if (!backend) return usage(backend.error().message);
  auto math = parse_math(cli.math);
  if (!math) return usage(math.error().message);
  o.math = *math;
  auto seed = parse_seed(cli.seed, "--seed");
  if (!seed) return usage(seed.error().message);
  if (auto chosen = choose_nodes(cli.ops, *selection, o); !chosen) return usage(chosen.error().message);
  o.dtypes = selection->dtypes;
  o.backend = *backend;
  o.seed = *seed;
  if (!cli.range.empty()) {
    auto range = parse_sweep_range(cli.range);
    if (!range) return usage(range.error().message);
    o.range_given = true;
    o.range_lo = range->first;
    o.range_hi = range->second;
  }
  if (auto numbers = read_numbers(cli, o); !numbers) return usage(numbers.error().message);
  o.json_path = cli.json;
  o.junit_path = cli.junit;
  o.float64_mpfr = cli.float64_mpfr;
  o.allow_long = cli.allow_long;
  return sweep_command(o);
}

}  // namespace

std::function<std::optional<int>()> add_sweep_subcommand(CLI::App& app) {
  auto cli = std::make_shared<SweepCli>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "exhaustive accuracy sweep: every float32, bfloat16 and float16 input of each unary node (and every "
               "16-bit pair of each binary one) against spec/bounds.def");
  sweep->footer(
      "What is swept, per node and dtype (forward y and the fused VJP at g = 1 and g = R(0.7)):\n"
      "  unary float32     every bit pattern (2^32 cases; case index = the input's bits)\n"
      "  binary float32    every exponent pair x 2^pair-log2 random mantissas and signs\n"
      "  float64           2^float64-log2 random cases (random bit patterns and in-domain values; sin and\n"
      "                    cos below 2^20) against a double-double reference; with --float64-mpfr, the\n"
      "                    libm nodes get --host-cases random cases graded with MPFR on the host instead\n"
      "  unary 16-bit      every bit pattern (2^16 cases; case index = the input's bits)\n"
      "  binary 16-bit     every pair of bit patterns (2^32 cases; case index = a's bits << 16 | b's bits)\n"
      "                    (float16 is graded inside [2^-3, 2^3), spec/bounds.def's float16 domain)\n"
      "The sweep's reference is validated against MPFR (--validate cases), and every worst and violating\n"
      "case is re-checked with MPFR. --range LO:HI restricts the device sweeps to case indices [LO, HI)\n"
      "(a CPU slice, e.g. --backend cpu --range 0x3f000000:0x3f100000), --stride N to every N-th of them.\n"
      "Every value above its bound gets a cause: in_domain (inside spec/ops.def's domain), overflow or\n"
      "underflow (an exact intermediate of the staging leaves the dtype's range), or unexplained.\n"
      "Only nodes with a sweep reference (reference/sweep_reference.hpp) are swept: --ops naming\n"
      "another is a usage error; all, unary and binary leave the others out and the report lists them.\n"
      "On the CPU the sweep first times a sample of each node and prints its estimate on stderr; one\n"
      "estimated past 30 minutes (the defaults: hours) is refused unless --allow-long is given. When stdout\n"
      "is not a terminal, progress goes to stderr every 30 s with the time left. --devices N needs CUDA.\n"
      "A verdict needs cases: a --range past a node's cases, or --validate 0, is a usage error.\n"
      "Exit status: 0 every node conforms (no value above its bound inside the domain, none unexplained,\n"
      "outside it only causes spec/bounds.def accepts), 1 otherwise or a failed validation, 2 a usage or\n"
      "backend error.");
  sweep->add_option("--ops", cli->ops,
                    "comma-separated node names, or all, unary or binary (the nodes, of that arity, that have a "
                    "sweep reference)")
      ->capture_default_str();
  sweep->add_option("--dtype", cli->dtype, "float32, float64, bfloat16, float16 (comma-separated) or all")->capture_default_str();
  sweep->add_option("--backend", cli->backend, "auto, cpu or cuda")->capture_default_str();
  sweep->add_option("--math", cli->math, "aten (ATen's libm: CUDA's default) or exact (tapewise's own: the CPU backend's only mode)");
  sweep->add_option("--range", cli->range, "case indices LO:HI (decimal or 0x hex; unary float32 and 16-bit: the bit patterns)")
      ->type_name("LO:HI");
  sweep->add_option("--stride", cli->stride,
                    "every N-th case of the range (device sweeps): --stride 256 samples every exponent of a float32 "
                    "node with 2^24 cases")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_option("--devices", cli->devices, "split the range over this many GPUs of this host")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--json", cli->json, "write the report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  sweep->add_option("--junit", cli->junit, "write a JUnit XML report, one test case per node and dtype (- for standard output)")
      ->type_name("FILE|-");
  sweep->add_option("--pair-log2", cli->pair_log2, "binary float32: 2^N cases per exponent pair (0..16)")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--float64-log2", cli->float64_log2, "float64 on the device: 2^N random cases per node (0..32)")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_flag("--float64-mpfr", cli->float64_mpfr,
                  "grade the float64 libm nodes (exp sin cos log safeLog sigmoid tanh silu gelu softplus) with MPFR on "
                  "the host instead of the double-double reference");
  sweep->add_option("--host-cases", cli->host_cases, "with --float64-mpfr: cases per libm node")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--validate", cli->validate, "random cases for validating the sweep's reference against MPFR")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_option("--seed", cli->seed, "seed of the random cases")->type_name("UINT64")->capture_default_str();
  sweep->add_option("--chunk", cli->chunk, "elements per chunk (default 2^28 on CUDA, 2^20 on the CPU)")->type_name("N");
  sweep->add_flag("--allow-long", cli->allow_long,
                  "run a CPU sweep estimated to take longer than 30 minutes (refused without it)");
  return [sweep, cli]() -> std::optional<int> {
    if (!sweep->parsed()) return std::nullopt;
    return guarded("sweep", [&] { return run_sweep_cli(*cli); });
  };
}

}  // namespace tapewise::conform
