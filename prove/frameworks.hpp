// prove/frameworks.hpp — the prover's framework audit: PyTorch's ATen backward kernels that are
// plain IEEE graphs, transcribed with their opmath rules (frameworks.cpp cites the commit), held
// against the spec's staged VJP as tapewise's own code computes it.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>
#include <tapewise/core.hpp>

#include "sym.hpp"

namespace tapewise::prove {

// prove(u, v, out): the engine's verdict on u == v (up to NaN), details written to *out.
using ProveFn = std::function<bool(NodeId, NodeId, nlohmann::json*)>;
nlohmann::json frameworks_audit(const std::vector<DType>& dtypes, const ProveFn& prove);

}  // namespace tapewise::prove
