// conform/main.cpp — tapewise-conform's command line: run (the default), audit, eval, vectors,
// check, graph, sweep, ops, prove. Each subcommand registers its options with CLI11 and says how it runs; the
// commands themselves are in commands.hpp. Exit 2 on any usage error.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <tapewise/version.hpp>

#include "commands.hpp"
#include "escaped.hpp"
#include "ops_command.hpp"
#include "prover.hpp"
#include "reference.hpp"
#include "suggest.hpp"

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

// Options several subcommands share; only one subcommand is parsed per call.
struct CommonText {
  std::string ops = "all", dtype = "all", backend = "auto", math, special;
  // --cases and --seed are read as text and checked here: CLI11 wraps a negative seed around.
  std::string cases = std::to_string(tc::kDefaultCases), seed;
};

// A registered subcommand: its CLI11 node, and what runs it once parsed (an exit status).
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
};

// Parses --ops/--dtype/--backend, then --cases/--seed where the subcommand has them, into `o`.
template <class Options>
std::optional<int> read_selection(const CommonText& t, Options& o,
                                  std::span<const tapewise::DType> covered = tapewise::kDTypes) {
  auto selection = tc::parse_selection(t.ops, t.dtype, covered);
  if (!selection) return usage_error(selection.error().message);
  o.selection = *selection;
  if constexpr (requires { o.backend; }) {
    auto backend = tc::parse_backend(t.backend);
    if (!backend) return usage_error(backend.error().message);
    o.backend = *backend;
    auto math = tc::parse_math(t.math);
    if (!math) return usage_error(math.error().message);
    o.math = *math;
  }
  return std::nullopt;
}

template <class Options>
std::optional<int> read_cases_and_seed(const CommonText& t, const CLI::Option* seed_option, Options& o) {
  auto cases = tc::parse_cases(t.cases, "--cases");
  if (!cases) return usage_error(cases.error().message);
  auto seed = seed_option->count() ? tc::parse_seed(t.seed, "--seed") : tapewise::Result<std::uint64_t>(fresh_seed());
  if (!seed) return usage_error(seed.error().message);
  o.cases = *cases;
  o.seed = *seed;
  return std::nullopt;
}

