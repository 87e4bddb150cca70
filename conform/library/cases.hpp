// conform/library/cases.hpp — the inputs the runner feeds a node: random values in the op's domain
// (spec/ops.def) plus its kinks and ties, bit-pattern-random values, and the special values (±0,
// subnormals, ±inf, NaN, extremes). Seeded and platform-independent: a seed reproduces every value.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <tapewise/core.hpp>
#include <tapewise/op.hpp>

namespace tapewise::conform {

// The most random cases per node and dtype that --cases or a vectors index may ask for (10^8: hours
// on a CPU, several GB of vectors); far beyond it a run would only fail to allocate, or overflow a
// count.
inline constexpr std::int64_t kMaxCases = 100'000'000;

// One batch for one node: `inputs` holds x, or a then b; g is the upstream gradient. All arrays
// have the batch's dtype and the same 1-D shape.
struct Batch {
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;
  std::vector<HostArray> inputs;
  HostArray g;
  std::int64_t size() const { return g.numel(); }
};

// The scalar sets random runs use, one batch each: the op's run_scalars (spec/ops.def), or one
// empty set for an op without scalars.
std::vector<Scalars> default_scalar_sets(Op op);
// "c=0.37", "lo=-0.5 hi=0.5", "" — the op's scalars by name, shortest round-trip decimal.
std::string scalars_text(Op op, const Scalars& s);

// The generator of one (op, dtype, scalar set) in a run with `seed`: the same seed gives the same
// values whether the run covers every node or only this one (--ops).
std::mt19937_64 batch_rng(std::uint64_t seed, Op op, DType dtype, int scalar_set, int kind);

// n cases with magnitudes in [2^domain_log2_lo, 2^domain_log2_hi), both signs unless positive_only
// (g: the same magnitudes, both signs); about one case in eight is replaced by the op's kink
// (spec/ops.def): x = ±0 (zero), b = a or ±0 vs ∓0 (tie), x at R(lo), R(hi) or a neighbour (bounds).
Batch domain_batch(Op op, DType dtype, const Scalars& s, std::int64_t n, std::mt19937_64& rng);
// n cases whose inputs and g are uniformly random bit patterns (NaNs and subnormals included).
Batch bit_pattern_batch(Op op, DType dtype, const Scalars& s, std::int64_t n, std::mt19937_64& rng);
// Every combination of the special values for the inputs, with g cycling through them too.
Batch special_value_batch(Op op, DType dtype, const Scalars& s);

// The same batch repeated until it holds at least n elements (for throughput timing).
Batch tiled(const Batch& b, std::int64_t n);

// The values every op is probed with: ±0, ±smallest subnormal, ±smallest normal, ±largest,
// ±inf, NaN, and a few small numbers — as doubles exactly representable in the dtype.
std::vector<double> special_values(DType dtype);

// A 1-D host array of the dtype from doubles (each must be representable; NaN becomes a quiet NaN).
HostArray host_array(DType dtype, const std::vector<double>& values);
// "float32"/"f32", "float64"/"f64", "bfloat16"/"bf16" or "float16"/"f16"; nullopt for anything else.
inline std::optional<DType> dtype_from_name(const std::string& name) {
  for (DType d : kDTypes)
    if (name == dtype_name(d)) return d;
  if (name == "f32") return DType::float32;
  if (name == "f64") return DType::float64;
  if (name == "bf16") return DType::bfloat16;
  if (name == "f16") return DType::float16;
  return std::nullopt;
}

}  // namespace tapewise::conform
