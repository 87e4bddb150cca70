// prove/eval.hpp — a graph (sym.hpp) evaluated on the host at given inputs: each node computed
// in its sort as the code computes it (float or double arithmetic, glibc's libm, the real 16-bit
// conversions of tapewise/float16.hpp). Used to count where two graphs differ (frameworks.cpp) and to
// check that an extracted graph computes what the code computes (prover.cpp).
#pragma once

#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "sym.hpp"

namespace tapewise::prove {

namespace eval_detail {

// v, a value of sort `from`, converted to sort `to` as the code's conversions round (RNE). The 16-bit
// formats are only ever reached from float32 (the code converts double scalars to float first).
inline double convert(double v, S from, S to) {
  switch (to) {
    case S::f32: return static_cast<float>(v);
    case S::f64: return v;
    case S::bf16:
    case S::f16:
      if (from != S::f32 && from != to) throw ModelError("a conversion to a 16-bit sort not from float32");
      return to == S::bf16 ? static_cast<double>(bfloat16(static_cast<float>(v)))
                           : static_cast<double>(float16(static_cast<float>(v)));
    case S::b: break;
  }
  throw ModelError("a conversion to a boolean");
}

// One IEEE operation or libm call in F (float: float32's operations and glibc's float functions);
// nullopt for any other kind.
template <class F>
std::optional<double> in_format(K k, F x, F y) {
  switch (k) {
    case K::add: return x + y;
    case K::sub: return x - y;
    case K::mul: return x * y;
    case K::div: return x / y;
    case K::sqrt: return std::sqrt(x);
    case K::exp: return std::exp(x);
    case K::log: return std::log(x);
    case K::sin: return std::sin(x);
    case K::cos: return std::cos(x);
    case K::tanh: return std::tanh(x);
    default: return std::nullopt;
  }
}

// One IEEE operation or libm call of sort s on a, b. The 16-bit paths compute in float32: nothing of
// a 16-bit sort but negation, |x|, selects and conversions is ever recorded.
inline double arithmetic(K k, S s, double a, double b) {
  std::optional<double> r;
  if (s == S::f32) r = in_format<float>(k, static_cast<float>(a), static_cast<float>(b));
  if (s == S::f64) r = in_format<double>(k, a, b);
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
    case K::var: r = in.at(g.name(n)); break;
    case K::cst: r = sort_value(node.s, node.bits); break;
    case K::neg: r = -at(node.a); break;
    case K::abs: r = std::fabs(at(node.a)); break;
    case K::cvt: r = eval_detail::convert(at(node.a), g[node.a].s, node.s); break;
    case K::ite: r = at(node.a) != 0 ? at(node.b) : at(node.c); break;
    case K::eq: r = at(node.a) == at(node.b); break;
    case K::lt: r = at(node.a) < at(node.b); break;
    case K::le: r = at(node.a) <= at(node.b); break;
    case K::signbit: r = std::signbit(at(node.a)); break;
    default: r = eval_detail::arithmetic(node.k, node.s, at(node.a), kind_arity(node.k) == 2 ? at(node.b) : 0.0);
  }
  memo[n] = r;
  return r;
}

}  // namespace tapewise::prove
