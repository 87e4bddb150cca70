// tools/conform/main.cpp — tapewise-conform's command line: run (the default), audit, eval, vectors,
// check. Parses options with CLI11 and hands over to commands.hpp; exit 2 on any usage error.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <tapewise/version.hpp>

#include "commands.hpp"
#include "reference.hpp"

namespace tc = tapewise::conform;

namespace {

// Prints the message and returns the usage-error exit status.
int usage_error(const std::string& message) {
  std::cerr << "tapewise-conform: " << message << "\n";
  return tc::kUsageError;
}

// A C double literal (decimal or hex, inf, nan), correctly rounded; nullopt unless it is all used.
std::optional<double> parse_double(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

// `tapewise-conform --version`: the version and the hash of the spec files it was built with.
int print_version() {
  std::cout << "tapewise-conform " << tapewise::kVersion << " (spec sha256 " << tapewise::kSpecSha256 << ")\n";
  return tc::kConforms;
}

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

int main(int argc, char** argv) {
  tapewise::reference::ensure_precision();

  // `tapewise-conform` alone, or with only options, means `run`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && args[0] == "--version") return print_version();
  const bool help = !args.empty() && (args[0] == "-h" || args[0] == "--help");
  if (args.empty() || (args[0].starts_with("-") && !help)) args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector

  CLI::App app{"tapewise-conform — conformance of tapewise's nodes to their spec (MPFR reference, "
               "spec/bounds.def, spec/special_points)",
               "tapewise-conform"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 conforms, 1 a violation, 2 a usage or input error. "
             "`tapewise-conform --version` prints the version and the spec's hash.");

  // run
  std::string ops = "all", dtype = "all", backend = "auto", json, special;
  // --cases and --seed are read as text and checked here: CLI11 wraps a negative seed around.
  std::string cases = std::to_string(tc::kDefaultCases), seed;
  CLI::App* run = app.add_subcommand("run", "every node on the production backend vs the reference (default)");
  run->add_option("--ops", ops, "comma-separated node names, or all")->capture_default_str();
  run->add_option("--dtype", dtype, "float32, float64 or all")->capture_default_str();
  run->add_option("--backend", backend, "auto (CUDA where present, else CPU), cpu or cuda")->capture_default_str();
  run->add_option("--cases", cases, "random cases per node and dtype (0 to 10^8)")->capture_default_str();
  CLI::Option* seed_option =
      run->add_option("--seed", seed, "seed of the random cases, 0 to 2^64-1 (default: a fresh one, printed)");
  run->add_option("--json", json, "write the whole report as JSON to this file");
  run->add_option("--special-points", special,
                   "path of spec/special_points (default: <bin>/../share/tapewise/special_points, else ./spec)");

  // audit
  std::string markdown;
  CLI::App* audit = app.add_subcommand("audit", "the derivative conventions, point by point, against this backend");
  audit->add_option("--ops", ops, "comma-separated node names, or all");
  audit->add_option("--dtype", dtype, "float32, float64 or all");
  audit->add_option("--backend", backend, "auto, cpu or cuda");
  audit->add_option("--markdown", markdown, "also write the audit as a Markdown document to this file");
  audit->add_option("--special-points", special, "path of spec/special_points");

  // eval
  tc::EvalOptions eval_options;
  // Scalars are read as text and converted by strtod: CLI11 goes through long double, which can
  // round a decimal twice.
  std::string c, lo, hi, eps;
  bool staged = false, fused = false;
  CLI::App* eval = app.add_subcommand("eval", "one node on .npy inputs; writes y.npy and the gradients");
  eval->add_option("op", eval_options.op, "node name")->required();
  eval->add_option("--x", eval_options.x, "input of a unary node (.npy)");
  eval->add_option("--a", eval_options.a, "first input of a binary node (.npy)");
  eval->add_option("--b", eval_options.b, "second input of a binary node (.npy)");
  eval->add_flag("--same", eval_options.same, "record a binary node as op(a, a) (give --a only); da is the total");
  eval->add_option("--g", eval_options.g, "upstream gradient (.npy); without it only y is written");
  CLI::Option* c_option = eval->add_option("--c", c, "scale's c");
  CLI::Option* lo_option = eval->add_option("--lo", lo, "clamp's lo");
  CLI::Option* hi_option = eval->add_option("--hi", hi, "clamp's hi");
  CLI::Option* eps_option = eval->add_option("--eps", eps, "safeLog's eps");
  CLI::Option* staged_flag = eval->add_flag("--staged", staged, "VJP by the spec's stages");
  CLI::Option* fused_flag = eval->add_flag("--fused", fused, "VJP by the fused kernel (default)");
  staged_flag->excludes(fused_flag);
  eval->add_option("--backend", backend, "auto, cpu or cuda");
  eval->add_option("--out", eval_options.out_dir, "output folder")->capture_default_str();
  eval->add_option("--prefix", eval_options.prefix, "prefix of the output names (e.g. out_)");

  // vectors
  tc::VectorsOptions vectors_options;
  CLI::App* vectors = app.add_subcommand("vectors", "export a conformance suite for other implementations");
  vectors->add_option("dir", vectors_options.dir, "output folder")->required();
  vectors->add_option("--ops", ops, "comma-separated node names, or all");
  vectors->add_option("--dtype", dtype, "float32, float64 or all");
  vectors->add_option("--cases", cases, "random cases per node and dtype (0 to 10^8)");
  CLI::Option* vectors_seed = vectors->add_option("--seed", seed, "seed of the random cases");
  vectors->add_option("--special-points", special, "path of spec/special_points");

  // check
  tc::CheckOptions check_options;
  CLI::App* check = app.add_subcommand("check", "grade another implementation's outputs in a vectors folder");
  check->add_option("dir", check_options.dir, "a folder written by `vectors`, with out_*.npy files")->required();
  check->add_option("--json", check_options.json_path, "write the report as JSON to this file");

  // graph
  tc::GraphCommandOptions graph_options;
  std::string graph_path = "fused";
  CLI::App* graph = app.add_subcommand("graph", "a composite function (a JSON DAG of nodes) on a tape, checked node by node");
  graph->add_option("file", graph_options.file, "the graph, schema tapewise-conform.graph/1 (see tools/conform/graph.hpp)")->required();
  graph->add_option("--backend", backend, "auto, cpu or cuda");
  graph->add_option("--path", graph_path, "VJP path: fused or staged")->check(CLI::IsMember({"fused", "staged"}))->capture_default_str();
  graph->add_flag("--dense", graph_options.dense, "backward_dense: every slot that requires grad starts at +0");
  graph->add_option("--json", graph_options.json_path, "write the report as JSON to this file");

  // sweep (sweep.cpp keeps its own options)
  auto sweep_status = tc::add_sweep_subcommand(app);

  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return tc::kUsageError;
  }

  auto selection = tc::parse_selection(ops, dtype);
  if (!selection) return usage_error(selection.error().message);
  auto backend_choice = tc::parse_backend(backend);
  if (!backend_choice) return usage_error(backend_choice.error().message);

  if (run->parsed()) {
    tc::RunOptions o;
    o.selection = *selection;
    o.backend = *backend_choice;
    auto parsed_cases = tc::parse_cases(cases, "--cases");
    if (!parsed_cases) return usage_error(parsed_cases.error().message);
    auto parsed_seed =
        seed_option->count() ? tc::parse_seed(seed, "--seed") : tapewise::Result<std::uint64_t>(fresh_seed());
    if (!parsed_seed) return usage_error(parsed_seed.error().message);
    o.cases = *parsed_cases;
    o.seed = *parsed_seed;
    o.json_path = json;
    o.special_points_path = special;
    return tc::guarded("run", [&] { return tc::run_command(o); });
  }
  if (audit->parsed()) {
    tc::AuditOptions o;
    o.selection = *selection;
    o.backend = *backend_choice;
    o.markdown_path = markdown;
    o.special_points_path = special;
    return tc::guarded("audit", [&] { return tc::audit_command(o); });
  }
  if (eval->parsed()) {
    eval_options.backend = *backend_choice;
    eval_options.path = staged ? tapewise::VjpPath::staged : tapewise::VjpPath::fused;
    const std::pair<CLI::Option*, std::pair<const std::string*, std::optional<double>*>> scalars[] = {
        {c_option, {&c, &eval_options.c}},
        {lo_option, {&lo, &eval_options.lo}},
        {hi_option, {&hi, &eval_options.hi}},
        {eps_option, {&eps, &eval_options.eps}}};
    for (const auto& [option, target] : scalars) {
      if (!option->count()) continue;
      const auto value = parse_double(*target.first);
      if (!value) return usage_error(option->get_name() + ": '" + *target.first + "' is not a number");
      *target.second = *value;
    }
    return tc::guarded("eval", [&] { return tc::eval_command(eval_options); });
  }
  if (vectors->parsed()) {
    vectors_options.selection = *selection;
    auto parsed_cases = tc::parse_cases(cases, "--cases");
    if (!parsed_cases) return usage_error(parsed_cases.error().message);
    auto parsed_seed =
        vectors_seed->count() ? tc::parse_seed(seed, "--seed") : tapewise::Result<std::uint64_t>(fresh_seed());
    if (!parsed_seed) return usage_error(parsed_seed.error().message);
    vectors_options.cases = *parsed_cases;
    vectors_options.seed = *parsed_seed;
    vectors_options.special_points_path = special;
    return tc::guarded("vectors", [&] { return tc::vectors_command(vectors_options); });
  }
  if (check->parsed()) return tc::guarded("check", [&] { return tc::check_command(check_options); });
  if (graph->parsed()) {
    graph_options.backend = *backend_choice;
    graph_options.path = graph_path == "staged" ? tapewise::VjpPath::staged : tapewise::VjpPath::fused;
    return tc::guarded("graph", [&] { return tc::graph_command(graph_options); });
  }
  const int sweep_result = tc::guarded("sweep", [&] { return sweep_status().value_or(-1); });
  if (sweep_result != -1) return sweep_result;
  return usage_error("no subcommand");
}
