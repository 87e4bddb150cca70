// prove/main.cpp — tapewise-prove: the prover alone (no MPFR reference, no runner), the program the
// mutation test (prove/mutants.py) builds from a mutated copy of the kernels. The same options
// as `tapewise-conform prove`, which is what users run.
#include <cstdlib>
#include <iostream>
#include <string>

#include "prover.hpp"

namespace {
int usage(const char* why) {
  std::cerr << "tapewise-prove: " << why << "\n"
            << "usage: tapewise-prove [--ops a,b|all] [--dtype float32,float64,bfloat16,float16|all] [--json FILE|-]\n"
            << "                      [--backend auto|cpu|cuda]"
               " [--solver solver.py] [--python python3] [--timeout S] [--frameworks]\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  using namespace tapewise;
  prove::ProveOptions o;
  o.program_name = "tapewise-prove";
  std::string ops = "all", dtype = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--frameworks") { o.frameworks = true; continue; }
    if (a != "--ops" && a != "--dtype" && a != "--json" && a != "--backend" && a != "--solver" && a != "--python" &&
        a != "--timeout")
      return usage(("unknown option " + a).c_str());
    if (!(v = next())) return usage(("missing value of " + a).c_str());
    if (a == "--ops") ops = v;
    else if (a == "--dtype") dtype = v;
    else if (a == "--json") o.json_path = v;
    else if (a == "--backend") o.backend = v;
    else if (a == "--solver") o.solver = v;
    else if (a == "--python") o.python = v;
    else o.timeout_s = std::atof(v);
  }
  for (int k = 0; k < kOpCount; ++k) {
    const std::string name = kOps[k].name;
    if (ops == "all" || ("," + ops + ",").find("," + name + ",") != std::string::npos) o.ops.push_back(kOps[k].op);
  }
  if (o.ops.empty()) return usage("no node selected");
  // Every dtype named (long or short name), in table order.
  const std::string list = "," + dtype + ",";
  const char* short_names[] = {"f32", "f64", "bf16", "f16"};
  for (int k = 0; k < kDTypeCount; ++k) {
    const std::string name = dtype_name(kDTypes[k]);
    if (dtype == "all" || list.find("," + name + ",") != std::string::npos ||
        list.find("," + std::string(short_names[k]) + ",") != std::string::npos)
      o.dtypes.push_back(kDTypes[k]);
  }
  if (o.dtypes.empty()) return usage("--dtype: float32, float64, bfloat16, float16 (comma-separated) or all");
  return prove::prove_command(o);
}
