// conform/graph_command.cpp — the `graph` subcommand: runs the graph checker (graph.hpp) on
// the chosen backend, prints its table, writes the JSON report, and sets the exit status.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>
#include <tapewise/version.hpp>

#include "commands.hpp"
#include "graph.hpp"
#include "report.hpp"
#include "json_io.hpp"

namespace tapewise::conform {

namespace {

using ReportJson = nlohmann::ordered_json;  // keys in the order written: the schema reads top-down

std::string op_text(const NodeCheck& n) { return n.op ? op_name(*n.op) : "leaf"; }

std::string vjp_text(const NodeCheck& n) {
  switch (n.vjp_run) {
    case VjpRun::none: return "-";
    case VjpRun::pass_once: return "g once";
    case VjpRun::no_slot: return "no slot";
    case VjpRun::kernel: return ulps_text(n.vjp->max_ulps);
  }
  return "-";
}

// "=" the slot is the accumulation of its contributions, bit for bit; "none" no slot and none due.
std::string slot_text(const NodeCheck& n) {
  if (n.slot_expected && !n.slot_present) return "missing";
  if (!n.slot_expected && n.slot_present) return "extra";
  if (!n.slot_present) return "none";
  if (!n.slot_replayable) return "unknown";
  return n.slot_mismatches == 0 ? "=" : std::to_string(n.slot_mismatches) + " differ";
}

void print_header(std::ostream& out, const GraphReport& r, const std::string& file, const std::string& backend_name,
                  const std::string& why, const std::string& math) {
  std::int64_t leaves = 0;
  for (const NodeCheck& n : r.nodes) leaves += n.op ? 0 : 1;
  const NodeCheck& output = r.nodes[static_cast<std::size_t>(r.output)];
  out << "tapewise-conform graph " << file << "\n"
      << "  " << dtype_name(r.dtype) << ", " << leaves << " leaves, " << r.nodes.size() - static_cast<std::size_t>(leaves)
      << " nodes, output '" << output.name << "' " << output.shape.str() << "; VJP path "
      << (r.path == VjpPath::fused ? "fused" : "staged") << ", " << (r.dense ? "dense" : "sparse") << " slots\n"
      << "  backend: " << backend_name << " (" << r.backend << "; " << why << "; math " << math << ")\n\n";
}

void print_rows(std::ostream& out, const GraphReport& r) {
  std::size_t name_width = 4;
  for (const NodeCheck& n : r.nodes) name_width = std::max(name_width, n.name.size());
  out << pad("slot", 5, true) << "  " << pad("node", name_width) << "  " << pad("op", 8) << "  " << pad("fwd ulp", 8, true)
      << "  " << pad("bound", 10) << "  " << pad("vjp ulp", 8, true) << "  " << pad("bound", 10) << "  " << pad("slot", 8)
      << "  " << pad("e2e ulp", 8, true) << "  verdict\n";
  for (const NodeCheck& n : r.nodes) {
    out << pad(std::to_string(n.id), 5, true) << "  " << pad(n.name, name_width) << "  " << pad(op_text(n), 8) << "  "
        << pad(n.forward ? ulps_text(n.forward->max_ulps) : "-", 8, true) << "  "
        << pad(n.forward ? bound_text(n.forward->bound) : "-", 10) << "  " << pad(vjp_text(n), 8, true) << "  "
        << pad(n.vjp ? bound_text(n.vjp->bound) : "-", 10) << "  " << pad(slot_text(n), 8) << "  "
        << pad(n.gradient_end_to_end_ulps ? ulps_text(*n.gradient_end_to_end_ulps) : "-", 8, true) << "  "
        << (n.passes() ? "ok" : "FAIL") << "\n";
  }
  for (const NodeCheck& n : r.nodes) {
    const std::int64_t accepted = (n.forward ? n.forward->accepted_outside_domain : 0) +
                                  (n.vjp ? n.vjp->accepted_outside_domain : 0);
    if (accepted > 0)
      out << "  '" << n.name << "' (#" << n.id << "): " << accepted
          << " values above the bound outside the node's domain, accepted: an intermediate of the staging\n"
             "           overflows or underflows where spec/bounds.def accepts it (as sweep grades them; not in the ulp columns)\n";
  }
  out << "\n  fwd ulp: the node's value against the reference op at the tape's own parent values (local).\n"
         "  vjp ulp: the contributions the node sent, its VJP re-run alone at the tape's own inputs and upstream\n"
         "           slot, against the reference VJP there (local); bounds from spec/bounds.def. A value\n"
         "           passes within ulp*ulp(R(exact)) + abs*eps*w: an ulp figure above the bound's ulp\n"
         "           can pass where the bound has an abs term (cancelling stagings).\n"
         "  slot: '=' the gradient slot is, bit for bit, the tape's accumulation (spec section 2) of the\n"
         "           contributions it received. e2e ulp: the slot against the reference DAG (information).\n";
}

void print_leaves(std::ostream& out, const GraphReport& r) {
  out << "\nEnd to end (information, not graded): each leaf's gradient against the reference's DAG evaluation\n"
         "(reference/dag.hpp: every step correctly rounded from the exact leaves), max ulp:\n";
  for (const NodeCheck& n : r.nodes) {
    if (n.op) continue;
    out << "  " << n.name << " " << n.shape.str() << ": "
        << (n.gradient_end_to_end_ulps ? ulps_text(*n.gradient_end_to_end_ulps) : "no gradient") << "\n";
  }
}

void print_violations(std::ostream& out, const GraphReport& r) {
  for (const NodeCheck& n : r.nodes) {
    if (n.passes()) continue;
    out << "\nFAIL slot " << n.id << " '" << n.name << "' (" << op_text(n) << "):\n";
    for (const std::string& line : n.violations) out << "  " << line << "\n";
  }
}

ReportJson number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

ReportJson values_json(const std::vector<double>& v) {
  ReportJson list = ReportJson::array();
  for (double x : v) list.push_back(hex(x));
  return list;
}

ReportJson local_json(const std::optional<LocalCheck>& c) {
  if (!c) return nullptr;
  return ReportJson{{"values", c->values},
                    {"violations", c->violations},
                    {"max_ulps", number_json(c->max_ulps)},
                    {"max_ratio", number_json(c->max_ratio)},
                    {"accepted_outside_domain", c->accepted_outside_domain},
                    {"bound", {{"ulp", c->bound.ulp}, {"abs", c->bound.abs}}}};
}

const char* vjp_run_name(VjpRun run) {
  switch (run) {
    case VjpRun::none: return "none";
    case VjpRun::kernel: return "kernel";
    case VjpRun::pass_once: return "pass_once";
    case VjpRun::no_slot: return "no_slot";
  }
  return "none";
}

ReportJson node_json(const NodeCheck& n, const Production& p) {
  const auto i = static_cast<std::size_t>(n.id);
  ReportJson vjp = local_json(n.vjp);
  if (vjp.is_null()) vjp = ReportJson::object();
  vjp["run"] = vjp_run_name(n.vjp_run);
  return ReportJson{{"id", n.id},
                    {"name", n.name},
                    {"op", op_text(n)},
                    {"shape", std::vector<std::int64_t>(n.shape.dims)},
                    {"passes", n.passes()},
                    {"forward", local_json(n.forward)},
                    {"vjp", vjp},
                    {"slot", {{"expected", n.slot_expected}, {"present", n.slot_present},
                              {"replayable", n.slot_replayable}, {"mismatches", n.slot_mismatches}}},
                    {"end_to_end", {{"value_ulps", number_json(n.value_end_to_end_ulps)},
                                    {"gradient_ulps", n.gradient_end_to_end_ulps ? number_json(*n.gradient_end_to_end_ulps) : ReportJson(nullptr)}}},
                    {"value", values_json(p.values[i])},
                    {"gradient", p.slots[i] ? values_json(*p.slots[i]) : ReportJson(nullptr)},
                    {"violations", n.violations}};
}

// The report without its nodes, which report_text adds one at a time.
ReportJson report_head(const GraphReport& r, const std::string& file, const ChosenBackend& backend) {
  return ReportJson{{"schema", kGraphReportSchema},
                    {"tapewise_version", kVersion},
                    {"spec_sha256", kSpecSha256},
                    {"file", utf8_or_escaped(file)},
                    {"backend", {{"name", backend.name}, {"description", r.backend}, {"why", backend.why}, {"math", backend.math()}}},
                    {"dtype", dtype_name(r.dtype)},
                    {"path", r.path == VjpPath::fused ? "fused" : "staged"},
                    {"dense", r.dense},
                    {"output", r.nodes[static_cast<std::size_t>(r.output)].name},
                    {"nodes", ReportJson::array()},
                    {"summary", {{"nodes", r.nodes.size()}, {"nodes_passing", r.nodes_passing()}, {"passes", r.passes()}}}};
}

// Why the report cannot support a pass: a leaf or node with no element graded. Empty when it can.
std::string missing_evidence(const GraphReport& r) {
  for (const NodeCheck& n : r.nodes) {
    const std::string who = "'" + n.name + "' (#" + std::to_string(n.id) + ")";
    if (n.shape.numel() == 0) return who + " has no elements: nothing of it is graded";
    if (n.forward && n.forward->values == 0) return who + ": no forward value graded";
    if (n.vjp && n.vjp->values == 0) return who + ": no gradient graded";
  }
  return "";
}

// Writes the JSON report one node at a time, through the one writer (files.hpp): as one DOM, or
// even as one string, a report at the graph limits (graph.hpp; every value and gradient in hex)
// took several GB.
[[nodiscard]] Result<void> write_report(const std::string& path, const GraphReport& r, const std::string& file,
                                        const ChosenBackend& backend) {
  TAPEWISE_TRY(target, resolve_output(path, "--json"));
  const std::string head = json_document_text(report_head(r, file, backend));
  const std::string empty_nodes = "\"nodes\": []";  // inside a string value its quotes would be escaped
  const std::size_t at = head.find(empty_nodes);
  OutputBatch batch;
  TAPEWISE_CHECK(batch.add_pieces(target, [&](const OutputBatch::Sink& sink) -> Result<void> {
    std::string text = head.substr(0, at) + "\"nodes\": [";
    for (std::size_t i = 0; i < r.nodes.size(); ++i) {
      const std::string node =
          node_json(r.nodes[i], r.production).dump(2, ' ', false, ReportJson::error_handler_t::replace);
      text += i ? ",\n    " : "\n    ";
      for (std::size_t from = 0; from < node.size();) {  // indented one level deeper, line by line
        const std::size_t eol = std::min(node.find('\n', from), node.size());
        text.append(node, from, eol - from);
        if (eol < node.size()) text += "\n    ";
        from = eol + 1;
      }
      if (text.size() >= (std::size_t{1} << 20)) {
        TAPEWISE_CHECK(sink(text));
        text.clear();
      }
    }
    text += "\n  ]" + head.substr(at + empty_nodes.size());
    return sink(text);
  }));
  return batch.commit();
}

int graph_error(const std::string& message) {
  std::cerr << "tapewise-conform graph: " << message << "\n";
  return kUsageError;
}

}  // namespace

int graph_command(const GraphCommandOptions& o) {
  if (!o.json_path.empty())
    if (auto ok = check_output(o.json_path, "--json"); !ok) return graph_error(ok.error().message);
  auto text = read_small_file(o.file, kMaxGraphFileBytes);
  if (!text) return graph_error(text.error().message);
  auto graph = parse_graph(*text);
  if (!graph) return graph_error(o.file + ": " + graph.error().message);
  for (const GraphNode& n : graph->nodes)  // the same rule as after the run, before it
    if (n.shape.numel() == 0) return graph_error(o.file + ": no verdict: '" + n.name + "' has no elements: nothing of it is graded");
  auto chosen = choose_backend(o.backend, o.math);
  if (!chosen) return graph_error(chosen.error().str());
  GraphCheckOptions options;
  options.path = o.path;
  options.dense = o.dense;
  auto report = check_graph(*graph, *chosen->backend, options);
  if (!report) return graph_error(o.file + ": " + report.error().str());
  print_header(std::cout, *report, o.file, chosen->name, chosen->why, chosen->math());
  print_rows(std::cout, *report);
  print_leaves(std::cout, *report);
  print_violations(std::cout, *report);
  std::cout << "\n" << report->nodes_passing() << "/" << report->nodes.size() << " leaves and nodes pass"
            << (report->passes() ? "" : " (violations above)") << "\n";
  if (const std::string missing = missing_evidence(*report); report->passes() && !missing.empty())
    return graph_error(o.file + ": no verdict: " + missing);
  if (!o.json_path.empty())
    if (auto ok = write_report(o.json_path, *report, o.file, *chosen); !ok)
      return graph_error(ok.error().message);
  return report->passes() ? kConforms : kViolation;
}

}  // namespace tapewise::conform
