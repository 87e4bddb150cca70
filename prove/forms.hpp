// prove/forms.hpp — where the prover's graphs come from: the ways tapewise computes a node
// (forward kernel, staged forward, fused VJP kernel, staged VJP, tape programs, backward through the
// tape, repeated parents), each written once against the public API and an Env, and run either on the
// symbolic backend (values are graph nodes: extraction) or on a real backend (values are bits: the
// replay of a counterexample). A form calls the library; it holds no formula.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <tapewise/tape.hpp>

namespace tapewise::prove {

// The values a form reads and writes: symbolic (graph node ids) or real (bit patterns).
class Env {
 public:
  virtual ~Env() = default;
  virtual std::shared_ptr<Backend> backend() = 0;
  // A 1-element buffer of `dtype` holding the named input (x, a, b, g).
  [[nodiscard]] virtual Result<Buffer> input(const std::string& name, DType dtype, AllocTag tag) = 0;
  // The node's scalars: symbolic sentinels, or a counterexample's values.
  virtual Scalars scalars() = 0;
  // Records output `name` (y, dx, da, db) from element 0 of `buffer`.
  [[nodiscard]] virtual Result<void> output(const std::string& name, const Buffer& buffer) = 0;
};

// One way of computing a node: its name (e.g. "vjp.fused"), what it is, and how it runs.
struct Form {
  std::string name;
  std::string what;
  bool binary_only = false;  // repeated-parent forms: op(a, a)
  std::function<Result<void>(Env&, Op, DType)> run;
};
// Every form, in report order.
const std::vector<Form>& forms();
const Form& form(const std::string& name);

// A theorem: form `lhs` equals form `rhs` (the spec's staged form) on every output, up to NaN.
struct Claim {
  std::string column;  // forward, vjp, tape, repeated
  std::string lhs, rhs;
};
const std::vector<Claim>& claims();

// The symbolic backend: buffers hold Sym<float> / Sym<double> / Sym16<BF16> / Sym16<F16> (sym.hpp);
// forward, vjp_fused and prim run the library's dispatch (dispatch_forward / dispatch_vjp /
// dispatch_prim) with that T, and run_program runs the tape program interpreter (run_steps_at) with
// it on `lanes` lanes (1: the CUDA runner's small pieces; 4: CUDA's large pieces and the CPU backend,
// whose blocks of 256 lanes run the same per-lane code: docs/proof.md).
std::shared_ptr<Backend> make_symbolic_backend(int lanes);

// Runs every applicable form of `op` in `dtype` symbolically: form name -> output name -> node id.
using Extracted = std::map<std::string, std::map<std::string, std::uint32_t>>;
[[nodiscard]] Result<Extracted> extract(Op op, DType dtype, int lanes, std::size_t* paths_explored);

// Runs form `name` of `op` on a real backend with the given input bits (name -> bits; s0/s1 are
// doubles' bits): output name -> bits.
using Bits = std::map<std::string, std::uint64_t>;
[[nodiscard]] Result<Bits> replay(const std::shared_ptr<Backend>& backend, const std::string& form_name, Op op,
                                  DType dtype, const Bits& inputs);

}  // namespace tapewise::prove
