// conform/vectors.cpp — `vectors` exports a conformance suite for other implementations
// (inputs, the reference's expected outputs, the spec's exact values at special points, as .npy
// files plus index.json); `check` grades another implementation's outputs in that layout with the
// same verdict logic and table as `run` (grade.hpp, report.hpp). The index is read by index.cpp;
// check reads only regular files inside the suite folders, by the names the schema defines.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <tapewise/version.hpp>

#include "cases.hpp"
#include "commands.hpp"
#include "files.hpp"
#include "grade.hpp"
#include "index.hpp"
#include "npy.hpp"
#include "reference.hpp"
#include "report.hpp"

namespace tapewise::conform {

namespace fs = std::filesystem;

namespace {

// One folder of the suite: one node, one dtype, one scalar set (and `same` for op(a, a) rows).
struct Suite {
  std::string id;
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;
  bool same = false;
  bool special = false;                           // graded bit for bit against `expected`; else against the reference
  Batch batch;                                    // inputs and g
  NodeOutputs expected;                           // y and the gradients
  std::vector<std::pair<int, std::string>> rows;  // special: (line, note) per element
};

bool same_scalars(const Scalars& a, const Scalars& b) {
  return std::memcmp(&a.s0, &b.s0, sizeof(double)) == 0 && std::memcmp(&a.s1, &b.s1, sizeof(double)) == 0;
}

// The reference's values rounded once to the dtype (the "expected" files of a random suite).
NodeOutputs reference_outputs(const Batch& batch) {
  using reference::Real;
  const int arity = op_info(batch.op).arity;
  std::vector<double> y;
  std::vector<std::vector<double>> grads(static_cast<std::size_t>(arity));
  for (std::int64_t i = 0; i < batch.size(); ++i) {
    Real in[2];
    for (int k = 0; k < arity; ++k) in[k] = reference::real(batch.inputs[static_cast<std::size_t>(k)].as_double(i));
    const std::span<const Real> in_span(in, static_cast<std::size_t>(arity));
    y.push_back(
        reference::round_to_dtype(reference::forward(batch.op, batch.dtype, batch.scalars, in_span), batch.dtype));
    const auto d = reference::vjp(batch.op, batch.dtype, batch.scalars, in_span, reference::real(batch.g.as_double(i)));
    for (int k = 0; k < arity; ++k)
      grads[static_cast<std::size_t>(k)].push_back(
          reference::round_to_dtype(d[static_cast<std::size_t>(k)], batch.dtype));
  }
  NodeOutputs out;
  out.y = host_array(batch.dtype, y);
  for (const auto& g : grads) out.grads.push_back(host_array(batch.dtype, g));
  return out;
}

std::vector<Suite> special_suites(Op op, DType dtype, const SpecialPoints& spec) {
  std::vector<Suite> suites;
  for (const SpecialPoint& p : spec.points) {
    if (p.op != op || p.dtype != dtype) continue;
    Suite* suite = nullptr;
    for (Suite& s : suites)
      if (s.same == p.same && same_scalars(s.scalars, p.scalars)) suite = &s;
    if (!suite) {
      suites.emplace_back();
      suite = &suites.back();
      suite->op = op;
      suite->dtype = dtype;
      suite->scalars = p.scalars;
      suite->same = p.same;
      suite->special = true;
      suite->id = std::string(op_name(op)) + "_" + dtype_name(dtype) + "_special" + std::to_string(suites.size() - 1);
    }
    suite->rows.push_back({p.line, p.note});
  }
  // Fill the arrays from the rows, in file order.
  for (Suite& s : suites) {
    std::vector<std::vector<double>> inputs(s.same ? 1 : static_cast<std::size_t>(op_info(op).arity));
    std::vector<double> g, y;
    std::vector<std::vector<double>> grads(s.same ? 1 : static_cast<std::size_t>(op_info(op).arity));
    for (const SpecialPoint& p : spec.points) {
      if (p.op != op || p.dtype != dtype || p.same != s.same || !same_scalars(p.scalars, s.scalars)) continue;
      for (std::size_t k = 0; k < inputs.size(); ++k) inputs[k].push_back(p.inputs[k]);
      g.push_back(p.g);
      y.push_back(p.y);
      for (std::size_t k = 0; k < grads.size(); ++k) grads[k].push_back(p.grads[k]);
    }
    s.batch.op = op;
    s.batch.dtype = dtype;
    s.batch.scalars = s.scalars;
    for (const auto& in : inputs) s.batch.inputs.push_back(host_array(dtype, in));
    s.batch.g = host_array(dtype, g);
    s.expected.y = host_array(dtype, y);
    for (const auto& gr : grads) s.expected.grads.push_back(host_array(dtype, gr));
  }
  return suites;
}

// The suite's folder inside `dir`: created when missing; an existing symbolic link there is refused
// (the files would land wherever it points).
[[nodiscard]] Result<fs::path> make_suite_folder(const fs::path& dir, const std::string& id) {
  const fs::path folder = dir / id;
  struct stat st {};
  if (::lstat(folder.c_str(), &st) == 0) {
    if (S_ISLNK(st.st_mode))
      return fail(ErrorCode::InvalidArgument, folder.string() + ": is a symbolic link; refusing to write through it");
    if (!S_ISDIR(st.st_mode)) return fail(ErrorCode::InvalidArgument, folder.string() + ": exists and is not a folder");
    return folder;
  }
  std::error_code ec;
  fs::create_directory(folder, ec);
  if (ec) return fail(ErrorCode::InvalidArgument, folder.string() + ": cannot create: " + ec.message());
  return folder;
}

[[nodiscard]] Result<void> write_suite(const fs::path& dir, const Suite& s, Json& index_entry) {
  const auto made = make_suite_folder(dir, s.id);
  TAPEWISE_CHECK(made);
  const fs::path folder = *made;
  Json inputs = Json::object(), expected = Json::object(), outputs = Json::object();
  const std::vector<std::string> in_names = suite_input_names(s.op, s.same);
  auto put = [&](Json& where, const std::string& key, const std::string& file, const HostArray& a) -> Result<void> {
    where[key] = file;
    return write_npy((folder / file).string(), a);
  };
  for (std::size_t k = 0; k < in_names.size(); ++k)
    if (auto ok = put(inputs, in_names[k], input_file(in_names[k]), s.batch.inputs[k]); !ok) return ok;
  if (auto ok = put(inputs, "g", input_file("g"), s.batch.g); !ok) return ok;
  if (auto ok = put(expected, "y", expected_file("y"), s.expected.y); !ok) return ok;
  outputs["y"] = output_file("y");
  const std::vector<std::string> names = suite_grad_names(s.op, s.same);
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (auto ok = put(expected, names[k], expected_file(names[k]), s.expected.grads[k]); !ok) return ok;
    outputs[names[k]] = output_file(names[k]);
  }
  index_entry = Json{{"id", s.id},
                     {"op", op_name(s.op)},
                     {"dtype", dtype_name(s.dtype)},
                     {"kind", s.special ? "special" : "random"},
                     {"grading", s.special ? "exact" : "reference"},
                     {"scalars", scalars_json(s.op, s.scalars)},
                     {"same", s.same},
                     {"count", s.batch.size()},
                     {"inputs", inputs},
                     {"expected", expected},
                     {"outputs", outputs}};
  if (s.special) {
    Json rows = Json::array();
    for (const auto& [line, note] : s.rows) rows.push_back(Json{{"line", line}, {"note", note}});
    index_entry["rows"] = rows;
  }
  return {};
}

// --- check: reading the layout back -----------------------------------------------------------

Suite suite_from_index(const IndexedSuite& entry) {
  Suite s;
  s.id = entry.id;
  s.op = entry.op;
  s.dtype = entry.dtype;
  s.scalars = entry.scalars;
  s.same = entry.same;
  s.special = entry.special;
  s.rows = entry.rows;
  s.batch.op = s.op;
  s.batch.dtype = s.dtype;
  s.batch.scalars = s.scalars;
  return s;
}

// The suite's folder, resolved: it must lie inside the vectors folder `root` (canonical), so a
// symbolic link named like a suite cannot send `check` elsewhere.
[[nodiscard]] Result<fs::path> resolved_suite_folder(const fs::path& root, const std::string& id) {
  std::error_code ec;
  const fs::path folder = fs::canonical(root / id, ec);
  if (ec) return fail(ErrorCode::InvalidArgument, (root / id).string() + ": " + ec.message());
  if (folder == root || !lies_within(root, folder))
    return fail(ErrorCode::InvalidArgument, (root / id).string() + ": leads outside the vectors folder");
  return folder;
}

// Reads `file` (a name the schema defines) from the resolved suite folder. A symbolic link must stay
// in the folder; anything but a regular file is refused by read_npy.
// A bfloat16 suite's files are '<u2' arrays of bfloat16 bits (npy.hpp).
[[nodiscard]] Result<HostArray> read_suite_file(const fs::path& folder, const std::string& file, DType dtype) {
  const fs::path path = folder / file;
  std::error_code ec;
  if (fs::is_symlink(path, ec)) {
    const fs::path target = fs::canonical(path, ec);
    if (ec || !lies_within(folder, target))
      return fail(ErrorCode::InvalidArgument,
                  path.string() + ": is a symbolic link that leads outside the suite folder");
  }
  return read_npy(path.string(), dtype == DType::bfloat16);
}

std::string check_shape(const HostArray& a, const Suite& s, const std::string& name) {
  if (a.dtype != s.dtype) return name + " is " + dtype_name(a.dtype) + ", the suite is " + dtype_name(s.dtype);
  if (!(a.shape == s.batch.g.shape))
    return name + " has shape " + a.shape.str() + ", the suite's inputs " + s.batch.g.shape.str();
  return "";
}

}  // namespace

