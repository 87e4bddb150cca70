// tools/conform/vectors.cpp — `vectors` exports a conformance suite for other implementations
// (inputs, the reference's expected outputs, the spec's exact values at special points, as .npy
// files plus index.json); `check` grades another implementation's outputs in that layout with the
// same verdict logic and table as `run` (grade.hpp, report.hpp).
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cases.hpp"
#include "commands.hpp"
#include "grade.hpp"
#include "npy.hpp"
#include "reference.hpp"
#include "report.hpp"

namespace tapewise::conform {

namespace fs = std::filesystem;

namespace {

constexpr const char* kVectorsSchema = "tapewise-conform.vectors/1";
constexpr const char* kIndexFile = "index.json";

// One folder of the suite: one node, one dtype, one scalar set (and `same` for op(a, a) rows).
struct Suite {
  std::string id;
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;
  bool same = false;
  bool special = false;  // graded bit for bit against `expected`; else against the reference
  Batch batch;           // inputs and g
  NodeOutputs expected;  // y and the gradients
  std::vector<std::pair<int, std::string>> rows;  // special: (line, note) per element
};

std::vector<std::string> suite_input_names(Op op, bool same) {
  if (same) return {"a"};
  return input_names(op);
}

Json scalar_json(Op op, const Scalars& s) {
  Json out = Json::object();
  const OpInfo& info = op_info(op);
  const double values[2] = {s.s0, s.s1};
  for (int i = 0; i < info.scalar_count(); ++i) out[info.scalar_names[i]] = number_json(values[i]);
  return out;
}

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
    y.push_back(reference::round_to_dtype(reference::forward(batch.op, batch.dtype, batch.scalars, in_span), batch.dtype));
    const auto d = reference::vjp(batch.op, batch.dtype, batch.scalars, in_span, reference::real(batch.g.as_double(i)));
    for (int k = 0; k < arity; ++k)
      grads[static_cast<std::size_t>(k)].push_back(reference::round_to_dtype(d[static_cast<std::size_t>(k)], batch.dtype));
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

Result<void> write_suite(const fs::path& dir, const Suite& s, Json& index_entry) {
  const fs::path folder = dir / s.id;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return fail(ErrorCode::InvalidArgument, folder.string() + ": cannot create: " + ec.message());
  Json inputs = Json::object(), expected = Json::object(), outputs = Json::object();
  const std::vector<std::string> in_names = suite_input_names(s.op, s.same);
  auto put = [&](Json& where, const std::string& key, const std::string& file, const HostArray& a) -> Result<void> {
    where[key] = file;
    return write_npy((folder / file).string(), a);
  };
  for (std::size_t k = 0; k < in_names.size(); ++k)
    if (auto ok = put(inputs, in_names[k], in_names[k] + ".npy", s.batch.inputs[k]); !ok) return ok;
  if (auto ok = put(inputs, "g", "g.npy", s.batch.g); !ok) return ok;
  if (auto ok = put(expected, "y", "expected_y.npy", s.expected.y); !ok) return ok;
  outputs["y"] = "out_y.npy";
  const std::vector<std::string> names = grad_names(s.op, s.same);
  for (std::size_t k = 0; k < names.size(); ++k) {
    if (auto ok = put(expected, names[k], "expected_" + names[k] + ".npy", s.expected.grads[k]); !ok) return ok;
    outputs[names[k]] = "out_" + names[k] + ".npy";
  }
  index_entry = Json{{"id", s.id},
                     {"op", op_name(s.op)},
                     {"dtype", dtype_name(s.dtype)},
                     {"kind", s.special ? "special" : "random"},
                     {"grading", s.special ? "exact" : "reference"},
                     {"scalars", scalar_json(s.op, s.scalars)},
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

struct IndexError {
  std::string message;
};

std::string str_field(const Json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j[key].is_string()) throw IndexError{where + ": '" + key + "' is missing or not a string"};
  return j[key].get<std::string>();
}

double scalar_from_json(const Json& j, const std::string& where) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    if (s == "inf") return HUGE_VAL;
    if (s == "-inf") return -HUGE_VAL;
    if (s == "nan") return std::nan("");
  }
  throw IndexError{where + ": a scalar is neither a number nor \"inf\", \"-inf\", \"nan\""};
}

Suite suite_from_json(const Json& entry, const fs::path& dir, int position) {
  const std::string where = (dir / kIndexFile).string() + ": suites[" + std::to_string(position) + "]";
  if (!entry.is_object()) throw IndexError{where + " is not an object"};
  Suite s;
  s.id = str_field(entry, "id", where);
  if (s.id.empty() || s.id.find('/') != std::string::npos || s.id.find("..") != std::string::npos)
    throw IndexError{where + ": 'id' must be a plain folder name"};
  const auto op = op_from_name(str_field(entry, "op", where));
  if (!op) throw IndexError{where + ": unknown op '" + entry["op"].get<std::string>() + "'"};
  s.op = *op;
  const std::string dtype = str_field(entry, "dtype", where);
  if (dtype != "float32" && dtype != "float64") throw IndexError{where + ": dtype '" + dtype + "'"};
  s.dtype = dtype == "float32" ? DType::float32 : DType::float64;
  const std::string kind = str_field(entry, "kind", where);
  if (kind != "special" && kind != "random") throw IndexError{where + ": kind '" + kind + "'"};
  s.special = kind == "special";
  s.same = entry.value("same", false);
  if (s.same && op_info(s.op).arity != 2) throw IndexError{where + ": 'same' on a unary op"};
  const OpInfo& info = op_info(s.op);
  double* slots[2] = {&s.scalars.s0, &s.scalars.s1};
  for (int i = 0; i < info.scalar_count(); ++i) {
    if (!entry.contains("scalars") || !entry["scalars"].contains(info.scalar_names[i]))
      throw IndexError{where + ": scalar '" + info.scalar_names[i] + "' is missing"};
    *slots[i] = scalar_from_json(entry["scalars"][info.scalar_names[i]], where);
  }
  if (entry.contains("rows") && entry["rows"].is_array())
    for (const Json& r : entry["rows"]) s.rows.push_back({r.value("line", 0), r.value("note", std::string())});
  return s;
}

// Reads a file named in the index; `what` explains it in messages.
Result<HostArray> read_suite_file(const fs::path& folder, const Json& files, const std::string& key,
                                  const std::string& where) {
  if (!files.contains(key) || !files[key].is_string())
    return fail(ErrorCode::InvalidArgument, where + ": no file named for '" + key + "'");
  return read_npy((folder / files[key].get<std::string>()).string());
}

std::string check_shape(const HostArray& a, const Suite& s, const std::string& name) {
  if (a.dtype != s.dtype) return name + " is " + dtype_name(a.dtype) + ", the suite is " + dtype_name(s.dtype);
  if (!(a.shape == s.batch.g.shape)) return name + " has shape " + a.shape.str() + ", the suite's inputs " + s.batch.g.shape.str();
  return "";
}

}  // namespace

