// prove/frameworks.cpp — PyTorch's ATen backward kernels that are plain IEEE graphs, transcribed
// from their CUDA sources with their opmath rules (for float and double, opmath_t is the type itself;
// C++ evaluates a * b * c as (a * b) * c; constexpr constants are folded by the compiler, once, as
// written), held against the spec's staged VJP as tapewise's own staged_vjp computes it (the
// symbolic backend). A transcription is a second copy of someone else's formula, by design: it is
// what is being audited. Sources, pytorch/pytorch:
//   tanh_backward, sigmoid_backward  aten/src/ATen/native/cuda/BinaryMiscBackwardOpsKernels.cu @ cf52f9c3
//   threshold_backward               aten/src/ATen/native/cuda/ActivationThresholdKernel.cu    @ 05f814fe
//   silu_backward                    aten/src/ATen/native/cuda/ActivationSiluKernel.cu         @ 00895504
//   gelu_backward (tanh)             aten/src/ATen/native/cuda/ActivationGeluKernel.cu         @ 043e4c88
// Forward values the backward reads (ATen's y = tanh(x), sigmoid(x) = 1 / (1 + exp(-x))) are
// written with the same libm calls, which the prover leaves uninterpreted.
#include "frameworks.hpp"

#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "eval.hpp"
#include "forms.hpp"

namespace tapewise::prove {
namespace {

using json = nlohmann::json;

template <class F>
Sym<F> var(const char* name) {
  return Sym<F>::of(graph().var(name, sort_of<F>()));
}

// at::native's kernels, T = scalar_t = opmath_t (float, double).
template <class F>
Sym<F> aten_tanh_backward(Sym<F> g, Sym<F> x) {
  using T = Sym<F>;
  const T b = lm_tanh(x);        // tanh's result, the `b` tanh_backward reads
  return g * (T(1.) - b * b);    // a * (scalar_t{1.} - b * b)
}
template <class F>
Sym<F> aten_sigmoid_backward(Sym<F> g, Sym<F> x) {
  using T = Sym<F>;
  const T b = T(1) / (T(1) + lm_exp(-x));  // sigmoid's result: one / (one + exp(-x))
  return g * (T(1.) - b) * b;              // a * (scalar_t(1.) - b) * b
}
// relu's derivative is threshold_backward(grad, result, 0): x <= threshold ? value : other, with
// x = relu's result, other = grad, threshold = value = 0. Transcribed on the node's input x (relu's
// result is <= 0 exactly when x is, NaN aside: see the report).
template <class F>
Sym<F> aten_threshold_backward(Sym<F> g, Sym<F> x) {
  using T = Sym<F>;
  return x <= T(0) ? T(0) : g;
}
template <class F>
Sym<F> aten_silu_backward(Sym<F> dy, Sym<F> x) {
  using T = Sym<F>;
  const T s = T(1) / (T(1) + lm_exp(-x));
  return dy * s * (T(1) + x * (T(1) - s));
}
template <class F>
Sym<F> aten_gelu_tanh_backward(Sym<F> dy, Sym<F> x) {
  using T = Sym<F>;
  const T kBeta(M_SQRT2 * M_2_SQRTPI * static_cast<double>(static_cast<F>(0.5)));  // constexpr, then rounded to T
  const T kKappa(0.044715);
  const T kThreeKappa(static_cast<F>(static_cast<F>(3) * static_cast<F>(0.044715)));  // opmath_t(3) * kKappa, folded
  const T x_sq = x * x;
  const T x_cube = x_sq * x;
  const T inner = kBeta * (x + kKappa * x_cube);
  const T tanh_inner = lm_tanh(inner);
  const T left = T(0.5) * x;
  const T right = T(1) + tanh_inner;
  const T left_derivative = T(0.5) * right;
  const T tanh_derivative = T(1) - tanh_inner * tanh_inner;
  const T inner_derivative = kBeta * (T(1) + kThreeKappa * x_sq);
  const T right_derivative = left * tanh_derivative * inner_derivative;
  return dy * (left_derivative + right_derivative);
}

struct Formula {
  const char* name;
  const char* source;
  Op node;
  Sym<float> (*f32)(Sym<float>, Sym<float>);
  Sym<double> (*f64)(Sym<double>, Sym<double>);
};
const Formula kFormulas[] = {
    {"tanh_backward", "BinaryMiscBackwardOpsKernels.cu@cf52f9c3", Op::tanh, aten_tanh_backward<float>,
     aten_tanh_backward<double>},
    {"sigmoid_backward", "BinaryMiscBackwardOpsKernels.cu@cf52f9c3", Op::sigmoid, aten_sigmoid_backward<float>,
     aten_sigmoid_backward<double>},
    {"threshold_backward (relu)", "ActivationThresholdKernel.cu@05f814fe", Op::relu, aten_threshold_backward<float>,
     aten_threshold_backward<double>},
    {"silu_backward", "ActivationSiluKernel.cu@00895504", Op::silu, aten_silu_backward<float>, aten_silu_backward<double>},
    {"gelu_backward (tanh)", "ActivationGeluKernel.cu@043e4c88", Op::gelu, aten_gelu_tanh_backward<float>,
     aten_gelu_tanh_backward<double>},
};

// The first bit pattern where two graphs differ, evaluated on the host (eval.hpp: exact mode's functions
// for the libm nodes), and how often they do.
template <class F>
bool differ_at(NodeId u, NodeId v, double x, double g, F* fu, F* fv) {
  const std::map<std::string, double> in{{"x", x}, {"g", g}};
  std::unordered_map<NodeId, double> memo;
  *fu = static_cast<F>(evaluate(u, in, memo));
  *fv = static_cast<F>(evaluate(v, in, memo));
  return !(bits_of(*fu) == bits_of(*fv) || (std::isnan(*fu) && std::isnan(*fv)));
}

template <class F>
std::string hex(F v) {
  std::ostringstream o;
  o << "0x" << std::hex << bits_of(v) << " (" << std::defaultfloat << v << ")";
  return o.str();
}

// Which special inputs differ, the first random input that does, and the fraction of random inputs
// (magnitudes 2^-8 .. 2^8, both signs) that do.
template <class F>
json census(NodeId aten, NodeId spec) {
  json out;
  const F specials[] = {F(0), -F(0), F(1), F(-1), F(0.5), std::numeric_limits<F>::infinity(),
                        -std::numeric_limits<F>::infinity(), std::numeric_limits<F>::quiet_NaN(),
                        std::numeric_limits<F>::denorm_min(), std::numeric_limits<F>::max()};
  json special = json::array();
  for (F x : specials)
    for (F g : {F(1), F(-1), F(0), std::numeric_limits<F>::infinity()}) {
      F a, s;
      if (differ_at<F>(aten, spec, x, g, &a, &s))
        special.push_back({{"x", hex(x)}, {"g", hex(g)}, {"aten", hex(a)}, {"spec", hex(s)}});
    }
  out["special_inputs_differing"] = special;
  std::mt19937_64 rng(20261202);
  int differing = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto value = [&] {
      return static_cast<F>(std::ldexp(1.0 + static_cast<double>(rng() % (1u << 30)) / (1u << 30),
                                       static_cast<int>(rng() % 17) - 8) *
                            ((rng() & 1) ? -1.0 : 1.0));
    };
    const F x = value(), g = value();
    F a, s;
    if (differ_at<F>(aten, spec, x, g, &a, &s)) {
      if (differing++ == 0)
        out["first_random_difference"] = {{"x", hex(x)}, {"g", hex(g)}, {"aten", hex(a)}, {"spec", hex(s)}};
    }
  }
  out["random_inputs"] = n;
  out["random_inputs_differing"] = differing;
  return out;
}

}  // namespace

