// conform/audit.cpp — `tapewise-conform audit`: the derivative conventions point by point, for a
// person to read: every row of spec/special_points grouped by node, with the spec's rationale, what
// the spec says, what this backend gives on both VJP paths, and the verdict. --markdown writes the
// same as a document, --json as data (schema tapewise-conform.audit/1, described in the README).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <tapewise/version.hpp>

#include "commands.hpp"
#include "grade.hpp"
#include "report.hpp"

namespace tapewise::conform {

namespace {

using Cells = std::vector<std::string>;

// A value as the spec writes it: signed zeros spelled out, the shortest exact decimal while it is
// short (0.5, -3, 1e-45), else the exact hex float (0x1.fffffep+127 reads better than 3.4028235e+38).
std::string audit_value(double v, DType dtype) {
  if (v == 0) return std::signbit(v) ? "-0" : "+0";
  const std::string decimal = short_value(v, dtype);
  return decimal.size() <= 10 ? decimal : hex(v);
}

std::string named_values(const std::vector<std::string>& names, const std::vector<double>& values, DType dtype) {
  std::string s;
  for (std::size_t k = 0; k < names.size() && k < values.size(); ++k)
    s += (k ? " " : "") + names[k] + "=" + audit_value(values[k], dtype);
  return s;
}

// What a path produced, as the same "name=value" text (element 0 of each array).
std::vector<double> produced_values(const NodeOutputs& out) {
  std::vector<double> v;
  for (const HostArray& g : out.grads) v.push_back(g.as_double(0));
  return v;
}

// Names and values as a JSON object of exact value texts ({"dx": "-0"}).
Json named_values_json(const std::vector<std::string>& names, const std::vector<double>& values, DType dtype) {
  Json j = Json::object();
  for (std::size_t k = 0; k < names.size() && k < values.size(); ++k) j[names[k]] = audit_value(values[k], dtype);
  return j;
}

struct AuditedPoint {
  const SpecialPoint* point = nullptr;
  std::string backend_y, backend_grads;
  bool passes = false;
  std::string verdict;
  std::vector<std::string> failing;  // "y", "dx (fused)", "staged error: ..."
  Json fused, staged;                // {"y", "grads"} each path gave, or {"error"}
  double seconds = 0;                // what running both paths and comparing took
};

Json path_json(const std::optional<NodeOutputs>& out, const std::vector<std::string>& names, const SpecialPoint& p,
               const std::string& error) {
  if (!out) return Json{{"error", utf8_or_escaped(error)}};
  return Json{{"y", audit_value(out->y.as_double(0), p.dtype)},
              {"grads", named_values_json(names, produced_values(*out), p.dtype)}};
}

AuditedPoint audit_point(const std::shared_ptr<Backend>& backend, const SpecialPoint& p) {
  AuditedPoint a;
  a.point = &p;
  const std::vector<std::string> names = grad_names(p.op, p.same);
  std::optional<NodeOutputs> outs[2];
  std::vector<std::string> failed;
  std::string errors[2];
  bool y_failed = false;  // the forward runs once per path; report it once
  const VjpPath paths[2] = {VjpPath::fused, VjpPath::staged};
  const char* path_names[2] = {"fused", "staged"};
  for (int i = 0; i < 2; ++i) {
    auto produced = run_special_point(backend, p, paths[i]);
    if (!produced) {
      errors[i] = produced.error().str();
      failed.push_back(std::string(path_names[i]) + " error: " + errors[i]);
      continue;
    }
    const PointVerdict v = grade_special_point(p, *produced);
    y_failed = y_failed || !v.y_matches;
    for (std::size_t k = 0; k < v.grad_matches.size(); ++k)
      if (!v.grad_matches[k]) failed.push_back(names[k] + " (" + path_names[i] + ")");
    outs[i] = std::move(*produced);
  }
  if (y_failed) failed.insert(failed.begin(), "y");
  if (outs[0]) {
    a.backend_y = audit_value(outs[0]->y.as_double(0), p.dtype);
    a.backend_grads = named_values(names, produced_values(*outs[0]), p.dtype);
  }
  // Show the staged values too where the two paths differ (they must not).
  if (outs[0] && outs[1]) {
    const std::vector<double> f = produced_values(*outs[0]), s = produced_values(*outs[1]);
    bool differ = false;
    for (std::size_t k = 0; k < f.size(); ++k) differ = differ || !same_bits(f[k], s[k], p.dtype);
    if (differ) a.backend_grads = "fused " + a.backend_grads + " / staged " + named_values(names, s, p.dtype);
  }
  a.fused = path_json(outs[0], names, p, errors[0]);
  a.staged = path_json(outs[1], names, p, errors[1]);
  a.failing = failed;
  a.passes = failed.empty();
  if (a.passes) {
    a.verdict = "ok";
  } else {
    a.verdict = "FAIL:";
    for (const std::string& f : failed) a.verdict += " " + f;
  }
  return a;
}

Cells point_cells(const AuditedPoint& a) {
  const SpecialPoint& p = *a.point;
  std::string inputs;
  if (p.same) {
    inputs = op_name(p.op) + std::string("(a, a), a=") + audit_value(p.inputs[0], p.dtype);
  } else {
    inputs = named_values(input_names(p.op), p.inputs, p.dtype);
  }
  const std::string scalars = scalars_text(p.op, p.scalars);
  if (!scalars.empty()) inputs += " [" + scalars + "]";
  return {std::to_string(p.line),
          special_dtype_name(p.dtype),
          inputs,
          audit_value(p.g, p.dtype),
          audit_value(p.y, p.dtype),
          named_values(grad_names(p.op, p.same), p.grads, p.dtype),
          a.backend_y,
          a.backend_grads,
          a.verdict,
          p.note};
}

Json point_json(const AuditedPoint& a) {
  const SpecialPoint& p = *a.point;
  Json failing = Json::array();
  for (const std::string& f : a.failing) failing.push_back(utf8_or_escaped(f));
  return Json{{"line", p.line},
              {"dtype", dtype_name(p.dtype)},
              {"same", p.same},
              {"inputs", named_values_json(p.same ? std::vector<std::string>{"a"} : input_names(p.op), p.inputs, p.dtype)},
              {"scalars", scalars_json(p.op, p.scalars)},
              {"g", audit_value(p.g, p.dtype)},
              {"spec", Json{{"y", audit_value(p.y, p.dtype)},
                            {"grads", named_values_json(grad_names(p.op, p.same), p.grads, p.dtype)}}},
              {"fused", a.fused},
              {"staged", a.staged},
              {"verdict", a.passes ? "ok" : "fail"},
              {"failing", failing},
              {"note", utf8_or_escaped(p.note)}};
}

void print_text_table(std::ostream& out, const Cells& header, const std::vector<Cells>& rows) {
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const Cells& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const Cells& r) {
    out << " ";
    for (std::size_t c = 0; c < r.size(); ++c) {
      out << " " << r[c];
      if (c + 1 < r.size()) out << std::string(width[c] - r[c].size() + 1, ' ');
    }
    out << "\n";
  };
  line(header);
  for (const Cells& r : rows) line(r);
}

std::string markdown_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

void print_markdown_table(std::ostream& out, const Cells& header, const std::vector<Cells>& rows) {
  auto line = [&](const Cells& r) {
    out << "|";
    for (const std::string& c : r) out << " " << markdown_escape(c) << " |";
    out << "\n";
  };
  line(header);
  out << "|";
  for (std::size_t c = 0; c < header.size(); ++c) out << "---|";
  out << "\n";
  for (const Cells& r : rows) line(r);
}

// Wraps `text` at about `width` columns, each line starting with `indent`.
std::string wrap(const std::string& text, std::size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

// One node's special points, audited and printed as a text table and a Markdown section.
struct NodeAudit {
  int points = 0, holding = 0;
  Json json;  // the node's entry of the report's "nodes"
  std::vector<JunitCase> cases;  // one per selected dtype
};

// The node's JUnit cases: per dtype, a failure listing each point that does not hold, or skipped
// when the spec has no point of that dtype.
std::vector<JunitCase> audit_junit_cases(Op op, const Selection& selection, const std::vector<AuditedPoint>& audited) {
  std::vector<JunitCase> cases;
  for (DType dtype : selection.dtypes) {
    JunitCase c{std::string("tapewise.audit.") + dtype_name(dtype), op_name(op), "", "", 0.0};
    int points = 0, holding = 0;
    std::string lines;
    for (const AuditedPoint& a : audited) {
      if (a.point->dtype != dtype) continue;
      ++points;
      c.seconds += a.seconds;
      holding += a.passes ? 1 : 0;
      if (!a.passes) lines += "\nspecial_points line " + std::to_string(a.point->line) + ": " + a.verdict;
    }
    if (points == 0) c.skipped = "spec/special_points has no point of this node in this dtype";
    else if (holding != points)
      c.failure = std::to_string(points - holding) + " of " + std::to_string(points) +
                  " special points do not hold; first: " + lines.substr(1, lines.find('\n', 1) - 1) + lines;
    cases.push_back(std::move(c));
  }
  return cases;
}

NodeAudit audit_node(const ChosenBackend& be, const SpecialPoints& spec, const Selection& selection, Op op,
                     std::ostream& text, std::ostream& markdown) {
  const Cells header{"line",       "dtype",        "inputs",           "g",       "spec y",
                     "spec grads", be.name + " y", be.name + " grads", "verdict", "note"};
  NodeAudit result;
  std::vector<Cells> rows;
  Json json_rows = Json::array();
  std::vector<AuditedPoint> audited;
  for (const SpecialPoint& p : spec.points) {
    if (p.op != op) continue;
    if (std::find(selection.dtypes.begin(), selection.dtypes.end(), p.dtype) == selection.dtypes.end()) continue;
    const auto started = std::chrono::steady_clock::now();
    AuditedPoint a = audit_point(be.backend, p);
    a.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.holding += a.passes ? 1 : 0;
    rows.push_back(point_cells(a));
    json_rows.push_back(point_json(a));
    audited.push_back(a);
  }
  result.cases = audit_junit_cases(op, selection, audited);
  result.points = static_cast<int>(rows.size());
  if (rows.empty()) return result;
  const auto why = spec.why.find(op_name(op));
  const std::string rationale = why != spec.why.end() ? why->second : "(spec/special_points gives no rationale)";
  result.json = Json{{"op", op_name(op)}, {"staged", op_info(op).staged}, {"why", utf8_or_escaped(rationale)},
                     {"points", result.points}, {"holding", result.holding}, {"rows", std::move(json_rows)}};
  const std::string count = std::to_string(result.holding) + "/" + std::to_string(rows.size()) + " points hold";

  text << "\n"
       << op_name(op) << " — " << op_info(op).staged << " — " << count << "\n"
       << wrap("why: " + rationale, 100, "  ") << "\n";
  print_text_table(text, header, rows);
  markdown << "\n## " << op_name(op) << "\n\n"
           << "Staged form: `" << op_info(op).staged << "`. " << count << ".\n\n"
           << "> " << rationale << "\n\n";
  print_markdown_table(markdown, header, rows);
  return result;
}

// The Markdown document names the special points file by its name and the spec's hash, never by
// the folder it was read from, so a committed audit does not carry a machine's paths.
std::string markdown_intro(const std::string& source, const ChosenBackend& be) {
  return "# tapewise derivative conventions: audit\n\nEvery row of `" +
         std::filesystem::path(source).filename().string() + "` (tapewise " + kVersion + ", spec sha256 " +
         std::string(kSpecSha256).substr(0, 16) + "…) run on **" + be.backend->describe() + "** (" + be.why +
         "; math " + be.math() + "), through `Tape::backward` on both VJP paths (fused and staged). A row holds when the forward "
         "value and every gradient match the spec bit for bit (any NaN matches any NaN; +0 and -0 differ). "
         "Values are exact: the shortest decimal that identifies the value in the row's dtype, or a C hex "
         "float where that decimal is long. Gradients with "
         "`same=1` are the total gradient of the one leaf of `op(a, a)`.\n";
}

Json audit_report_json(const AuditOptions& o, const std::string& source, const ChosenBackend& be) {
  Json report{{"schema", kAuditSchema},
              {"command", "audit"},
              {"tapewise_version", kVersion},
              {"spec_sha256", kSpecSha256},
              {"special_points_file", utf8_or_escaped(source)},
              {"backend", Json{{"name", be.name}, {"description", be.backend->describe()}, {"why", be.why}, {"math", be.math()}}},
              {"ops", Json::array()},
              {"dtypes", Json::array()},
              {"nodes", Json::array()}};
  for (Op op : o.selection.ops) report["ops"].push_back(op_name(op));
  for (DType d : o.selection.dtypes) report["dtypes"].push_back(dtype_name(d));
  return report;
}

}  // namespace

int audit_command(const AuditOptions& o) {
  auto usage = [](const std::string& message) {
    std::cerr << "tapewise-conform audit: " << message << "\n";
    return kUsageError;
  };
  if (!o.markdown_path.empty())
    if (auto ok = check_output(o.markdown_path, "--markdown"); !ok) return usage(ok.error().message);
  if (!o.json_path.empty())
    if (auto ok = check_output(o.json_path, "--json"); !ok) return usage(ok.error().message);
  if (!o.junit_path.empty())
    if (auto ok = check_output(o.junit_path, "--junit"); !ok) return usage(ok.error().message);
  const auto source = find_special_points(o.special_points_path);
  if (!source) return usage(source.error().message);
  auto spec = load_spec_points(*source);
  if (!spec) return usage(spec.error().message);
  auto be = choose_backend(o.backend, o.math);
  if (!be) return usage("--backend cuda: " + be.error().str());

  std::ostringstream markdown;
  markdown << markdown_intro(*source, *be);
  std::cout << "audit of spec/special_points (" << *source << ") on " << be->backend->describe() << " — " << be->why
            << "; math " << be->math()
            << "\nverdict: every value bit for bit on both VJP paths (fused, staged); any NaN matches any NaN\n";
  Json report = audit_report_json(o, *source, *be);
  Json failing_nodes = Json::array();
  std::vector<JunitCase> cases;
  int points = 0, holding = 0;
  std::string failing;
  for (Op op : o.selection.ops) {
    NodeAudit node = audit_node(*be, *spec, o.selection, op, std::cout, markdown);
    points += node.points;
    holding += node.holding;
    if (node.holding != node.points) failing += std::string(" ") + op_name(op);
    if (node.holding != node.points) failing_nodes.push_back(op_name(op));
    if (node.points > 0) report["nodes"].push_back(std::move(node.json));
    cases.insert(cases.end(), node.cases.begin(), node.cases.end());
  }
  report["summary"] = Json{{"points", points}, {"holding", holding}, {"failing", failing_nodes},
                           {"conforms", points > 0 && holding == points}};
  const std::string summary = std::to_string(holding) + "/" + std::to_string(points) +
                              " special points hold on both VJP paths" +
                              (failing.empty() ? "" : " (failing:" + failing + ")");
  std::cout << "\n" << summary << "\n";
  markdown << "\n**" << summary << ".**\n";

  // A pass needs every selected node's points (a violation stands on its own).
  if (holding == points)
    if (auto rows = require_rows_for(*spec, o.selection, *source); !rows) return usage("no verdict: " + rows.error().message);
  if (!o.markdown_path.empty()) {
    if (auto ok = write_output_text(o.markdown_path, "--markdown", markdown.str()); !ok) return usage(ok.error().message);
    std::cout << "wrote " << o.markdown_path << "\n";
  }
  if (!o.json_path.empty())
    if (auto ok = write_json_output(o.json_path, "--json", report); !ok) return usage(ok.error().message);
  if (!o.junit_path.empty())
    if (auto ok = write_junit(o.junit_path, "audit", cases); !ok) return usage(ok.error().message);
  if (points == 0) return usage("no special point matches --ops/--dtype");
  return holding == points ? kConforms : kViolation;
}

}  // namespace tapewise::conform