Subcommand add_run(CLI::App& app, CommonText& t) {
  auto json = std::make_shared<std::string>(), junit = std::make_shared<std::string>();
  CLI::App* run = app.add_subcommand("run", "every node on the production backend vs the reference (default)");
  run->add_option("--ops", t.ops, "comma-separated node names, or all")->capture_default_str();
  run->add_option("--dtype", t.dtype, "float32, float64, bfloat16, float16, a comma-separated list of them, or all")
      ->capture_default_str();
  run->add_option("--backend", t.backend, "auto (CUDA where present, else CPU), cpu or cuda")->capture_default_str();
  run->add_option("--math", t.math, "aten (ATen's libm: CUDA's default) or exact (tapewise's own: the CPU backend's only mode)");
  run->add_option("--cases", t.cases, "random cases per node and dtype (0 to 10^8; a pass needs at least 1)")
      ->type_name("N")
      ->capture_default_str();
  CLI::Option* seed =
      run->add_option("--seed", t.seed, "seed of the random cases, 0 to 2^64-1 (default: a fresh one, printed)")
          ->type_name("UINT64");
  run->add_option("--json", *json, "write the whole report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  run->add_option("--junit", *junit, "write a JUnit XML report, one test case per node and dtype (- for standard output)")
      ->type_name("FILE|-");
  run->add_option("--special-points", t.special,
                  "path of spec/special_points (default: <bin>/../share/tapewise/special_points, else ./spec)");
  return {run, [&t, seed, json, junit] {
            tc::RunOptions o;
            if (auto bad = read_selection(t, o)) return *bad;
            if (auto bad = read_cases_and_seed(t, seed, o)) return *bad;
            o.json_path = *json;
            o.junit_path = *junit;
            o.special_points_path = t.special;
            return tc::guarded("run", [&] { return tc::run_command(o); });
          }};
}

Subcommand add_audit(CLI::App& app, CommonText& t) {
  auto markdown = std::make_shared<std::string>(), json = std::make_shared<std::string>(),
       junit = std::make_shared<std::string>();
  CLI::App* audit = app.add_subcommand("audit", "the derivative conventions, point by point, against this backend");
  audit->add_option("--ops", t.ops, "comma-separated node names, or all");
  audit->add_option("--dtype", t.dtype, "float32, float64, bfloat16, float16, a comma-separated list of them, or all");
  audit->add_option("--backend", t.backend, "auto, cpu or cuda");
  audit->add_option("--math", t.math, "aten (ATen's libm: CUDA's default) or exact (tapewise's own: the CPU backend's only mode)");
  audit->add_option("--markdown", *markdown, "also write the audit as a Markdown document to this file");
  audit->add_option("--json", *json, "write the audit as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  audit->add_option("--junit", *junit, "write a JUnit XML report, one test case per node and dtype (- for standard output)")
      ->type_name("FILE|-");
  audit->add_option("--special-points", t.special, "path of spec/special_points");
  return {audit, [&t, markdown, json, junit] {
            tc::AuditOptions o;
            if (auto bad = read_selection(t, o)) return *bad;
            o.markdown_path = *markdown;
            o.json_path = *json;
            o.junit_path = *junit;
            o.special_points_path = t.special;
            return tc::guarded("audit", [&] { return tc::audit_command(o); });
          }};
}

// eval's scalars are read as text and converted by strtod: CLI11 goes through long double, which can
// round a decimal twice.
struct EvalText {
  tc::EvalOptions options;
  std::map<std::string, std::string> scalar_text;  // by scalar name (std::map: stable addresses for CLI11)
  bool staged = false, fused = false;
  std::vector<std::pair<CLI::Option*, std::string>> scalars;  // the option and its scalar name
};

// Every scalar name of the op table, in table order, with the nodes that take it ("scale's c"):
// each becomes an `eval --NAME` option, so a new scalar in spec/ops.def is one without more code.
std::vector<std::pair<std::string, std::string>> scalar_options() {
  std::vector<std::pair<std::string, std::string>> options;
  for (const tapewise::OpInfo& info : tapewise::kOps)
    for (int k = 0; k < info.scalar_count(); ++k) {
      const std::string name = info.scalar_names[k];
      auto it = std::find_if(options.begin(), options.end(), [&](const auto& o) { return o.first == name; });
      if (it == options.end()) it = options.insert(options.end(), {name, ""});
      it->second += (it->second.empty() ? "" : ", ") + std::string(info.name) + "'s " + name;
    }
  return options;
}

Subcommand add_eval(CLI::App& app, CommonText& t) {
  auto e = std::make_shared<EvalText>();
  CLI::App* eval = app.add_subcommand("eval", "one node on .npy inputs; writes y.npy and the gradients");
  eval->add_option("op", e->options.op, "node name")->required();
  eval->add_option("--x", e->options.x, "input of a unary node (.npy)");
  eval->add_option("--a", e->options.a, "first input of a binary node (.npy)");
  eval->add_option("--b", e->options.b, "second input of a binary node (.npy)");
  eval->add_flag("--same", e->options.same, "record a binary node as op(a, a) (give --a only); da is the total");
  eval->add_option("--g", e->options.g, "upstream gradient (.npy); without it only y is written");
  for (const auto& [name, help] : scalar_options())
    e->scalars.emplace_back(eval->add_option("--" + name, e->scalar_text[name], help)->type_name("FLOAT"), name);
  CLI::Option* staged = eval->add_flag("--staged", e->staged, "VJP by the spec's stages");
  staged->excludes(eval->add_flag("--fused", e->fused, "VJP by the fused kernel (default)"));
  eval->add_option("--backend", t.backend, "auto, cpu or cuda");
  eval->add_option("--math", t.math, "aten (ATen's libm: CUDA's default) or exact (tapewise's own: the CPU backend's only mode)");
  eval->add_option("--out", e->options.out_dir, "output folder")->capture_default_str();
  eval->add_option("--prefix", e->options.prefix, "prefix of the output names (e.g. out_)");
  eval->add_option("--dtype", e->options.dtype,
                   "the inputs' dtype (default: the files'); bfloat16 reads and writes '<u2' files of bfloat16 bits "
                   "(numpy has no bfloat16); float16 is '<f2'");
  return {eval, [&t, e] {
            auto backend = tc::parse_backend(t.backend);
            if (!backend) return usage_error(backend.error().message);
            e->options.backend = *backend;
            auto math = tc::parse_math(t.math);
            if (!math) return usage_error(math.error().message);
            e->options.math = *math;
            e->options.path = e->staged ? tapewise::VjpPath::staged : tapewise::VjpPath::fused;
            for (const auto& [option, name] : e->scalars) {
              if (!option->count()) continue;
              const std::string& text = e->scalar_text[name];
              const auto value = parse_double(text);
              if (!value) return usage_error(option->get_name() + ": '" + text + "' is not a number");
              e->options.scalars[name] = *value;
            }
            return tc::guarded("eval", [&] { return tc::eval_command(e->options); });
          }};
}

Subcommand add_vectors(CLI::App& app, CommonText& t) {
  auto o = std::make_shared<tc::VectorsOptions>();
  CLI::App* vectors = app.add_subcommand("vectors", "export a conformance suite for other implementations");
  vectors->add_option("dir", o->dir, "output folder")->required();
  vectors->add_option("--ops", t.ops, "comma-separated node names, or all");
  vectors->add_option("--dtype", t.dtype,
                      "float32, float64, bfloat16, float16, a comma-separated list of them, or all (.npy: float16 "
                      "as '<f2', bfloat16 as its bits, '<u2')");
  vectors->add_option("--cases", t.cases,
                      "random cases per node and dtype (0 to 10^8; check passes only with at least 1)")
      ->type_name("N");
  CLI::Option* seed = vectors->add_option("--seed", t.seed, "seed of the random cases")->type_name("UINT64");
  vectors->add_option("--special-points", t.special, "path of spec/special_points");
  return {vectors, [&t, seed, o] {
            if (auto bad = read_selection(t, *o)) return *bad;
            if (auto bad = read_cases_and_seed(t, seed, *o)) return *bad;
            o->special_points_path = t.special;
            return tc::guarded("vectors", [&] { return tc::vectors_command(*o); });
          }};
}

Subcommand add_check(CLI::App& app) {
  auto o = std::make_shared<tc::CheckOptions>();
  CLI::App* check = app.add_subcommand("check", "grade another implementation's outputs in a vectors folder");
  check->add_option("dir", o->dir, "a folder written by `vectors`, with out_*.npy files")->required();
  check->add_option("--json", o->json_path, "write the report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  check->add_option("--junit", o->junit_path, "write a JUnit XML report, one test case per node and dtype (- for standard output)")
      ->type_name("FILE|-");
  check->add_option("--special-points", o->special_points_path,
                    "the special points the special suites are regraded from (default: the runner's own, as for run)");
  return {check, [o] { return tc::guarded("check", [&] { return tc::check_command(*o); }); }};
}

Subcommand add_graph(CLI::App& app, CommonText& t) {
  auto o = std::make_shared<tc::GraphCommandOptions>();
  auto path = std::make_shared<std::string>("fused");
  CLI::App* graph =
      app.add_subcommand("graph", "a composite function (a JSON DAG of nodes) on a tape, checked node by node");
  graph->add_option("file", o->file, "the graph, schema tapewise-conform.graph/1 (see conform/library/graph.hpp)")
      ->required();
  graph->add_option("--backend", t.backend, "auto, cpu or cuda");
  graph->add_option("--math", t.math, "aten (ATen's libm: CUDA's default) or exact (tapewise's own: the CPU backend's only mode)");
  graph->add_option("--path", *path, "VJP path: fused or staged")
      ->check(CLI::IsMember({"fused", "staged"}))
      ->capture_default_str();
  graph->add_flag("--dense", o->dense, "backward_dense: every slot that requires grad starts at +0");
  graph->add_option("--json", o->json_path, "write the report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  return {graph, [&t, o, path] {
            auto backend = tc::parse_backend(t.backend);
            if (!backend) return usage_error(backend.error().message);
            o->backend = *backend;
            auto math = tc::parse_math(t.math);
            if (!math) return usage_error(math.error().message);
            o->math = *math;
            o->path = *path == "staged" ? tapewise::VjpPath::staged : tapewise::VjpPath::fused;
            return tc::guarded("graph", [&] { return tc::graph_command(*o); });
          }};
}

Subcommand add_prove(CLI::App& app, CommonText& t) {
  auto o = std::make_shared<tapewise::prove::ProveOptions>();
  CLI::App* prove = app.add_subcommand(
      "prove", "prove every node's fused forward and VJP equal to the spec's staging, for every input (SMT)");
  prove->add_option("--ops", t.ops, "comma-separated node names, or all");
  prove->add_option("--dtype", t.dtype, "float32, float64, bfloat16, float16, a comma-separated list of them, or all");
  prove->add_option("--backend", t.backend, "where refutations are replayed: auto, cpu or cuda");
  prove->add_option("--json", o->json_path, "write the proof report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  prove->add_option("--solver", o->solver,
                    "the solver script (default: <bin>/../share/tapewise/prove_solver.py, else prove/solver.py)");
  prove->add_option("--python", o->python, "the Python that runs it, with bitwuzla (default: $TAPEWISE_PYTHON, else python3)");
  prove->add_option("--timeout", o->timeout_s, "seconds per solver query")->type_name("S")->capture_default_str();
  prove->add_flag("--frameworks", o->frameworks, "also hold PyTorch's ATen backward formulas against the spec");
  return {prove, [&t, o] {
            auto selection = tc::parse_selection(t.ops, t.dtype);
            if (!selection) return usage_error(selection.error().message);
            if (t.backend != "auto" && t.backend != "cpu" && t.backend != "cuda")
              return usage_error("--backend: auto, cpu or cuda, not '" + tc::escaped_prefix(t.backend) + "'");
            // Below 1 ms the solver would be sent 0, which Bitwuzla reads as no limit.
            if (!(o->timeout_s >= 0.001 && o->timeout_s <= 3600))
              return usage_error("--timeout: from 0.001 (1 ms) to 3600 seconds");
            o->ops = selection->ops;
            o->dtypes = selection->dtypes;
            o->backend = t.backend;
            return tc::guarded("prove", [&] { return tapewise::prove::prove_command(*o); });
          }};
}

Subcommand add_ops(CLI::App& app) {
  auto status = tc::add_ops_subcommand(app);  // ops_command.cpp keeps its own options
  return {app.get_subcommand("ops"), [status] { return status().value_or(tc::kUsageError); }};
}

Subcommand add_sweep(CLI::App& app) {
  auto status = tc::add_sweep_subcommand(app);  // sweep.cpp keeps its own options
  return {app.get_subcommand("sweep"), [status] { return status().value_or(tc::kUsageError); }};
}

// Every name `sub` accepts as an option token: --long and -s forms, and help.
std::vector<std::string> option_names(const CLI::App& sub) {
  std::vector<std::string> names{"--help", "-h"};
  for (const CLI::Option* option : sub.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// The first token of `args` (in order) that looks like an option `sub` does not have, with the closest
// one it has; nullopt when every option token is known (the parse failed for another reason).
std::optional<std::string> unknown_option_message(const CLI::App& sub, const std::vector<std::string>& args) {
  const std::vector<std::string> names = option_names(sub);
  for (const std::string& token : args) {
    if (token.size() < 2 || token[0] != '-' || token == "--" || parse_double(token)) continue;
    const std::string name = token.substr(0, token.find('='));
    if (std::find(names.begin(), names.end(), name) != names.end()) continue;
    return sub.get_name() + ": unknown option '" + tc::escaped_prefix(name) + "'" + tc::did_you_mean(name, names);
  }
  return std::nullopt;
}

// A report the parsed subcommand was asked to write: the option and its path.
struct ReportOutput {
  std::string option, path;
  std::string text() const { return option + " " + path; }
};

std::vector<ReportOutput> report_outputs(const CLI::App& sub) {
  std::vector<ReportOutput> outputs;
  for (const char* name : {"--json", "--junit", "--markdown"}) {
    const CLI::Option* option = sub.get_option_no_throw(name);
    if (option == nullptr) continue;
    for (const std::string& value : option->results()) outputs.push_back({name, value});
  }
  return outputs;
}

// Where a report file lands: an existing file's device and inode (any path or link to it), else its
// absolute path with the folders resolved. A character device (/dev/null, a terminal) takes each
// report whole, one after the other, so it is no place two reports clash: nullopt.
std::optional<std::string> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode)) return std::nullopt;
    return "inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  const std::filesystem::path resolved = ec ? absolute : std::filesystem::weakly_canonical(absolute, ec);
  return "path " + (ec ? absolute.lexically_normal().string() : resolved.string());
}

// Two reports on one stream would interleave into neither JSON nor XML, and two to one file would
// overwrite each other: the message refusing the first such pair, nullopt when each has its own.
std::optional<std::string> clashing_reports(const std::string& command, const std::vector<ReportOutput>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const bool first_out = tc::names_standard_output(outputs[i].path);
      const bool second_out = tc::names_standard_output(outputs[j].path);
      const std::string both = command + ": " + tc::escaped_prefix(outputs[i].text()) + " and " +
                               tc::escaped_prefix(outputs[j].text()) + " both write to ";
      if (first_out && second_out)
        return both + "standard output; write one of them to a file (e.g. --junit report.xml)";
      const std::optional<std::string> first_file = file_identity(outputs[i].path);
      if (!first_out && !second_out && first_file && first_file == file_identity(outputs[j].path))
        return both + "the same file; give each report a file of its own";
    }
  return std::nullopt;
}

