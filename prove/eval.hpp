// prove/eval.hpp — a graph (sym.hpp) evaluated on the host at given inputs: each node computed
// in its sort as the code computes it (float or double arithmetic, exact mode's exp, log, sin, cos
// and tanh as the CPU backend's, the real 16-bit conversions of tapewise/float16.hpp). Used to count where two graphs differ (frameworks.cpp) and to
// check that an extracted graph computes what the code computes (prover.cpp).
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "kernels/exact_math.cuh"
#include "sym.hpp"

namespace tapewise::prove {

namespace eval_detail {

// v, a value of sort `from`, converted to sort `to` as the code's conversions round (RNE). The 16-bit
// formats are only ever reached from float32 (the code converts double scalars to float first).
inline double convert(double v, Sort from, Sort to) {
  switch (to) {
    case Sort::f32: return static_cast<float>(v);
    case Sort::f64: return v;
    case Sort::bf16:
    case Sort::f16:
      if (from != Sort::f32 && from != to) throw ModelError("a conversion to a 16-bit sort not from float32");
      return to == Sort::bf16 ? static_cast<double>(bfloat16(static_cast<float>(v)))
                           : static_cast<double>(float16(static_cast<float>(v)));
    case Sort::b: break;
  }
  throw ModelError("a conversion to a boolean");
}

// One IEEE operation or libm call in F (float: float32's operations and exact mode's float functions,
// the CPU backend's); nullopt for any other kind.
template <class F>
std::optional<double> in_format(NodeKind k, F x, F y) {
  switch (k) {
    case NodeKind::add: return x + y;
    case NodeKind::sub: return x - y;
    case NodeKind::mul: return x * y;
    case NodeKind::div: return x / y;
    case NodeKind::sqrt: return std::sqrt(x);
    case NodeKind::exp: return exact::exp(x);
    case NodeKind::log: return exact::log(x);
    case NodeKind::sin: return exact::sin(x);
    case NodeKind::cos: return exact::cos(x);
    case NodeKind::tanh: return exact::tanh(x);
    default: return std::nullopt;
  }
}

// One IEEE operation or libm call of sort s on a, b. The 16-bit paths compute in float32: nothing of
// a 16-bit sort but negation, |x|, selects and conversions is ever recorded.
inline double arithmetic(NodeKind k, Sort s, double a, double b) {
  std::optional<double> r;
  if (s == Sort::f32) r = in_format<float>(k, static_cast<float>(a), static_cast<float>(b));
  if (s == Sort::f64) r = in_format<double>(k, a, b);
  if (r) return *r;
  throw ModelError(std::string(kind_name(k)) + " on sort " + sort_name(s) + ": not evaluable");
}

}  // namespace eval_detail

// The value of node n (every value of every sort is a double exactly; booleans are 0 or 1), given
// each variable's value by name. memo: the values already computed.
inline double evaluate(NodeId n, const std::map<std::string, double>& in, std::unordered_map<NodeId, double>& memo) {
  if (auto it = memo.find(n); it != memo.end()) return it->second;
  const Graph& g = graph();
  const Node node = g[n];
  auto at = [&](NodeId c) { return evaluate(c, in, memo); };
  double r = 0;
  switch (node.k) {
    case NodeKind::var: r = in.at(g.name(n)); break;
    case NodeKind::cst: r = sort_value(node.s, node.bits); break;
    case NodeKind::neg: r = -at(node.a); break;
    case NodeKind::abs: r = std::fabs(at(node.a)); break;
    case NodeKind::cvt: r = eval_detail::convert(at(node.a), g[node.a].s, node.s); break;
    case NodeKind::ite: r = at(node.a) != 0 ? at(node.b) : at(node.c); break;
    case NodeKind::eq: r = at(node.a) == at(node.b); break;
    case NodeKind::lt: r = at(node.a) < at(node.b); break;
    case NodeKind::le: r = at(node.a) <= at(node.b); break;
    case NodeKind::signbit: r = std::signbit(at(node.a)); break;
    default: r = eval_detail::arithmetic(node.k, node.s, at(node.a), kind_arity(node.k) == 2 ? at(node.b) : 0.0);
  }
  memo[n] = r;
  return r;
}

}  // namespace tapewise::prove
