// tools/conform/ops_command.cpp — `tapewise-conform ops`: prints the op table (spec/ops.def, as
// compiled into this binary) or writes it as JSON, so that Python scripts use the table rather than a
// copy of it.
#include "ops_command.hpp"

#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <tapewise/version.hpp>

#include "cases.hpp"     // scalars_text
#include "commands.hpp"  // ExitCode

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
              {"domain_log2_lo", info.domain_log2_lo},
              {"domain_log2_hi", info.domain_log2_hi},
              {"positive_only", info.positive_only},
              {"kink", kink_name(info.kink)},
              {"bench_inputs", bench_inputs_name(info.bench_inputs)},
              {"aten_parity", aten_parity_name(info.aten_parity)},
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
  std::snprintf(line, sizeof line, "%-9s %5s  %-7s %-13s %-5s %-7s %-9s %-9s %s\n", "node", "arity", "scalars",
                "|domain|", "sign", "kink", "bench", "aten", "run scalar sets");
  out << line;
  for (const OpInfo& info : kOps) {
    std::string scalars = info.scalar_count() == 0 ? "-" : info.scalar_names[0];
    if (info.scalar_count() == 2) scalars += std::string(",") + info.scalar_names[1];
    const std::string domain =
        "[2^" + std::to_string(info.domain_log2_lo) + ",2^" + std::to_string(info.domain_log2_hi) + ")";
    std::snprintf(line, sizeof line, "%-9s %5d  %-7s %-13s %-5s %-7s %-9s %-9s %s\n", info.name, info.arity,
                  scalars.c_str(), domain.c_str(), info.positive_only ? "+" : "+-", kink_name(info.kink),
                  bench_inputs_name(info.bench_inputs), aten_parity_name(info.aten_parity),
                  sets_text(info, info.run_scalars).c_str());
    out << line;
  }
  out << "(spec/ops.def explains each column; --json FILE writes every column, - for standard output)\n";
}

}  // namespace

Json op_table_json() {
  Json ops = Json::array();
  for (const OpInfo& info : kOps) ops.push_back(op_json(info));
  return Json{{"schema", kOpTableSchema},
              {"tapewise_version", kVersion},
              {"spec_sha256", kSpecSha256},
              {"ops", ops}};
}

std::function<std::optional<int>()> add_ops_subcommand(CLI::App& app) {
  auto json_path = std::make_shared<std::string>();
  CLI::App* ops = app.add_subcommand("ops", "the op table this binary was built from (spec/ops.def)");
  ops->add_option("--json", *json_path, "write the table as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  return [ops, json_path]() -> std::optional<int> {
    if (!ops->parsed()) return std::nullopt;
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
