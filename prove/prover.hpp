// prove/prover.hpp — `tapewise-conform prove`: for every node and dtype, the theorem that each way
// tapewise computes the node (forms.hpp) equals the spec's staged form on every input, up to NaN,
// extracted from the kernels' own code, proved by hash-consing and, for the subterms that differ,
// by an SMT solver (prove/solver.py, Bitwuzla); a refutation is replayed on the real kernels.
#pragma once

#include <string>
#include <vector>

#include <tapewise/backend.hpp>

namespace tapewise::prove {

struct ProveOptions {
  std::vector<Op> ops;        // in op-table order
  std::vector<DType> dtypes;  // float32 first
  std::string json_path;      // "" none, "-" standard output
  std::string backend = "auto";  // the replays' backend: auto (CUDA where present), cpu, cuda
  std::string solver;         // path of solver.py ("" : <bin>/../share/tapewise/prove_solver.py, else prove/solver.py)
  std::string python;         // the Python that runs it ("" : $TAPEWISE_PYTHON, else python3)
  double timeout_s = 30;      // per solver query
  bool frameworks = false;    // also the ATen backward formulas (frameworks.cpp) against the spec
  std::string program_name = "tapewise-conform prove";
};

// Exit status: 0 every claim proven, 1 one refuted or unknown, 2 a usage or model error.
int prove_command(const ProveOptions& options);

}  // namespace tapewise::prove