// With --json - (or --junit -), standard output carries the report alone: the human text (table,
// verdict, seed) goes to stderr, and the writer (files.hpp) writes "-" to the original stdout.
void move_human_text_to_stderr() {
  std::cout.flush();
  std::fflush(stdout);
  const int report_fd = ::dup(STDOUT_FILENO);
  if (report_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) return;  // both stay on stdout, as before
  tc::machine_output_fd() = report_fd;
}

// --quiet: the human text (whatever is now standard output) goes to /dev/null; a report sent to
// standard output ("-") still reaches the original one.
void silence_human_text() {
  tc::quiet_mode() = true;
  std::cout.flush();
  std::fflush(stdout);
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd < 0) return;  // the text stays where it was: louder, never lost
  ::dup2(null_fd, STDOUT_FILENO);
  ::close(null_fd);
}

// The command's status, unless its standard output could not be written (a full disk, a closed
// pipe, /dev/full): then the table and verdict were lost, and that is an error, not a pass.
int with_stdout_written(int status) {
  std::cout.flush();
  const bool lost = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return status;
  std::cerr << "tapewise-conform: cannot write to standard output: " << std::strerror(errno) << "\n";
  return tc::kUsageError;
}

// What each subcommand's exit statuses mean, at the end of its --help (sweep's own footer says it).
const char* exit_status_footer(const std::string& subcommand) {
  static const std::map<std::string, const char*> footers = {
      {"run",
       "Exit status: 0 every node conforms in every dtype run; 1 a violation; 2 no verdict (a node, dtype or output "
       "with nothing graded, or no special point) or a usage, input or backend error."},
      {"audit",
       "Exit status: 0 every special point holds on both VJP paths; 1 one does not; 2 no verdict (a selected node "
       "and dtype without rows in the special points) or a usage, input or backend error."},
      {"eval",
       "Exit status: 0 the outputs were written; 1 the node failed on the backend (nothing written); 2 a usage or "
       "input error. eval grades nothing."},
      {"vectors", "Exit status: 0 the suite was written; 2 a usage or input error. vectors grades nothing."},
      {"check",
       "Exit status: 0 every node conforms; 1 a violation (a value off its bound or its special point, or an "
       "answered suite with an output missing or malformed); 2 no verdict (a suite not answered, or a node, dtype "
       "or output with nothing graded) or a usage or input error (an index, input or special point that cannot "
       "be read)."},
      {"graph",
       "Exit status: 0 every node's values and gradients conform; 1 a violation; 2 no verdict (a node with nothing "
       "graded), a bad graph, or a usage or backend error."},
      {"ops", "Exit status: 0 the table or card was printed or written; 2 a usage error."},
      {"prove",
       "Exit status: 0 every claim proven; 1 a claim refuted; 2 no verdict (the solver gave no answer, or a node "
       "outside the model) or a usage or backend error."}};
  const auto it = footers.find(subcommand);
  return it == footers.end() ? nullptr : it->second;
}

}  // namespace

