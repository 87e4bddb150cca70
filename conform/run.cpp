// conform/run.cpp — `tapewise-conform run`: every selected node and dtype on the production
// backend, graded against the MPFR reference and the spec's special points, with fused == staged,
// workspace leaks and throughput; one table row per node and dtype, a summary, an exit status.
#include <chrono>
#include <iostream>

#include <tapewise/version.hpp>

#include "commands.hpp"
#include "grade.hpp"
#include "report.hpp"

namespace tapewise::conform {

namespace {

// Batch kinds, mixed into each batch's seed (cases.hpp: batch_rng).
enum BatchKind : int { kDomain = 0, kBitPatterns = 1 };

// Elements of the throughput batch: enough to time a kernel rather than a launch.
std::int64_t throughput_elements(const ChosenBackend& be) { return be.name == "cuda" ? (1 << 24) : (1 << 16); }

void add_error(Row& row, const char* what, const Error& e) { row.errors.push_back(std::string(what) + ": " + e.str()); }

// Runs both VJP paths on `batch`, compares them bitwise, counts workspace leaks. Returns the fused
// outputs (the production path) when both ran.
std::optional<NodeOutputs> run_both_paths(Backend& backend, const Batch& batch, Row& row) {
  auto fused = run_node(backend, batch.op, batch.scalars, batch.inputs, &batch.g, VjpPath::fused);
  if (!fused) {
    add_error(row, "fused path", fused.error());
    return std::nullopt;
  }
  auto staged = run_node(backend, batch.op, batch.scalars, batch.inputs, &batch.g, VjpPath::staged, &*row.leaks);
  if (!staged) {
    add_error(row, "staged path", staged.error());
    return std::nullopt;
  }
  compare_paths(batch, *fused, *staged, *row.fused_vs_staged);
  return std::move(*fused);
}

void run_special_points(const ChosenBackend& be, const SpecialPoints& spec, Row& row) {
  for (const SpecialPoint& p : spec.points) {
    if (p.op != row.op || p.dtype != row.dtype) continue;
    ++row.special.total;
    std::string failure;
    for (VjpPath path : {VjpPath::fused, VjpPath::staged}) {
      const char* path_name = path == VjpPath::fused ? "fused" : "staged";
      auto produced = run_special_point(be.backend, p, path);
      if (!produced) {
        failure += std::string(failure.empty() ? "" : "; ") + path_name + ": " + produced.error().str();
        continue;
      }
      const PointVerdict v = grade_special_point(p, *produced);
      if (!v.passes()) failure += std::string(failure.empty() ? "" : "; ") + path_name + ": " + v.mismatch_text(p, *produced);
    }
    if (failure.empty()) {
      ++row.special.passed;
    } else {
      row.special.failures.push_back("spec/special_points:" + std::to_string(p.line) + ": " + failure);
    }
  }
}

Row run_row(const ChosenBackend& be, Op op, DType dtype, const RunOptions& options, const SpecialPoints& spec,
            Progress& progress) {
  Backend& backend = *be.backend;
  Row row = make_row(op, dtype, math_mode(backend));
  row.fused_vs_staged.emplace();
  row.leaks.emplace();
  const MemoryStats at_start = backend.stats();

  const std::vector<Scalars> sets = default_scalar_sets(op);
  const auto set_count = static_cast<std::int64_t>(sets.size());
  std::optional<Batch> first_domain_batch;
  for (std::int64_t k = 0; k < set_count; ++k) {
    const Scalars& s = sets[static_cast<std::size_t>(k)];
    const std::int64_t n = options.cases / set_count + (k < options.cases % set_count ? 1 : 0);

    std::mt19937_64 domain_rng = batch_rng(options.seed, op, dtype, static_cast<int>(k), kDomain);
    const Batch domain = domain_batch(op, dtype, s, n, domain_rng);
    if (auto fused = run_both_paths(backend, domain, row)) grade_against_reference(domain, *fused, row);
    progress.advance(n);
    if (!first_domain_batch) first_domain_batch = domain;

    // Bit patterns and special values: no reference bound applies there, but the two paths must
    // still give the same bits and release their workspace.
    std::mt19937_64 bits_rng = batch_rng(options.seed, op, dtype, static_cast<int>(k), kBitPatterns);
    run_both_paths(backend, bit_pattern_batch(op, dtype, s, std::max<std::int64_t>(n, 4096), bits_rng), row);
    run_both_paths(backend, special_value_batch(op, dtype, s), row);
  }

  run_special_points(be, spec, row);

  if (first_domain_batch && first_domain_batch->size() > 0) {
    const Batch timed = tiled(*first_domain_batch, throughput_elements(be));
    if (auto t = time_node(backend, op, timed.scalars, timed.inputs, timed.g)) {
      row.throughput = Throughput{t->elements, t->elements / t->forward_s, t->elements / t->vjp_s};
    } else {
      add_error(row, "throughput", t.error());
    }
  }

  if (!(backend.stats() == at_start))
    row.errors.push_back("buffers still live after the row: value " + std::to_string(backend.stats().count(AllocTag::value)) +
                         ", gradient " + std::to_string(backend.stats().count(AllocTag::gradient)) + ", workspace " +
                         std::to_string(backend.stats().count(AllocTag::workspace)));
  return row;
}

// Every selected node and dtype, each row printed as soon as it is done.
std::vector<Row> run_and_print_rows(const ChosenBackend& be, const RunOptions& options, const SpecialPoints& spec) {
  const TableLayout layout = table_layout(options.cases);  // a row grades exactly --cases random cases
  print_table_header(std::cout, layout);
  const std::int64_t total = options.cases * static_cast<std::int64_t>(options.selection.ops.size() *
                                                                       options.selection.dtypes.size());
  Progress progress(total, true);
  std::vector<Row> rows;
  for (Op op : options.selection.ops) {
    bool first = true;
    for (DType dtype : options.selection.dtypes) {
      progress.set_label(std::string(op_name(op)) + " " + dtype_name(dtype));
      const auto started = std::chrono::steady_clock::now();
      rows.push_back(run_row(be, op, dtype, options, spec, progress));
      rows.back().seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      progress.clear();
      print_table_row(std::cout, rows.back(), first, layout);
      std::cout << std::flush;
      first = false;
    }
  }
  progress.clear();
  return rows;
}

void print_run_summary(std::ostream& out, const std::vector<Row>& rows, const Summary& summary, double elapsed) {
  out << "\n";
  print_table_legend(out, true);
  print_violations(out, rows);
  char timing[96];
  std::snprintf(timing, sizeof timing, " (%d rows, %.1f s)", summary.rows, elapsed);
  out << "\n" << summary.line() << timing << "\n";
}

Json run_report_json(const RunOptions& options, const std::string& spec_path, const ChosenBackend& be,
                     const std::vector<Row>& rows, const Summary& summary, double elapsed) {
  Json report{{"schema", kReportSchema},
              {"command", "run"},
              {"tapewise_version", kVersion},
              {"spec_sha256", kSpecSha256},
              {"special_points_file", utf8_or_escaped(spec_path)},
              {"backend", Json{{"name", be.name}, {"description", be.backend->describe()}, {"why", be.why}, {"math", be.math()}}},
              {"seed", options.seed},
              {"cases", options.cases},
              {"ops", Json::array()},
              {"dtypes", Json::array()},
              {"rows", Json::array()},
              {"summary", summary_json(summary, elapsed)}};
  for (Op op : options.selection.ops) report["ops"].push_back(op_name(op));
  for (DType d : options.selection.dtypes) report["dtypes"].push_back(dtype_name(d));
  for (const Row& r : rows) report["rows"].push_back(row_json(r));
  return report;
}

}  // namespace

int run_command(const RunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto usage = [](const std::string& message) {
    std::cerr << "tapewise-conform: " << message << "\n";
    return kUsageError;
  };
  if (!options.json_path.empty())
    if (auto ok = check_output(options.json_path, "--json"); !ok) return usage(ok.error().message);
  if (!options.junit_path.empty())
    if (auto ok = check_output(options.junit_path, "--junit"); !ok) return usage(ok.error().message);
  const auto spec_path = find_special_points(options.special_points_path);
  if (!spec_path) return usage(spec_path.error().message);
  auto spec = load_spec_points(*spec_path);
  if (!spec) return usage(spec.error().message);
  if (!quiet_mode()) std::cerr << "special points: " << *spec_path << "\n";
  auto be = choose_backend(options.backend, options.math);
  if (!be) {
    std::cerr << "tapewise-conform: --backend cuda: " << be.error().str() << "\n";
    return kUsageError;
  }

  std::cout << "backend: " << be->backend->describe() << " — " << be->why << "; math " << be->math() << "\n"
            << "seed: " << options.seed << " (reproduce with --seed " << options.seed << "), " << options.cases
            << " random cases per node and dtype\n\n";
  const std::vector<Row> rows = run_and_print_rows(*be, options, *spec);
  const Summary summary = summarize(rows);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_run_summary(std::cout, rows, summary, elapsed);
  if (const auto missing = missing_evidence(rows, true); !summary.violates() && !missing.empty()) {
    for (const std::string& line : missing) std::cerr << "tapewise-conform: no verdict: " << line << "\n";
    return kUsageError;
  }

  if (!options.json_path.empty())
    if (auto ok = write_json_output(options.json_path, "--json",
                                    run_report_json(options, *spec_path, *be, rows, summary, elapsed));
        !ok) {
      std::cerr << "tapewise-conform: " << ok.error().message << "\n";
      return kUsageError;
    }
  if (!options.junit_path.empty())
    if (auto ok = write_junit(options.junit_path, "run", junit_cases(rows, "run")); !ok) return usage(ok.error().message);
  return summary.conforms() ? kConforms : kViolation;
}

}  // namespace tapewise::conform
