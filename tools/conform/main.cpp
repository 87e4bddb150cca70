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

std::uint64_t fresh_seed() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

int main(int argc, char** argv) {
  tapewise::reference::ensure_precision();

  // `tapewise-conform` alone, or with only options, means `run`.
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool help = !args.empty() && (args[0] == "-h" || args[0] == "--help");
  if (args.empty() || (args[0].starts_with("-") && !help)) args.insert(args.begin(), "run");
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector

  CLI::App app{"tapewise-conform — conformance of tapewise's nodes to their spec (MPFR reference, "
               "spec/bounds.def, spec/special_points)",
               "tapewise-conform"};
  app.require_subcommand(1);
  app.footer("Exit status: 0 conforms, 1 a violation, 2 a usage or input error.");

  // run
  std::string ops = "all", dtype = "all", backend = "auto", json, special;
  std::int64_t cases = tc::kDefaultCases;
  std::uint64_t seed = 0;
  CLI::App* run = app.add_subcommand("run", "every node on the production backend vs the reference (default)");
  run->add_option("--ops", ops, "comma-separated node names, or all")->capture_default_str();
  run->add_option("--dtype", dtype, "float32, float64 or all")->capture_default_str();
  run->add_option("--backend", backend, "auto (CUDA where present, else CPU), cpu or cuda")->capture_default_str();
  run->add_option("--cases", cases, "random cases per node and dtype")->capture_default_str()->check(CLI::NonNegativeNumber);
  CLI::Option* seed_option = run->add_option("--seed", seed, "seed of the random cases (default: a fresh one, printed)");
  run->add_option("--json", json, "write the whole report as JSON to this file");
  run->add_option("--special-points", special, "path of spec/special_points (default: found beside the sources)");

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
  vectors->add_option("--cases", cases, "random cases per node and dtype")->check(CLI::NonNegativeNumber);
  CLI::Option* vectors_seed = vectors->add_option("--seed", seed, "seed of the random cases");
  vectors->add_option("--special-points", special, "path of spec/special_points");

  // check
  tc::CheckOptions check_options;
  CLI::App* check = app.add_subcommand("check", "grade another implementation's outputs in a vectors folder");
  check->add_option("dir", check_options.dir, "a folder written by `vectors`, with out_*.npy files")->required();
  check->add_option("--json", check_options.json_path, "write the report as JSON to this file");

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
    o.cases = cases;
    o.seed = seed_option->count() ? seed : fresh_seed();
    o.json_path = json;
    o.special_points_path = special;
    return tc::run_command(o);
  }
  if (audit->parsed()) {
    tc::AuditOptions o;
    o.selection = *selection;
    o.backend = *backend_choice;
    o.markdown_path = markdown;
    o.special_points_path = special;
    return tc::audit_command(o);
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
    return tc::eval_command(eval_options);
  }
  if (vectors->parsed()) {
    vectors_options.selection = *selection;
    vectors_options.cases = cases;
    vectors_options.seed = vectors_seed->count() ? seed : fresh_seed();
    vectors_options.special_points_path = special;
    return tc::vectors_command(vectors_options);
  }
  if (check->parsed()) return tc::check_command(check_options);
  return usage_error("no subcommand");
}