int vectors_command(const VectorsOptions& o) {
  auto usage = [](const std::string& m) {
    std::cerr << "tapewise-conform vectors: " << m << "\n";
    return kUsageError;
  };
  if (o.dir.empty()) return usage("the output folder is empty (give a folder, e.g. vectors/)");
  const auto spec_path = find_special_points(o.special_points_path);
  if (!spec_path) return usage(spec_path.error().message);
  auto spec = load_spec_points(*spec_path);
  if (!spec) return usage(spec.error().message);
  if (!quiet_mode()) std::cerr << "special points: " << *spec_path << "\n";
  const fs::path dir(o.dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return usage(dir.string() + ": cannot create: " + ec.message());
  const std::string index_path = (dir / kIndexFile).string();
  if (auto ok = check_output(index_path, ""); !ok) return usage(ok.error().message);  // before the long part
  Json index{{"schema", kVectorsSchema},
             {"tapewise_version", kVersion},
             {"spec_sha256", kSpecSha256},
             {"seed", o.seed},
             {"cases", o.cases},
             {"note",
              "Each suite is a folder named by its id. Read the files under 'inputs', compute the node "
              "(op(a, a) when 'same'), and write every file under 'outputs' as a .npy of the suite's "
              "dtype and shape. 'random' suites are graded against the MPFR reference within "
              "spec/bounds.def; 'special' suites bit for bit against spec/special_points, whose values "
              "'expected' holds (any NaN matches any NaN). A suite left without outputs is not answered: "
              "no verdict. Then run: tapewise-conform check <this folder>."},
             {"suites", Json::array()}};
  std::int64_t files = 0;
  for (Op op : o.selection.ops) {
    for (DType dtype : o.selection.dtypes) {
      std::vector<Suite> suites;
      const std::vector<Scalars> sets = default_scalar_sets(op);
      const auto set_count = static_cast<std::int64_t>(sets.size());
      for (std::int64_t k = 0; k < set_count; ++k) {
        const std::int64_t n = o.cases / set_count + (k < o.cases % set_count ? 1 : 0);
        Suite s;
        s.op = op;
        s.dtype = dtype;
        s.scalars = sets[static_cast<std::size_t>(k)];
        s.id = std::string(op_name(op)) + "_" + dtype_name(dtype) + "_random" + std::to_string(k);
        // The same generator and seed as `run`: `vectors --seed S` holds the cases `run --seed S` grades.
        std::mt19937_64 rng = batch_rng(o.seed, op, dtype, static_cast<int>(k), 0);
        s.batch = domain_batch(op, dtype, s.scalars, n, rng);
        s.expected = reference_outputs(s.batch);
        suites.push_back(std::move(s));
      }
      for (Suite& s : special_suites(op, dtype, *spec)) suites.push_back(std::move(s));
      for (const Suite& s : suites) {
        Json entry;
        if (auto ok = write_suite(dir, s, entry); !ok) return usage(ok.error().message);
        files += static_cast<std::int64_t>(entry["inputs"].size() + entry["expected"].size());
        index["suites"].push_back(entry);
      }
    }
  }
  if (auto ok = write_json_output(index_path, "", index); !ok) return usage(ok.error().message);
  std::cout << "wrote " << index["suites"].size() << " suites (" << files << " .npy files) and "
            << index_path << "; seed " << o.seed << ", " << o.cases
            << " random cases per node and dtype\n";
  return kConforms;
}

namespace {

// The suite's own files (inputs and g): a broken one is an input error, not the implementation's
// fault. A special suite's expected values are not read: check takes them from spec/special_points.
[[nodiscard]] Result<void> read_suite_inputs(const fs::path& folder, const std::string& where, Suite& s) {
  auto g = read_suite_file(folder, input_file("g"), s.dtype);
  TAPEWISE_CHECK(g);
  s.batch.g = std::move(*g);
  if (s.batch.g.dtype != s.dtype) return fail(ErrorCode::InvalidArgument, where + ": g is not " + dtype_name(s.dtype));
  for (const std::string& name : suite_input_names(s.op, s.same)) {
    auto a = read_suite_file(folder, input_file(name), s.dtype);
    TAPEWISE_CHECK(a);
    if (auto why = check_shape(*a, s, name); !why.empty()) return fail(ErrorCode::InvalidArgument, where + ": " + why);
    s.batch.inputs.push_back(std::move(*a));
  }
  return {};
}

// Whether the implementation wrote any of the suite's outputs (a file, folder or link by that name):
// a suite with none of them was not answered.
bool any_output_present(const fs::path& folder, const Suite& s) {
  std::vector<std::string> names{"y"};
  for (const std::string& n : suite_grad_names(s.op, s.same)) names.push_back(n);
  for (const std::string& name : names) {
    struct stat st {};
    if (::lstat((folder / output_file(name)).c_str(), &st) == 0) return true;
  }
  return false;
}

// The implementation's outputs. Returns what is wrong ("" when all are there and well-formed): a
// missing or malformed output is the implementation's violation.
std::string read_outputs(const fs::path& folder, const std::string& where, const Suite& s, NodeOutputs& produced) {
  std::vector<std::string> names{"y"};
  for (const std::string& n : suite_grad_names(s.op, s.same)) names.push_back(n);
  for (const std::string& name : names) {
    auto a = read_suite_file(folder, output_file(name), s.dtype);
    if (!a) return a.error().message;
    if (auto why = check_shape(*a, s, "output " + name); !why.empty()) return where + ": " + why;
    (name == "y" ? produced.y : produced.grads.emplace_back()) = std::move(*a);
  }
  return "";
}

// The spec's row for element i of special suite s: the point of `spec` with the suite's op, dtype,
// scalars and `same`, and the element's inputs and g (bit for bit; NaN matches NaN). nullptr when
// the spec has none: the suite was written against another spec, or its inputs were changed.
const SpecialPoint* spec_point_for(const SpecialPoints& spec, const Suite& s, std::int64_t i) {
  for (const SpecialPoint& p : spec.points) {
    if (p.op != s.op || p.dtype != s.dtype || p.same != s.same || !same_scalars(p.scalars, s.scalars)) continue;
    if (!same_bits(p.g, s.batch.g.as_double(i), s.dtype)) continue;
    bool inputs_match = p.inputs.size() == s.batch.inputs.size();
    for (std::size_t k = 0; inputs_match && k < p.inputs.size(); ++k)
      inputs_match = same_bits(p.inputs[k], s.batch.inputs[k].as_double(i), s.dtype);
    if (inputs_match) return &p;
  }
  return nullptr;
}

// A special suite, element by element, bit for bit against the spec's own values: regraded from
// spec/special_points (`spec`, read from `spec_path`), never from the folder's expected_*.npy, which
// an implementation under test could have rewritten. An element that is no row of the spec is an
// input error.
[[nodiscard]] Result<void> grade_special_suite(const Suite& s, const SpecialPoints& spec, const std::string& spec_path,
                                               const std::string& where, const NodeOutputs& produced, Row& row) {
  for (std::int64_t i = 0; i < s.batch.size(); ++i) {
    const SpecialPoint* p = spec_point_for(spec, s, i);
    if (p == nullptr)
      return fail(ErrorCode::InvalidArgument,
                  where + ": element " + std::to_string(i) + " (inputs and g of " + input_file("g") +
                      " and the others) is not a row of " + spec_path + " for " + op_name(s.op) + " " +
                      dtype_name(s.dtype) + "; was the folder written against another spec, or its inputs changed?");
    ++row.special.total;
    const PointVerdict v = grade_special_point(*p, produced, i);
    if (v.passes()) {
      ++row.special.passed;
    } else {
      row.special.failures.push_back(s.id + "[" + std::to_string(i) + "] (spec/special_points:" + std::to_string(p->line) +
                                     "): " + v.mismatch_text(*p, produced, i));
    }
  }
  return {};
}

[[nodiscard]] Result<VectorsIndex> read_index(const fs::path& dir) {
  const std::string path = (dir / kIndexFile).string();
  auto text = read_small_file(path, kMaxIndexBytes);
  if (!text)
    return fail(ErrorCode::InvalidArgument, text.error().message + " (is this a folder written by `vectors`?)");
  return parse_vectors_index(*text, path);
}

// A suite written against another spec is still graded (by this build's reference and the expected
// values in its files), with a warning: its special points may not be this spec's.
void warn_if_other_spec(const VectorsIndex& index, const std::string& where) {
  if (index.spec_sha256 == kSpecSha256) return;
  std::cerr << "tapewise-conform check: warning: " << where;
  if (index.spec_sha256.empty()) {
    std::cerr << " does not say which spec it was written against (written before tapewise 0.2.0?)";
  } else {
    std::cerr << " was written against another spec (sha256 " << escaped_prefix(index.spec_sha256) << ", tapewise "
              << escaped_prefix(index.tapewise_version.empty() ? "?" : index.tapewise_version) << ")";
  }
  std::cerr << "; this build's spec is sha256 " << kSpecSha256 << "\n";
}

// Every suite of the index graded against the outputs beside it: one row per (op, dtype), in
// op-table order. A suite whose outputs are missing or malformed counts as errors of its row; an
// index or folder that cannot be read is an error of the whole check.
[[nodiscard]] Result<std::vector<Row>> grade_suites(const VectorsIndex& index, const fs::path& root,
                                                    const std::string& index_path, const SpecialPoints& spec,
                                                    const std::string& spec_path) {
  std::vector<Row> rows;  // one per (op, dtype), in op-table order
  auto row_for = [&](Op op, DType dtype) -> Row& {
    for (Row& r : rows)
      if (r.op == op && r.dtype == dtype) return r;
    // An implementation under check is held to the bounds every implementation of the spec meets:
    // aten mode's (exact mode's are tapewise's own functions').
    rows.push_back(make_row(op, dtype, MathMode::aten));
    return rows.back();
  };

  for (const IndexedSuite& entry : index.suites) {
    const auto started = std::chrono::steady_clock::now();
    Suite s = suite_from_index(entry);
    const std::string where = index_path + ": suite " + s.id;
    const auto folder = resolved_suite_folder(root, s.id);
    TAPEWISE_CHECK(folder);
    TAPEWISE_CHECK(read_suite_inputs(*folder, where, s));

    Row& row = row_for(s.op, s.dtype);
    if (!any_output_present(*folder, s)) {
      row.unanswered.push_back(s.id);
      continue;
    }
    NodeOutputs produced;
    if (const std::string problem = read_outputs(*folder, where, s, produced); !problem.empty()) {
      row.errors.push_back(problem);
      if (s.special) row.special.total += static_cast<int>(s.batch.size());
    } else if (s.special) {
      TAPEWISE_CHECK(grade_special_suite(s, spec, spec_path, where, produced, row));
    } else {
      grade_against_reference(s.batch, produced, row);  // a random suite is graded as `run` grades
    }
    row.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::pair(static_cast<int>(a.op), static_cast<int>(a.dtype)) <
           std::pair(static_cast<int>(b.op), static_cast<int>(b.dtype));
  });

  return rows;
}

}  // namespace