static int run_command_line(int argc, char** argv);

// Anything a command throws (the reference's std:: exceptions) ends the run with exit 2, named.
int main(int argc, char** argv) {
  return tc::exit_status_guarded("tapewise-conform", [&] { return run_command_line(argc, argv); });
}

static int run_command_line(int argc, char** argv) {
  tapewise::reference::ensure_precision();

  // `tapewise-conform` alone, or with only options, means `run`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--version" || args[0] == "-V")) return print_version();
  const bool help = !args.empty() && (args[0] == "-h" || args[0] == "--help");
  if (args.empty() || (args[0].starts_with("-") && !help)) args.insert(args.begin(), "run");

  CLI::App app{
      "tapewise-conform — conformance of tapewise's nodes to their spec (MPFR reference, "
      "spec/bounds.def, spec/special_points)",
      "tapewise-conform"};
  app.require_subcommand(1);
  // Handled above, before parsing (alone on the line); registered so that --help lists it.
  bool version_listed = false;
  app.add_flag("-V,--version", version_listed, "print the version and the hash of the spec files, then exit");
  app.footer("Exit status: 0 conforms, 1 a violation, 2 no verdict or a usage or input error; each subcommand's "
             "--help says what its own mean.");
  CommonText common;
  const Subcommand subcommands[] = {
      add_run(app, common), add_audit(app, common), add_eval(app, common), add_vectors(app, common),
      add_check(app),       add_graph(app, common), add_sweep(app),        add_ops(app),
      add_prove(app, common)};
  std::vector<std::string> subcommand_names;
  bool quiet = false;
  for (const Subcommand& sub : subcommands) {
    subcommand_names.push_back(sub.app->get_name());
    sub.app->add_flag("-q,--quiet", quiet,
                      "print nothing on standard output but a report sent there (-); errors, warnings and the "
                      "reason for no verdict still go to stderr");
    if (const char* footer = exit_status_footer(sub.app->get_name())) sub.app->footer(footer);
  }
  if (!help && std::find(subcommand_names.begin(), subcommand_names.end(), args[0]) == subcommand_names.end())
    return usage_error("unknown subcommand '" + tc::escaped_prefix(args[0]) + "'" +
                       tc::did_you_mean(args[0], subcommand_names) + " (subcommands: run, audit, eval, vectors, "
                       "check, graph, sweep, ops, prove)");
  const std::vector<std::string> in_order = args;
  std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (!help)
      if (auto unknown = unknown_option_message(*app.get_subcommand(in_order[0]), in_order))
        return usage_error(*unknown);
    app.exit(e);
    return tc::kUsageError;
  }
  for (const Subcommand& sub : subcommands) {
    if (!sub.app->parsed()) continue;
    const std::vector<ReportOutput> outputs = report_outputs(*sub.app);
    if (auto clash = clashing_reports(sub.app->get_name(), outputs)) return usage_error(*clash);
    const bool report_to_stdout = std::any_of(outputs.begin(), outputs.end(), [](const ReportOutput& o) {
      return tc::names_standard_output(o.path);
    });
    if (report_to_stdout) move_human_text_to_stderr();
    if (quiet) silence_human_text();
    return with_stdout_written(sub.run());
  }
  return usage_error("no subcommand");
}