int vectors_command(const VectorsOptions& o) {
  auto spec = load_spec_points(o.special_points_path);
  if (!spec) {
    std::cerr << "tapewise-conform vectors: " << spec.error().message << "\n";
    return kUsageError;
  }
  const fs::path dir(o.dir);
  Json index{{"schema", kVectorsSchema},
             {"seed", o.seed},
             {"cases", o.cases},
             {"note", "Each suite is a folder named by its id. Read the files under 'inputs', compute the node "
                      "(op(a, a) when 'same'), and write every file under 'outputs' as a .npy of the suite's "
                      "dtype and shape. 'random' suites are graded against the MPFR reference within "
                      "spec/bounds.def; 'special' suites bit for bit against 'expected' (any NaN matches any NaN). "
                      "Then run: tapewise-conform check <this folder>."},
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
        if (auto ok = write_suite(dir, s, entry); !ok) {
          std::cerr << "tapewise-conform vectors: " << ok.error().message << "\n";
          return kUsageError;
        }
        files += static_cast<std::int64_t>(entry["inputs"].size() + entry["expected"].size());
        index["suites"].push_back(entry);
      }
    }
  }
  if (auto ok = write_json_file((dir / kIndexFile).string(), index); !ok) {
    std::cerr << "tapewise-conform vectors: " << ok.error().message << "\n";
    return kUsageError;
  }
  std::cout << "wrote " << index["suites"].size() << " suites (" << files << " .npy files) and "
            << (dir / kIndexFile).string() << "; seed " << o.seed << ", " << o.cases
            << " random cases per node and dtype\n";
  return kConforms;
}

