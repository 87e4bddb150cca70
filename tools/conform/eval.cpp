// tools/conform/eval.cpp — `tapewise-conform eval`: one node on the chosen backend from .npy inputs,
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

}  // namespace

int eval_command(const EvalOptions& o) {
  const auto op = op_from_name(o.op);
  if (!op) return input_error("unknown node '" + escaped(o.op) + "'");
  // The outputs are written into --out and nowhere else.
  if (o.prefix.find('/') != std::string::npos || o.prefix == "..")
    return input_error("--prefix '" + escaped(o.prefix) + "' may not contain '/' or be '..' (use --out for the folder)");
  if (o.out_dir.empty()) return input_error("--out: the output folder is empty");
  const OpInfo& info = op_info(*op);

  // Inputs by name, in the op's order.
  std::vector<std::pair<std::string, std::string>> named;  // (--name, path)
  if (info.arity == 1) {
    if (!o.a.empty() || !o.b.empty()) return input_error(std::string(info.name) + " is unary: give --x, not --a/--b");
    if (o.x.empty()) return input_error(std::string(info.name) + " needs --x");
    named = {{"x", o.x}};
  } else if (o.same) {
    if (!o.x.empty() || !o.b.empty()) return input_error("--same records " + std::string(info.name) + "(a, a): give --a only");
    if (o.a.empty()) return input_error(std::string(info.name) + " --same needs --a");
    if (o.g.empty()) return input_error("--same needs --g (its output is the total gradient of a)");
    named = {{"a", o.a}};
  } else {
    if (!o.x.empty()) return input_error(std::string(info.name) + " is binary: give --a and --b, not --x");
    if (o.a.empty() || o.b.empty()) return input_error(std::string(info.name) + " needs --a and --b");
    named = {{"a", o.a}, {"b", o.b}};
  }
  if (o.same && info.arity == 1) return input_error("--same is for binary nodes; " + std::string(info.name) + " is unary");

  // Scalars: exactly the ones the node takes.
  Scalars s;
  const std::pair<const char*, const std::optional<double>*> given[] = {
      {"c", &o.c}, {"lo", &o.lo}, {"hi", &o.hi}, {"eps", &o.eps}};
  double* slots[2] = {&s.s0, &s.s1};
  for (const auto& [name, value] : given) {
    int slot = -1;
    for (int i = 0; i < info.scalar_count(); ++i)
      if (std::string(info.scalar_names[i]) == name) slot = i;
    if (slot < 0 && value->has_value()) return input_error(std::string("--") + name + " is not a scalar of " + info.name);
    if (slot >= 0 && !value->has_value()) return input_error(std::string(info.name) + " needs --" + name);
    if (slot >= 0) *slots[slot] = **value;
  }

  std::vector<HostArray> inputs;
  for (const auto& [name, path] : named) {
    auto array = read_npy(path);
    if (!array) return input_error("--" + name + " " + array.error().message);
    inputs.push_back(std::move(*array));
  }
  std::optional<HostArray> g;
  if (!o.g.empty()) {
    auto array = read_npy(o.g);
    if (!array) return input_error("--g " + array.error().message);
    g = std::move(*array);
  }
  // One dtype and one shape for every array: the node does not broadcast or convert.
  auto check_like = [&](const std::string& name, const std::string& path, const HostArray& h) -> std::string {
    const HostArray& first = inputs[0];
    if (h.dtype != first.dtype)
      return path + " (--" + name + ") is " + dtype_name(h.dtype) + " but " + named[0].second + " is " + dtype_name(first.dtype);
    if (!(h.shape == first.shape))
      return "shape mismatch: " + path + " (--" + name + ") has shape " + h.shape.str() + " but " + named[0].second +
             " has " + first.shape.str();
    return "";
  };
  for (std::size_t i = 1; i < inputs.size(); ++i)
    if (auto why = check_like(named[i].first, named[i].second, inputs[i]); !why.empty()) return input_error(why);
  if (g)
    if (auto why = check_like("g", o.g, *g); !why.empty()) return input_error(why);

  auto be = choose_backend(o.backend);
  if (!be) return input_error("--backend cuda: " + be.error().str());
  auto produced = o.same ? run_on_tape(be->backend, *op, s, inputs, true, *g, o.path)
                         : run_node(*be->backend, *op, s, inputs, g ? &*g : nullptr, o.path);
  if (!produced) {
    std::cerr << "tapewise-conform eval: " << info.name << " failed on " << be->name << ": " << produced.error().str() << "\n";
    return kViolation;
  }

  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return input_error(o.out_dir + ": cannot create: " + ec.message());
  std::vector<std::pair<std::string, const HostArray*>> outputs{{"y", &produced->y}};
  const std::vector<std::string> names = grad_names(*op, o.same);
  for (std::size_t k = 0; k < produced->grads.size(); ++k) outputs.push_back({names[k], &produced->grads[k]});
  std::string written;
  for (const auto& [name, array] : outputs) {
    const std::string file = o.prefix + name + ".npy";
    if (!is_plain_file_name(file)) return input_error("output name '" + escaped(file) + "' would leave --out");
    const std::string path = (std::filesystem::path(o.out_dir) / file).string();
    if (auto ok = write_npy(path, *array); !ok) return input_error(ok.error().message);
    written += (written.empty() ? "" : ", ") + path;
  }
  std::cout << info.name << " " << dtype_name(inputs[0].dtype) << " " << inputs[0].shape.str() << " on " << be->name
            << (g ? (o.path == VjpPath::fused ? ", fused VJP" : ", staged VJP") : ", forward only") << ": wrote "
            << written << "\n";
  return kConforms;
}

}  // namespace tapewise::conform
