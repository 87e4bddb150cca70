// conform/eval.cpp — `tapewise-conform eval`: one node on the chosen backend from .npy inputs,
// writing y.npy and the gradients (dx.npy, or da.npy and db.npy) — the exchange point with numpy,
// PyTorch or any other implementation. Every input is checked before anything runs.
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "files.hpp"
#include "grade.hpp"
#include "npy.hpp"

namespace tapewise::conform {

namespace {

int input_error(const std::string& message) {
  std::cerr << "tapewise-conform eval: " << message << "\n";
  return kUsageError;
}

Error bad(const std::string& message) { return Error{ErrorCode::InvalidArgument, message}; }

using NamedPaths = std::vector<std::pair<std::string, std::string>>;  // (--name, path)

// The input files by option name, in the op's order; the options that do not apply are errors.
[[nodiscard]] Result<NamedPaths> named_inputs(const OpInfo& info, const EvalOptions& o) {
  const std::string name = info.name;
  if (o.same && info.arity == 1) return tl::unexpected(bad("--same is for binary nodes; " + name + " is unary"));
  if (info.arity == 1) {
    if (!o.a.empty() || !o.b.empty()) return tl::unexpected(bad(name + " is unary: give --x, not --a/--b"));
    if (o.x.empty()) return tl::unexpected(bad(name + " needs --x"));
    return NamedPaths{{"x", o.x}};
  }
  if (o.same) {
    if (!o.x.empty() || !o.b.empty()) return tl::unexpected(bad("--same records " + name + "(a, a): give --a only"));
    if (o.a.empty()) return tl::unexpected(bad(name + " --same needs --a"));
    if (o.g.empty()) return tl::unexpected(bad("--same needs --g (its output is the total gradient of a)"));
    return NamedPaths{{"a", o.a}};
  }
  if (!o.x.empty()) return tl::unexpected(bad(name + " is binary: give --a and --b, not --x"));
  if (o.a.empty() || o.b.empty()) return tl::unexpected(bad(name + " needs --a and --b"));
  return NamedPaths{{"a", o.a}, {"b", o.b}};
}

// Exactly the scalars the node takes (its row's scalar names), each given once.
[[nodiscard]] Result<Scalars> eval_scalars(const OpInfo& info, const EvalOptions& o) {
  for (const auto& [name, value] : o.scalars) {
    const bool known = (info.scalar_count() > 0 && name == info.scalar_names[0]) ||
                       (info.scalar_count() > 1 && name == info.scalar_names[1]);
    if (!known) return tl::unexpected(bad("--" + name + " is not a scalar of " + info.name));
  }
  Scalars s;
  double* slots[2] = {&s.s0, &s.s1};
  for (int i = 0; i < info.scalar_count(); ++i) {
    const auto given = o.scalars.find(info.scalar_names[i]);
    if (given == o.scalars.end()) return tl::unexpected(bad(std::string(info.name) + " needs --" + info.scalar_names[i]));
    *slots[i] = given->second;
  }
  return s;
}

struct Loaded {
  std::vector<HostArray> inputs;
  std::optional<HostArray> g;
};

// Reads every array and checks that all have one dtype and one shape: the node does not broadcast
// or convert.
[[nodiscard]] Result<Loaded> load_arrays(const NamedPaths& named, const std::string& g_path,
                                        std::optional<DType> dtype) {
  Loaded l;
  const bool u2_is_bfloat16 = dtype == DType::bfloat16;
  for (const auto& [name, path] : named) {
    auto array = read_npy(path, u2_is_bfloat16);
    if (!array) return tl::unexpected(bad("--" + name + " " + array.error().message));
    l.inputs.push_back(std::move(*array));
  }
  if (!g_path.empty()) {
    auto array = read_npy(g_path, u2_is_bfloat16);
    if (!array) return tl::unexpected(bad("--g " + array.error().message));
    l.g = std::move(*array);
  }
  const HostArray& first = l.inputs[0];
  if (dtype && first.dtype != *dtype)
    return tl::unexpected(bad(named[0].second + " (--" + named[0].first + ") is " + dtype_name(first.dtype) +
                              ", not --dtype " + dtype_name(*dtype)));
  auto check_like = [&](const std::string& name, const std::string& path, const HostArray& h) -> Result<void> {
    if (h.dtype != first.dtype)
      return tl::unexpected(bad(path + " (--" + name + ") is " + dtype_name(h.dtype) + " but " + named[0].second +
                                " is " + dtype_name(first.dtype)));
    if (!(h.shape == first.shape))
      return tl::unexpected(bad("shape mismatch: " + path + " (--" + name + ") has shape " + h.shape.str() + " but " +
                                named[0].second + " has " + first.shape.str()));
    return {};
  };
  for (std::size_t i = 1; i < l.inputs.size(); ++i)
    TAPEWISE_CHECK(check_like(named[i].first, named[i].second, l.inputs[i]));
  if (l.g) TAPEWISE_CHECK(check_like("g", g_path, *l.g));
  return l;
}

// The files eval will write into --out (and nowhere else): y, and the gradients when --g is given.
// The folder is created and every destination checked before the node runs, so that a refused
// dx.npy does not leave y.npy written.
[[nodiscard]] Result<std::vector<OutputTarget>> plan_outputs(const EvalOptions& o, Op op) {
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return tl::unexpected(bad(o.out_dir + ": cannot create: " + ec.message()));
  std::vector<std::string> names{"y"};
  if (!o.g.empty())
    for (const std::string& n : grad_names(op, o.same)) names.push_back(n);
  std::vector<OutputTarget> targets;
  for (const std::string& name : names) {
    const std::string file = o.prefix + name + ".npy";
    if (!is_plain_file_name(file)) return tl::unexpected(bad("output name '" + escaped(file) + "' would leave --out"));
    TAPEWISE_TRY(target, resolve_output((std::filesystem::path(o.out_dir) / file).string(), "--out"));
    if (target.kind != OutputTarget::Kind::file)
      return tl::unexpected(bad(target.path + ": is not a regular file; eval writes files only"));
    targets.push_back(std::move(target));
  }
  return targets;
}

// Writes y and the gradients as one batch: all of them, or none. Returns the paths written.
[[nodiscard]] Result<std::string> write_outputs(const std::vector<OutputTarget>& targets, const NodeOutputs& produced) {
  std::vector<const HostArray*> arrays{&produced.y};
  for (const HostArray& g : produced.grads) arrays.push_back(&g);
  if (arrays.size() != targets.size()) return tl::unexpected(bad("eval produced " + std::to_string(arrays.size()) +
                                                                 " arrays for " + std::to_string(targets.size()) + " files"));
  OutputBatch batch;
  std::string written;
  for (std::size_t k = 0; k < targets.size(); ++k) {
    TAPEWISE_CHECK(batch.add(targets[k], encode_npy(*arrays[k])));
    written += (written.empty() ? "" : ", ") + targets[k].path;
  }
  TAPEWISE_CHECK(batch.commit());
  return written;
}

}  // namespace

int eval_command(const EvalOptions& o) {
  const auto op = op_from_name(o.op);
  if (!op) return input_error("unknown node '" + escaped(o.op) + "'");
  if (o.prefix.find('/') != std::string::npos || o.prefix == "..")
    return input_error("--prefix '" + escaped(o.prefix) +
                       "' may not contain '/' or be '..' (use --out for the folder)");
  if (o.out_dir.empty()) return input_error("--out: the output folder is empty");
  const OpInfo& info = op_info(*op);
  auto named = named_inputs(info, o);
  if (!named) return input_error(named.error().message);
  auto s = eval_scalars(info, o);
  if (!s) return input_error(s.error().message);
  std::optional<DType> dtype;
  if (!o.dtype.empty()) {
    dtype = dtype_from_name(o.dtype);
    if (!dtype) return input_error("--dtype: '" + escaped_prefix(o.dtype) + "' is not float32, float64, bfloat16 or float16");
  }
  auto loaded = load_arrays(*named, o.g, dtype);
  if (!loaded) return input_error(loaded.error().message);
  const auto& [inputs, g] = *loaded;

  auto targets = plan_outputs(o, *op);
  if (!targets) return input_error(targets.error().message);

  auto be = choose_backend(o.backend, o.math);
  if (!be) return input_error("--backend cuda: " + be.error().str());
  auto produced = o.same ? run_on_tape(be->backend, *op, *s, inputs, true, *g, o.path)
                         : run_node(*be->backend, *op, *s, inputs, g ? &*g : nullptr, o.path);
  if (!produced) {
    std::cerr << "tapewise-conform eval: " << info.name << " failed on " << be->name << ": " << produced.error().str()
              << "\n";
    return kViolation;
  }
  auto written = write_outputs(*targets, *produced);
  if (!written) return input_error(written.error().message);
  std::cout << info.name << " " << dtype_name(inputs[0].dtype) << " " << inputs[0].shape.str() << " on " << be->name
            << (g ? (o.path == VjpPath::fused ? ", fused VJP" : ", staged VJP") : ", forward only") << ": wrote "
            << *written << "\n";
  return kConforms;
}

}  // namespace tapewise::conform
