// conform/ops_command.cpp — `tapewise-conform ops`: prints the op table (spec/ops.def, as
// compiled into this binary) or writes it as JSON, so that Python scripts use the table rather than a
// copy of it; `--card NAME` lists every place in a source tree that defines one node.
#include "ops_command.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <tapewise/version.hpp>

#include "bounds.hpp"    // forward_bound, vjp_bound
#include "cases.hpp"     // scalars_text
#include "measure.hpp"   // dtype_eps
#include "commands.hpp"  // ExitCode
#include "suggest.hpp"   // did_you_mean

namespace tapewise::conform {

namespace {

Json scalar_sets_json(const OpInfo& info, const ScalarSets& sets) {
  Json list = Json::array();
  for (const Scalars& s : sets) {
    Json set = Json::object();
    const double values[2] = {s.s0, s.s1};
    for (int k = 0; k < info.scalar_count(); ++k) set[info.scalar_names[k]] = values[k];
    list.push_back(set);
  }
  return list;
}

Json op_json(const OpInfo& info) {
  Json names = Json::array();
  for (int k = 0; k < info.scalar_count(); ++k) names.push_back(info.scalar_names[k]);
  return Json{{"name", info.name},
              {"index", static_cast<int>(info.op)},
              {"arity", info.arity},
              {"scalars", names},
              {"scalar_contract", scalar_contract_name(info.scalar_contract)},
              {"domain_log2_lo", info.domain_log2_lo},
              {"domain_log2_hi", info.domain_log2_hi},
              {"positive_only", info.positive_only},
              {"kink", kink_name(info.kink)},
              {"same_parent", same_parent_name(info.same_parent)},
              {"bench_inputs", bench_inputs_name(info.bench_inputs)},
              {"aten_parity", aten_parity_name(info.aten_parity)},
              {"vjp_reads", vjp_reads_name(info.vjp_reads)},
              {"sweep_reference", sweep_reference_name(info.sweep_reference)},
              {"run_scalars", scalar_sets_json(info, info.run_scalars)},
              {"graded_scalars", scalar_sets_json(info, info.graded_scalars)},
              {"edge_scalars", scalar_sets_json(info, info.edge_scalars)},
              {"staged", info.staged}};
}

std::string sets_text(const OpInfo& info, const ScalarSets& sets) {
  std::string text;
  for (const Scalars& s : sets) text += (text.empty() ? "" : ", ") + scalars_text(info.op, s);
  return text.empty() ? "-" : text;
}

void print_op_table(std::ostream& out) {
  char line[256];
  std::snprintf(line, sizeof line, "%-9s %5s  %-7s %-9s %-13s %-5s %-7s %-6s %-9s %-9s %s\n", "node", "arity",
                "scalars", "contract", "|domain|", "sign", "kink", "same", "bench", "aten", "run scalar sets");
  out << line;
  for (const OpInfo& info : kOps) {
    std::string scalars = info.scalar_count() == 0 ? "-" : info.scalar_names[0];
    if (info.scalar_count() == 2) scalars += std::string(",") + info.scalar_names[1];
    const std::string domain =
        "[2^" + std::to_string(info.domain_log2_lo) + ",2^" + std::to_string(info.domain_log2_hi) + ")";
    std::snprintf(line, sizeof line, "%-9s %5d  %-7s %-9s %-13s %-5s %-7s %-6s %-9s %-9s %s\n", info.name,
                  info.arity, scalars.c_str(), scalar_contract_name(info.scalar_contract), domain.c_str(),
                  info.positive_only ? "+" : "+-", kink_name(info.kink), same_parent_name(info.same_parent),
                  bench_inputs_name(info.bench_inputs), aten_parity_name(info.aten_parity),
                  sets_text(info, info.run_scalars).c_str());
    out << line;
  }
  out << "(spec/ops.def explains each column; --json FILE writes every column, - for standard output)\n";
}

// A place that defines part of a node: the file, what it holds, and how to find the node there (a
// regular expression in which NAME stands for the node's name).
struct Place {
  const char* file;
  const char* holds;
  const char* pattern;
};
// Every place a node is written, in the order a new node fills them (docs/adding-a-node.md).
constexpr Place kPlaces[] = {
    {"spec/ops.def", "the row (arity, scalars and their contract, domain, kink, same parent, bench, ATen grading, VJP reads, sweep, staged form)", R"(^TAPEWISE_OP\(NAME,)"},
    {"include/tapewise/tapewise.h", "its pinned C op id (TW_OP_NAME = next number)", R"(\bTW_OP_NAME = [0-9]+)"},
    {"proptest/c_api_test.cpp", "the released C op ids, written out (OpIdsArePinnedAndAppendOnly)", R"(\{TW_OP_NAME, "NAME"\})"},
    {"spec/conventions.md", "its section in words", R"(^### 1\.[0-9]+ NAME\b)"},
    {"cuda/kernels/op_math.cuh", "forward and fused VJP, OpMath<Op::NAME>", R"(OpMath<Op::NAME>)"},
    {"spec/stagings.def", "its forward and VJP staging (TAPEWISE_STAGING)", R"(^TAPEWISE_STAGING\(NAME,)"},
    {"reference/reference.cpp", "the MPFR transcription (case Op::NAME)", R"(case Op::NAME:)"},
    {"spec/bounds.def", "its bounds (TAPEWISE_BOUND)", R"(^TAPEWISE_BOUND\(NAME,)"},
    {"spec/bounds.def", "its sweep record (TAPEWISE_SWEPT / TAPEWISE_NOT_SWEPT)", R"(^TAPEWISE_(NOT_)?SWEPT\(NAME,)"},
    {"spec/special_points", "its bit-exact special points (op=NAME)", R"(^op=NAME )"},
    {"reference/sweep_reference.hpp", "the sweep transcription (Op::NAME)", R"(Op::NAME\b)"},
    {"include/tapewise/tape.hpp", "Tape's named method", R"(Op::NAME\b)"},
    {"python/tapewise/_tapewise.pyi", "the Python Tape method's type stub", R"(def NAME\()"},
    {"python/tapewise/torch/_ops.py", "tapewise.torch's function and name table", R"(["']NAME["'])"},
    {"conform/aten_parity.py", "the ATen staging", R"(["']NAME["'])"},
    {"conform/frameworks/forms.py", "the PyTorch and JAX forms (the audit runs, the benchmark times)", R"(["']NAME["'])"},
};