json frameworks_audit(const std::vector<DType>& dtypes, const ProveFn& prove) {
  json rows = json::array();
  for (const Formula& f : kFormulas) {
    for (DType d : dtypes) {
      if (is_16bit(d)) continue;  // transcribed for float and double (opmath_t = scalar_t) only
      graph().clear();
      json row = {{"formula", f.name}, {"source", "pytorch/pytorch aten/src/ATen/native/cuda/" + std::string(f.source)},
                  {"node", op_info(f.node).name}, {"dtype", dtype_name(d)}};
      auto spec = extract(f.node, d, 1, nullptr);
      if (!spec) {
        row["status"] = "error";
        row["reason"] = spec.error().message;
        rows.push_back(row);
        continue;
      }
      const NodeId spec_dx = spec->at("vjp.staged").at("dx");
      NodeId aten = 0;
      try {
        Explorer explorer;  // threshold_backward compares
        aten = explorer.run([&] {
          return std::vector<NodeId>{d == DType::float32 ? f.f32(var<float>("g"), var<float>("x")).node()
                                                         : f.f64(var<double>("g"), var<double>("x")).node()};
        })[0];
      } catch (const ModelError& e) {
        row["status"] = "error";
        row["reason"] = e.what();
        rows.push_back(row);
        continue;
      }
      // Inputs on which the two formulas, executed, differ refute the row by themselves: the solver
      // is asked only where none does (on a loaded machine it has run out of time on such a row, and
      // an answer already in hand became "no verdict").
      const json executed = d == DType::float32 ? census<float>(aten, spec_dx) : census<double>(aten, spec_dx);
      if (executed.value("random_inputs_differing", 0) > 0 || !executed.value("special_inputs_differing", json::array()).empty()) {
        row["status"] = "refuted";
        row["refuted_by"] = "executed inputs";
        row.update(executed);
        rows.push_back(row);
        continue;
      }
      json verdict;
      const bool equal = prove(aten, spec_dx, &verdict);
      row.update(verdict);
      if (!equal) row.update(executed);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace tapewise::prove