int check_command(const CheckOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  const fs::path dir(o.dir);
  auto usage = [](const std::string& m) {
    std::cerr << "tapewise-conform check: " << m << "\n";
    return kUsageError;
  };
  std::ifstream in(dir / kIndexFile);
  if (!in) return usage((dir / kIndexFile).string() + ": cannot open (is this a folder written by `vectors`?)");
  Json index;
  try {
    index = Json::parse(in);
  } catch (const Json::exception& e) {
    return usage((dir / kIndexFile).string() + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || index.value("schema", std::string()) != kVectorsSchema)
    return usage((dir / kIndexFile).string() + ": schema is not " + kVectorsSchema);
  if (!index.contains("suites") || !index["suites"].is_array())
    return usage((dir / kIndexFile).string() + ": no 'suites' array");

  std::vector<Row> rows;  // one per (op, dtype), in op-table order
  auto row_for = [&](Op op, DType dtype) -> Row& {
    for (Row& r : rows)
      if (r.op == op && r.dtype == dtype) return r;
    rows.push_back(make_row(op, dtype));
    return rows.back();
  };

  int position = 0;
  for (const Json& entry : index["suites"]) {
    Suite s;
    try {
      s = suite_from_json(entry, dir, position++);
    } catch (const IndexError& e) {
      return usage(e.message);
    } catch (const Json::exception& e) {
      return usage((dir / kIndexFile).string() + ": " + e.what());
    }
    const fs::path folder = dir / s.id;
    const std::string where = (dir / kIndexFile).string() + ": suite " + s.id;
    if (!entry.contains("inputs") || !entry.contains("outputs")) return usage(where + ": lacks 'inputs' or 'outputs'");

    // The suite's own files: a broken one is an input error, not the implementation's fault.
    s.batch.op = s.op;
    s.batch.dtype = s.dtype;
    s.batch.scalars = s.scalars;
    auto g = read_suite_file(folder, entry["inputs"], "g", where);
    if (!g) return usage(g.error().message);
    s.batch.g = std::move(*g);
    for (const std::string& name : suite_input_names(s.op, s.same)) {
      auto a = read_suite_file(folder, entry["inputs"], name, where);
      if (!a) return usage(a.error().message);
      if (auto why = check_shape(*a, s, name); !why.empty()) return usage(where + ": " + why);
      s.batch.inputs.push_back(std::move(*a));
    }
    if (s.batch.g.dtype != s.dtype) return usage(where + ": g is not " + dtype_name(s.dtype));
    NodeOutputs expected;
    if (s.special) {
      if (!entry.contains("expected")) return usage(where + ": a special suite lacks 'expected'");
      auto y = read_suite_file(folder, entry["expected"], "y", where);
      if (!y) return usage(y.error().message);
      if (auto why = check_shape(*y, s, "expected y"); !why.empty()) return usage(where + ": " + why);
      expected.y = std::move(*y);
      for (const std::string& name : grad_names(s.op, s.same)) {
        auto e = read_suite_file(folder, entry["expected"], name, where);
        if (!e) return usage(e.error().message);
        if (auto why = check_shape(*e, s, "expected " + name); !why.empty()) return usage(where + ": " + why);
        expected.grads.push_back(std::move(*e));
      }
    }

    // The implementation's outputs: anything missing or malformed is its violation.
    Row& row = row_for(s.op, s.dtype);
    NodeOutputs produced;
    std::string problem;
    std::vector<std::string> out_names{"y"};
    for (const std::string& n : grad_names(s.op, s.same)) out_names.push_back(n);
    for (const std::string& name : out_names) {
      auto a = read_suite_file(folder, entry["outputs"], name, where);
      if (!a) {
        problem = a.error().message;
        break;
      }
      if (auto why = check_shape(*a, s, "output " + name); !why.empty()) {
        problem = where + ": " + why;
        break;
      }
      (name == "y" ? produced.y : produced.grads.emplace_back()) = std::move(*a);
    }
    if (!problem.empty()) {
      row.errors.push_back(problem);
      if (s.special) {
        row.special.total += static_cast<int>(s.batch.size());
      }
      continue;
    }

    if (!s.special) {
      // `same` is never written for random suites; a random suite is graded like `run` grades.
      grade_against_reference(s.batch, produced, row);
      continue;
    }
    for (std::int64_t i = 0; i < s.batch.size(); ++i) {
      SpecialPoint p;
      p.op = s.op;
      p.dtype = s.dtype;
      p.scalars = s.scalars;
      p.same = s.same;
      for (const HostArray& a : s.batch.inputs) p.inputs.push_back(a.as_double(i));
      p.g = s.batch.g.as_double(i);
      p.y = expected.y.as_double(i);
      for (const HostArray& e : expected.grads) p.grads.push_back(e.as_double(i));
      const auto [line, note] = i < static_cast<std::int64_t>(s.rows.size()) ? s.rows[static_cast<std::size_t>(i)]
                                                                              : std::pair<int, std::string>{0, ""};
      ++row.special.total;
      const PointVerdict v = grade_special_point(p, produced, i);
      if (v.passes()) {
        ++row.special.passed;
      } else {
        row.special.failures.push_back(s.id + "[" + std::to_string(i) + "] (spec/special_points:" + std::to_string(line) +
                                       "): " + v.mismatch_text(p, produced, i));
      }
    }
  }
  if (rows.empty()) return usage((dir / kIndexFile).string() + ": lists no suites");
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::pair(static_cast<int>(a.op), static_cast<int>(a.dtype)) < std::pair(static_cast<int>(b.op), static_cast<int>(b.dtype));
  });

  std::cout << "implementation under test: the outputs in " << dir.string() << " (suite seed "
            << index.value("seed", std::uint64_t{0}) << ", " << index.value("cases", std::int64_t{0})
            << " random cases per node and dtype)\n\n";
  print_table_header(std::cout);
  for (std::size_t i = 0; i < rows.size(); ++i)
    print_table_row(std::cout, rows[i], i == 0 || rows[i - 1].op != rows[i].op);
  const Summary summary = summarize(rows);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "\n";
  print_table_legend(std::cout, false);
  print_violations(std::cout, rows);
  std::cout << "\n" << summary.line() << "\n";

  if (!o.json_path.empty()) {
    Json report{{"schema", kReportSchema},
                {"command", "check"},
                {"implementation", Json{{"dir", dir.string()}}},
                {"seed", index.value("seed", std::uint64_t{0})},
                {"cases", index.value("cases", std::int64_t{0})},
                {"rows", Json::array()},
                {"summary", summary_json(summary, elapsed)}};
    for (const Row& r : rows) report["rows"].push_back(row_json(r));
    if (auto ok = write_json_file(o.json_path, report); !ok) return usage(ok.error().message);
  }
  return summary.conforms() ? kConforms : kViolation;
}

}  // namespace tapewise::conform