// The 1-based numbers of the lines of `path` that match `pattern`.
std::vector<int> matching_lines(const std::filesystem::path& path, const std::regex& pattern) {
  std::vector<int> lines;
  std::ifstream in(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number)
    if (std::regex_search(line, pattern)) lines.push_back(number);
  return lines;
}

// Prints where `op` is defined under `source` (a checkout: spec/ops.def must be there).
int print_card(Op op, const std::string& source) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(source) / "spec" / "ops.def", ec)) {
    std::cerr << "tapewise-conform ops: --card needs the source tree: " << escaped_prefix(source)
              << "/spec/ops.def not found (give the checkout with --source DIR)\n";
    return kUsageError;
  }
  const std::string name = op_name(op);
  std::cout << name << ": the places that define it, under " << source << "\n";
  int missing = 0;
  for (const Place& place : kPlaces) {
    const std::regex pattern(std::regex_replace(place.pattern, std::regex("NAME"), name));
    const std::vector<int> lines = matching_lines(fs::path(source) / place.file, pattern);
    std::string where = place.file;
    if (lines.empty()) {
      where += "  (not found)";
      ++missing;
    } else {
      where += ":" + std::to_string(lines.front());
      if (lines.size() > 1) where += " (+" + std::to_string(lines.size() - 1) + " more)";
    }
    const std::string holds = std::regex_replace(place.holds, std::regex("NAME"), name);
    std::printf("  %-48s %s\n", where.c_str(), holds.c_str());
  }
  std::cout << missing << " of " << std::size(kPlaces) << " places lack " << name
            << " (a node outside TorchLean needs no ATen staging; an unswept one no sweep transcription)\n";
  return kConforms;
}

std::vector<std::string> node_names() {
  std::vector<std::string> names;
  for (const OpInfo& info : kOps) names.push_back(info.name);
  return names;
}

}  // namespace

// spec/bounds.def's rows, one per node and dtype, with the dtype's eps (the formula's abs unit), and
// under "exact" the bounds in exact mode: the table beside the op rows, so that an outside grader
// reads the bounds rather than a copy of them.
Json bounds_json() {
  Json rows = Json::array();
  auto bound = [](const reference::Bound& b) { return Json{{"ulp", b.ulp}, {"abs", b.abs}}; };
  for (const OpInfo& info : kOps)
    for (DType d : kDTypes)
      rows.push_back(Json{{"op", info.name},
                          {"dtype", dtype_name(d)},
                          {"eps", reference::dtype_eps(d)},
                          {"forward", bound(reference::forward_bound(info.op, d, MathMode::aten))},
                          {"vjp", bound(reference::vjp_bound(info.op, d, MathMode::aten))},
                          {"exact", Json{{"forward", bound(reference::forward_bound(info.op, d, MathMode::exact))},
                                         {"vjp", bound(reference::vjp_bound(info.op, d, MathMode::exact))}}}});
  return rows;
}

Json op_table_json() {
  Json ops = Json::array();
  for (const OpInfo& info : kOps) ops.push_back(op_json(info));
  Json dtypes = Json::array();
  for (DType d : kDTypes) dtypes.push_back(dtype_name(d));
  return Json{{"schema", kOpTableSchema},
              {"tapewise_version", kVersion},
              {"spec_sha256", kSpecSha256},
              {"ops", ops},
              {"dtypes", dtypes},
              {"bounds", bounds_json()}};
}

std::function<std::optional<int>()> add_ops_subcommand(CLI::App& app) {
  auto json_path = std::make_shared<std::string>();
  auto card = std::make_shared<std::string>();
  auto source = std::make_shared<std::string>(".");
  CLI::App* ops = app.add_subcommand("ops", "the op table this binary was built from (spec/ops.def)");
  ops->add_option("--json", *json_path, "write the table as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  ops->add_option("--card", *card, "list every place in the source tree that defines this node (file:line, what)")
      ->type_name("NODE");
  ops->add_option("--source", *source, "the checkout --card reads (default: the current folder)")->type_name("DIR");
  return [ops, json_path, card, source]() -> std::optional<int> {
    if (!ops->parsed()) return std::nullopt;
    if (!card->empty()) {
      const std::optional<Op> op = op_from_name(*card);
      if (!op) {
        std::cerr << "tapewise-conform ops: --card: unknown node '" << escaped_prefix(*card) << "'"
                  << did_you_mean(*card, node_names()) << "\n";
        return kUsageError;
      }
      return print_card(*op, *source);
    }
    if (json_path->empty()) {
      print_op_table(std::cout);
      return kConforms;
    }
    if (auto written = write_json_output(*json_path, "--json", op_table_json(), 1); !written) {
      std::cerr << "tapewise-conform ops: " << written.error().message << "\n";
      return kUsageError;
    }
    return kConforms;
  };
}

}  // namespace tapewise::conform