int check_command(const CheckOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  auto usage = [](const std::string& m) {
    std::cerr << "tapewise-conform check: " << m << "\n";
    return kUsageError;
  };
  if (o.dir.empty()) return usage("the vectors folder is empty (give the folder `vectors` wrote)");
  if (!o.json_path.empty())
    if (auto ok = check_output(o.json_path, "--json"); !ok) return usage(ok.error().message);
  if (!o.junit_path.empty())
    if (auto ok = check_output(o.junit_path, "--junit"); !ok) return usage(ok.error().message);
  const fs::path dir(o.dir);
  const std::string index_path = (dir / kIndexFile).string();
  auto index = read_index(dir);
  if (!index) return usage(index.error().message);
  warn_if_other_spec(*index, index_path);
  std::error_code ec;
  const fs::path root = fs::canonical(dir, ec);
  if (ec) return usage(dir.string() + ": " + ec.message());
  const auto spec_path = find_special_points(o.special_points_path);
  if (!spec_path) return usage(spec_path.error().message);
  const auto spec = load_spec_points(*spec_path);
  if (!spec) return usage(spec.error().message);
  if (!quiet_mode()) std::cerr << "special points: " << *spec_path << "\n";

  auto graded = grade_suites(*index, root, index_path, *spec, *spec_path);
  if (!graded) return usage(graded.error().message);
  const std::vector<Row>& rows = *graded;

  std::cout << "implementation under test: the outputs in " << dir.string() << " (suite seed " << index->seed << ", "
            << index->cases << " random cases per node and dtype)\n\n";
  std::int64_t largest_cases = 0;
  for (const Row& r : rows) largest_cases = std::max(largest_cases, r.cases);
  const TableLayout layout = table_layout(largest_cases);
  print_table_header(std::cout, layout);
  for (std::size_t i = 0; i < rows.size(); ++i)
    print_table_row(std::cout, rows[i], i == 0 || rows[i - 1].op != rows[i].op, layout);
  const Summary summary = summarize(rows);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n";
  print_table_legend(std::cout, false);
  print_violations(std::cout, rows);
  std::cout << "\n" << summary.line() << "\n";
  // The index's special suites are the spec's rows: a suite written without them cannot pass.
  if (const auto missing = missing_evidence(rows, true); !summary.violates() && !missing.empty()) {
    for (const std::string& line : missing) std::cerr << "tapewise-conform check: no verdict: " << line << "\n";
    return kUsageError;
  }

  if (!o.json_path.empty()) {
    Json report{{"schema", kReportSchema},
                {"command", "check"},
                {"tapewise_version", kVersion},
                {"spec_sha256", kSpecSha256},
                {"implementation", Json{{"dir", utf8_or_escaped(dir.string())}}},
                {"seed", index->seed},
                {"cases", index->cases},
                {"rows", Json::array()},
                {"summary", summary_json(summary, elapsed)}};
    for (const Row& r : rows) report["rows"].push_back(row_json(r));
    if (auto ok = write_json_output(o.json_path, "--json", report); !ok) return usage(ok.error().message);
  }
  if (!o.junit_path.empty())
    if (auto ok = write_junit(o.junit_path, "check", junit_cases(rows, "check")); !ok) return usage(ok.error().message);
  return summary.conforms() ? kConforms : kViolation;
}

}  // namespace tapewise::conform
