// prove/sym.hpp — the prover's symbolic scalars: Sym<F> (F = float or double) and Sym16<Fmt>
// (bfloat16, float16) stand where the kernels' T does, so that OpMath<op>, the scalar primitives, the
// prims, the staged VJPs and the tape program interpreter, compiled with T = Sym<F> or Sym16<Fmt>, build
// a hash-consed graph of IEEE operations instead of computing. It is not a second copy of any formula:
// it only records what the code does.
//   - arithmetic (+ - * /, unary -) and lm_* calls make graph nodes; two constants fold on the host in
//     F (one IEEE rounding, no contraction: the prover is compiled with -ffp-contract=off), except the
//     libm functions, which never fold (they are uninterpreted);
//   - a constant is rounded as the code rounds it: T(0.5), static_cast<T>(double) and the like are
//     static_cast<F>, done by this compiler (at compile time for the constexpr gelu constants);
//   - a comparison with a symbolic operand asks the Explorer, which runs the code once per outcome
//     (re-execution) and joins the results with if-then-else nodes;
//   - a node's scalars (double) arrive as sentinel NaNs; a conversion of one to T becomes the node
//     cvt(s0), a free double rounded to the dtype;
//   - Sym16 records the 16-bit path of tapewise/float16.hpp and scalar_math.cuh: each operation is
//     widen (cvt to float32, exact), float32's operation, round (cvt to 16 bits, RNE); negation and
//     |x| are the sign-bit operations; constants are converted by the real 16-bit types.
// Include this header before any tapewise kernel header: std::signbit's overload for Sym must be
// declared before scalar_math.cuh's templates are. Where the kernels are compiled with Sym16, include
// sym_kernels.hpp after them (the 16-bit dispatch trait).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <tapewise/float16.hpp>

namespace tapewise::prove {

// Node kinds. Values: var, cst, the IEEE operations (RNE), the libm calls (uninterpreted), cvt (RNE
// conversion of the child to this node's sort), ite (a select). Predicates (boolean): eq, lt, le
// (IEEE comparisons: false when either operand is NaN) and signbit.
enum class NodeKind : std::uint8_t { var, cst, add, sub, mul, div, neg, abs, sqrt, exp, log, sin, cos, tanh, cvt,
                                     ite, eq, lt, le, signbit };
// Sorts: binary32, binary64, bfloat16 (8-bit exponent, 8-bit significand with the hidden bit), IEEE
// binary16 (5, 11), boolean.
enum class Sort : std::uint8_t { f32, f64, bf16, f16, b };

inline const char* sort_name(Sort s) {
  static const char* names[] = {"f32", "f64", "bf16", "f16", "b"};
  return names[static_cast<int>(s)];
}
// A floating-point sort's width in bits.
inline int sort_width(Sort s) { return s == Sort::f64 ? 64 : s == Sort::f32 ? 32 : 16; }
// The value of a constant's bits (of a floating-point sort), exactly, as a double.
inline double sort_value(Sort s, std::uint64_t bits) {
  switch (s) {
    case Sort::f32: return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    case Sort::f64: return std::bit_cast<double>(bits);
    case Sort::bf16: return static_cast<double>(bfloat16::from_bits(static_cast<std::uint16_t>(bits)));
    case Sort::f16: return static_cast<double>(float16::from_bits(static_cast<std::uint16_t>(bits)));
    case Sort::b: break;
  }
  return bits != 0;
}

inline const char* kind_name(NodeKind k) {
  static const char* names[] = {"var", "cst", "add", "sub", "mul", "div", "neg", "abs", "sqrt", "exp",
                                "log", "sin", "cos", "tanh", "cvt", "ite", "eq", "lt", "le", "signbit"};
  return names[static_cast<int>(k)];
}
inline bool is_libm(NodeKind k) { return k == NodeKind::exp || k == NodeKind::log || k == NodeKind::sin || k == NodeKind::cos || k == NodeKind::tanh; }
inline int kind_arity(NodeKind k) {
  switch (k) {
    case NodeKind::var: case NodeKind::cst: return 0;
    case NodeKind::neg: case NodeKind::abs: case NodeKind::sqrt: case NodeKind::exp: case NodeKind::log: case NodeKind::sin: case NodeKind::cos: case NodeKind::tanh:
    case NodeKind::cvt: case NodeKind::signbit: return 1;
    case NodeKind::ite: return 3;
    default: return 2;
  }
}

using NodeId = std::uint32_t;

struct Node {
  NodeKind k;
  Sort s;
  NodeId a = 0, b = 0, c = 0;  // children (kind_arity of them)
  std::uint64_t bits = 0;      // cst: the value's bits; var: its index in Graph::names
  friend bool operator==(const Node&, const Node&) = default;
};

struct NodeHash {
  std::size_t operator()(const Node& n) const {
    std::uint64_t h = (static_cast<std::uint64_t>(n.k) << 8) ^ static_cast<std::uint64_t>(n.s);
    for (std::uint64_t v : {static_cast<std::uint64_t>(n.a), static_cast<std::uint64_t>(n.b),
                            static_cast<std::uint64_t>(n.c), n.bits})
      h = (h ^ v) * 0x100000001b3ull + (h >> 29);
    return static_cast<std::size_t>(h);
  }
};

// The graph: every node once (hash-consing), so two computations of the same operations on the same
// operands are one node, whichever code ran them.
class Graph {
 public:
  NodeId make(Node n) {
    auto it = index_.find(n);
    if (it != index_.end()) return it->second;
    const auto id = static_cast<NodeId>(nodes_.size());
    nodes_.push_back(n);
    index_.emplace(n, id);
    return id;
  }
  NodeId var(const std::string& name, Sort s) {
    for (std::size_t i = 0; i < names_.size(); ++i)
      if (names_[i] == name) return make(Node{NodeKind::var, s, 0, 0, 0, i});
    names_.push_back(name);
    return make(Node{NodeKind::var, s, 0, 0, 0, names_.size() - 1});
  }
  NodeId constant(Sort s, std::uint64_t bits) { return make(Node{NodeKind::cst, s, 0, 0, 0, bits}); }
  // Two normalisations, both exact (the same bits, NaN payloads included), since every node is a
  // pure function of its children and one condition p selects every hole alike:
  //   ite(p, u, u) = u;
  //   ite(p, C[a1, .., an], C[b1, .., bn]) = C[ite(p, a1, b1), .., ite(p, an, bn)]
  // where C is the largest common context of the two branches (anti-unification over arithmetic and
  // libm nodes; selects, predicates, variables and constants are its leaves). So a value selected
  // inside one kernel and then used (the fused path's one exploration) and the same value selected
  // by its own prim and then used (the staged path) are one node.
  // A third, as exact: inside ite(p, t, e), p is true in t and false in e, so a select on p within t
  // is its true branch and within e its false one (assume). A staging that selects its operand
  // before a stage and its result after it (sqrt's where(p, x, 1), then where(p, g * f, +0)) is
  // then the one select a kernel makes around the same stages.
  NodeId op(NodeKind k, Sort s, NodeId a, NodeId b = 0, NodeId c = 0) {
    if (k == NodeKind::ite) {
      std::unordered_map<NodeId, NodeId> when_true, when_false;
      b = assume(a, true, b, when_true);
      c = assume(a, false, c, when_false);
      std::unordered_map<std::uint64_t, NodeId> memo;
      return hoist(a, b, c, memo);
    }
    return make(Node{k, s, a, b, c, 0});
  }
  NodeId assume(NodeId p, bool value, NodeId n, std::unordered_map<NodeId, NodeId>& memo) {
    if (auto it = memo.find(n); it != memo.end()) return it->second;
    const Node node = nodes_[n];
    NodeId out = n;
    if (node.k == NodeKind::ite && node.a == p) {
      out = assume(p, value, value ? node.b : node.c, memo);
    } else if (node.k != NodeKind::var && node.k != NodeKind::cst) {
      NodeId children[3] = {node.a, node.b, node.c};
      bool changed = false;
      for (int i = 0; i < kind_arity(node.k); ++i) {
        const NodeId child = assume(p, value, children[i], memo);
        changed = changed || child != children[i];
        children[i] = child;
      }
      if (changed)
        out = node.k == NodeKind::ite ? op(NodeKind::ite, node.s, children[0], children[1], children[2])
                                      : make(Node{node.k, node.s, children[0], children[1], children[2], node.bits});
    }
    memo[n] = out;
    return out;
  }
  NodeId hoist(NodeId p, NodeId t, NodeId e, std::unordered_map<std::uint64_t, NodeId>& memo) {
    if (t == e) return t;
    const std::uint64_t key = (static_cast<std::uint64_t>(t) << 32) | e;
    if (auto it = memo.find(key); it != memo.end()) return it->second;
    const Node tn = nodes_[t], en = nodes_[e];
    NodeId out;
    const bool opaque = tn.k == NodeKind::var || tn.k == NodeKind::cst || tn.k == NodeKind::ite || tn.s == Sort::b;
    // Two conversions to one sort from different sorts (a scalar's double, a 16-bit value) are not one
    // context: their children could not share a select.
    const bool same_children = tn.k != NodeKind::cvt || nodes_[tn.a].s == nodes_[en.a].s;
    if (!opaque && tn.k == en.k && tn.s == en.s && tn.bits == en.bits && same_children) {
      NodeId tc[3] = {tn.a, tn.b, tn.c};
      const NodeId ec[3] = {en.a, en.b, en.c};
      for (int i = 0; i < kind_arity(tn.k); ++i) tc[i] = hoist(p, tc[i], ec[i], memo);
      out = make(Node{tn.k, tn.s, tc[0], tc[1], tc[2], 0});
    } else {
      out = make(Node{NodeKind::ite, tn.s, p, t, e, 0});
    }
    memo[key] = out;
    return out;
  }
  const Node& operator[](NodeId id) const { return nodes_[id]; }
  std::size_t size() const { return nodes_.size(); }
  const std::string& name(NodeId var) const { return names_[static_cast<std::size_t>(nodes_[var].bits)]; }
  void clear() {
    nodes_.clear();
    index_.clear();
    names_.clear();
  }

 private:
  std::vector<Node> nodes_;
  std::unordered_map<Node, NodeId, NodeHash> index_;
  std::vector<std::string> names_;
};

inline Graph& graph() {
  static thread_local Graph g;
  return g;
}

// An error of the prover's model (not a refutation): the code did something the model does not cover.
struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Explores both outcomes of every comparison on symbolic values by re-executing a body, and joins
// what each run returned into if-then-else nodes. One explorer is active at a time per thread.
class Explorer {
 public:
  static constexpr std::size_t kMaxPaths = 1 << 14;

  // body() returns node ids; the result has one per returned id, each the join over all paths.
  std::vector<NodeId> run(const std::function<std::vector<NodeId>()>& body) {
    if (active() != nullptr) throw ModelError("nested exploration");
    active() = this;
    struct Reset {
      ~Reset() { active() = nullptr; }
    } reset;
    std::vector<Path> paths;
    forced_.clear();
    for (;;) {
      trail_.clear();
      std::vector<NodeId> outs = body();
      paths.push_back({trail_, std::move(outs)});
      if (paths.size() > kMaxPaths) throw ModelError("more than 16384 paths through one kernel");
      std::size_t i = trail_.size();
      while (i > 0 && trail_[i - 1].value) --i;
      if (i == 0) break;
      forced_.assign(trail_.size(), false);
      for (std::size_t j = 0; j + 1 < i; ++j) forced_[j] = trail_[j].value;
      forced_.resize(i);
      forced_[i - 1] = true;
    }
    paths_explored_ += paths.size();
    return join(paths, 0, paths.size(), 0);
  }

  bool decide(NodeId pred) {
    for (const Decision& d : trail_)
      if (d.pred == pred) return d.value;
    const std::size_t depth = trail_.size();
    const bool value = depth < forced_.size() ? forced_[depth] : false;
    trail_.push_back({pred, value});
    return value;
  }
  // Whether the decisions so far imply that x is not NaN: an ordered comparison with x as an operand
  // came out true.
  bool known_not_nan(NodeId x) const {
    const Graph& g = graph();
    for (const Decision& d : trail_) {
      const Node& p = g[d.pred];
      if (d.value && (p.k == NodeKind::eq || p.k == NodeKind::lt || p.k == NodeKind::le) && (p.a == x || p.b == x)) return true;
    }
    return false;
  }
  std::size_t paths_explored() const { return paths_explored_; }

  static Explorer*& active() {
    static thread_local Explorer* e = nullptr;
    return e;
  }

 private:
  struct Decision {
    NodeId pred;
    bool value;
  };
  struct Path {
    std::vector<Decision> trail;
    std::vector<NodeId> outs;
  };
  // Paths [lo, hi) share their first `depth` decisions; DFS order puts the false outcome first.
  std::vector<NodeId> join(const std::vector<Path>& paths, std::size_t lo, std::size_t hi, std::size_t depth) {
    if (paths[lo].trail.size() == depth) {
      if (hi - lo != 1) throw ModelError("a path ended where another went on (nondeterministic code?)");
      return paths[lo].outs;
    }
    const NodeId pred = paths[lo].trail[depth].pred;
    std::size_t mid = lo;
    while (mid < hi && !paths[mid].trail[depth].value) ++mid;
    for (std::size_t j = lo; j < hi; ++j)
      if (paths[j].trail.size() <= depth || paths[j].trail[depth].pred != pred)
        throw ModelError("paths diverged on different comparisons");
    if (mid == lo) return join(paths, lo, hi, depth + 1);  // only true was possible (cannot happen in DFS)
    if (mid == hi) return join(paths, lo, hi, depth + 1);
    std::vector<NodeId> f = join(paths, lo, mid, depth + 1), t = join(paths, mid, hi, depth + 1);
    if (f.size() != t.size()) throw ModelError("paths returned different numbers of values");
    std::vector<NodeId> out(f.size());
    for (std::size_t k = 0; k < f.size(); ++k) {
      const Node& n = graph()[t[k]];
      out[k] = graph().op(NodeKind::ite, n.s, pred, t[k], f[k]);
    }
    return out;
  }
  std::vector<Decision> trail_;
  std::vector<bool> forced_;
  std::size_t paths_explored_ = 0;
};

// Sentinel doubles for a node's two scalars: quiet NaNs with this payload; a conversion of one to T
// makes cvt(var "s0"/"s1"). Any other NaN of the family means the scalar went through double arithmetic
// first, which the model does not cover: an error.
inline constexpr std::uint64_t kScalarSentinelFamily = 0x7ff8'5441'5045'0000ull;  // "TAPE"
inline constexpr std::uint64_t kScalarSentinelMask = 0xffff'ffff'ffff'0000ull;
inline double scalar_sentinel(int k) { return std::bit_cast<double>(kScalarSentinelFamily | static_cast<std::uint64_t>(k + 1)); }

template <class F>
constexpr Sort sort_of() {
  return std::is_same_v<F, float> ? Sort::f32 : Sort::f64;
}

template <class F>
inline std::uint64_t bits_of(F v) {
  if constexpr (std::is_same_v<F, float>)
    return std::bit_cast<std::uint32_t>(v);
  else
    return std::bit_cast<std::uint64_t>(v);
}
template <class F>
inline F from_bits(std::uint64_t b) {
  if constexpr (std::is_same_v<F, float>)
    return std::bit_cast<float>(static_cast<std::uint32_t>(b));
  else
    return std::bit_cast<double>(b);
}

template <class F>
struct Sym {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
  static constexpr Sort sort = sort_of<F>();
  F v{};               // the value, while the Sym is a constant not yet in the graph
  std::uint32_t id1 = 0;  // node id + 1; 0: the constant v

  constexpr Sym() = default;
  // static_cast<T>(u), T(u): the value rounded to F as the compiler rounds it; a scalar sentinel
  // becomes cvt(s0) / cvt(s1).
  template <class U>
    requires std::is_arithmetic_v<U>
  explicit constexpr Sym(U u) : v(static_cast<F>(u)) {
    if (std::is_constant_evaluated()) return;
    if constexpr (std::is_same_v<U, double>) {
      const auto b = std::bit_cast<std::uint64_t>(u);
      if ((b & kScalarSentinelMask) == kScalarSentinelFamily) {
        const std::uint64_t k = b & ~kScalarSentinelMask;
        if (k != 1 && k != 2) throw ModelError("a scalar went through double arithmetic before its rounding to the dtype");
        const NodeId s = graph().var(k == 1 ? "s0" : "s1", Sort::f64);
        id1 = (sort_of<F>() == Sort::f64 ? s : graph().op(NodeKind::cvt, sort_of<F>(), s)) + 1;
      }
    }
  }
  static Sym of(NodeId id) {
    Sym s;
    const Node& n = graph()[id];
    if (n.k == NodeKind::cst) s.v = from_bits<F>(n.bits);  // a constant stays one: comparisons of it fold
    else s.id1 = id + 1;
    return s;
  }
  constexpr bool constant() const { return id1 == 0; }
  // The node: a constant is put in the graph on first use.
  NodeId node() const { return id1 ? id1 - 1 : graph().constant(sort_of<F>(), bits_of(v)); }
  // static_cast<double>(t): only of a constant (the gelu constants' c3 = R(3 * R(c))).
  explicit constexpr operator double() const {
    if (id1 != 0) throw ModelError("a symbolic value converted to double");
    return static_cast<double>(v);
  }
};

namespace sym_detail {
template <class F>
inline Sym<F> unary(NodeKind k, Sym<F> a) {
  return Sym<F>::of(graph().op(k, sort_of<F>(), a.node()));
}
template <class F>
inline Sym<F> binary(NodeKind k, Sym<F> a, Sym<F> b) {
  return Sym<F>::of(graph().op(k, sort_of<F>(), a.node(), b.node()));
}
inline bool decide(NodeId pred) {
  Explorer* e = Explorer::active();
  if (e == nullptr) throw ModelError("a comparison of symbolic values outside an exploration");
  return e->decide(pred);
}
// The select of two constants n is (ite(p, c1, c0), or seen through its exact widening cvt(...)), or
// nullptr when n is not one.
inline const Node* select_of_constants(NodeId n) {
  const Node* node = &graph()[n];
  if (node->k == NodeKind::cvt) node = &graph()[node->a];
  if (node->k != NodeKind::ite || graph()[node->b].k != NodeKind::cst || graph()[node->c].k != NodeKind::cst) return nullptr;
  return node;
}
inline double constant_value(NodeId n) { return sort_value(graph()[n].s, graph()[n].bits); }
// A comparison of a select of two constants with a constant — a comparison mask (1 or +0) read back
// by a `where` stage of spec/stagings.def — decided on the select's own condition and folded on the
// constant it chose. Exact (ite(p, c1, c0) == k is p ? c1 == k : c0 == k), and it leaves the graph
// selecting on the condition itself, as a kernel's select on that comparison does.
inline std::optional<bool> compare_select_of_constants(NodeKind k, NodeId x, NodeId y) {
  const Node* sx = select_of_constants(x);
  const Node* sy = select_of_constants(y);
  const bool x_select = sx && graph()[y].k == NodeKind::cst, y_select = sy && graph()[x].k == NodeKind::cst;
  if (!x_select && !y_select) return std::nullopt;
  const Node select = x_select ? *sx : *sy;
  const NodeId chosen = decide(select.a) ? select.b : select.c;
  const double l = constant_value(x_select ? chosen : x), r = constant_value(x_select ? y : chosen);
  switch (k) {
    case NodeKind::eq: return l == r;
    case NodeKind::lt: return l < r;
    case NodeKind::le: return l <= r;
    default: throw ModelError("a comparison of unknown kind");
  }
}
template <class F>
inline bool compare(NodeKind k, Sym<F> a, Sym<F> b) {
  if (auto folded = compare_select_of_constants(k, a.node(), b.node())) return *folded;
  NodeId x = a.node(), y = b.node();
  if (k == NodeKind::eq && y < x) std::swap(x, y);  // a == b is b == a, exactly
  return decide(graph().op(k, Sort::b, x, y));
}
}  // namespace sym_detail

template <class F>
inline Sym<F> operator+(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return Sym<F>(a.v + b.v);
  return sym_detail::binary(NodeKind::add, a, b);
}
template <class F>
inline Sym<F> operator-(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return Sym<F>(a.v - b.v);
  return sym_detail::binary(NodeKind::sub, a, b);
}
template <class F>
inline Sym<F> operator*(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return Sym<F>(a.v * b.v);
  return sym_detail::binary(NodeKind::mul, a, b);
}
template <class F>
inline Sym<F> operator/(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return Sym<F>(a.v / b.v);
  return sym_detail::binary(NodeKind::div, a, b);
}
template <class F>
inline Sym<F> operator-(Sym<F> a) {
  if (a.constant()) return Sym<F>(-a.v);
  return sym_detail::unary(NodeKind::neg, a);
}
template <class F>
inline bool operator==(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return a.v == b.v;
  return sym_detail::compare(NodeKind::eq, a, b);
}
template <class F>
inline bool operator!=(Sym<F> a, Sym<F> b) {
  return !(a == b);
}
template <class F>
inline bool operator<(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return a.v < b.v;
  return sym_detail::compare(NodeKind::lt, a, b);
}
template <class F>
inline bool operator>(Sym<F> a, Sym<F> b) {
  return b < a;
}
template <class F>
inline bool operator<=(Sym<F> a, Sym<F> b) {
  if (a.constant() && b.constant()) return a.v <= b.v;
  return sym_detail::compare(NodeKind::le, a, b);
}
template <class F>
inline bool operator>=(Sym<F> a, Sym<F> b) {
  return b <= a;
}

// The scalar primitives' libm entry points (found by argument-dependent lookup from scalar_math.cuh).
template <class F>
inline Sym<F> lm_exp(Sym<F> x) { return sym_detail::unary(NodeKind::exp, x); }
template <class F>
inline Sym<F> lm_log(Sym<F> x) { return sym_detail::unary(NodeKind::log, x); }
template <class F>
inline Sym<F> lm_sin(Sym<F> x) { return sym_detail::unary(NodeKind::sin, x); }
template <class F>
inline Sym<F> lm_cos(Sym<F> x) { return sym_detail::unary(NodeKind::cos, x); }
template <class F>
inline Sym<F> lm_tanh(Sym<F> x) { return sym_detail::unary(NodeKind::tanh, x); }
// sqrt and fabs are IEEE operations (correctly rounded / exact), folded on constants. The sqrt of a
// select with a constant branch is the select of the two sqrts, the constant one folded (exact): a
// staging's sqrt(where(p, +0, x)) and a kernel's select around sqrt inside one exploration, whose
// sqrt(+0) folds on its path, are then one graph.
template <class F>
inline Sym<F> lm_sqrt(Sym<F> x) {
  if (x.constant()) return Sym<F>(std::sqrt(x.v));
  const Node n = graph()[x.node()];
  auto value = [](NodeId id) {
    const Node& c = graph()[id];
    return c.k == NodeKind::cst ? Sym<F>(from_bits<F>(c.bits)) : Sym<F>::of(id);
  };
  if (n.k == NodeKind::ite && (graph()[n.b].k == NodeKind::cst || graph()[n.c].k == NodeKind::cst))
    return Sym<F>::of(graph().op(NodeKind::ite, sort_of<F>(), n.a, lm_sqrt(value(n.b)).node(), lm_sqrt(value(n.c)).node()));
  return sym_detail::unary(NodeKind::sqrt, x);
}
template <class F>
inline Sym<F> lm_fabs(Sym<F> x) {
  if (x.constant()) return Sym<F>(std::fabs(x.v));
  return sym_detail::unary(NodeKind::abs, x);
}

// std::signbit on a symbolic value. The model treats every NaN as one value (TorchLean's
// AgreeUpToNaN), which every other operation respects; a NaN's sign bit does not, so signbit is
// only allowed where the decisions so far show its operand is not NaN (fmax_/fmin_ ask it after
// a == b). Elsewhere the prover stops with a ModelError rather than prove something unsound.
// `compared`: the node the comparisons saw in x's place (x itself, or x widened to float32).
inline bool signbit_node(NodeId x, NodeId compared) {
  Explorer* e = Explorer::active();
  if (e == nullptr) throw ModelError("signbit of a symbolic value outside an exploration");
  if (!e->known_not_nan(x) && !e->known_not_nan(compared))
    throw ModelError("signbit of a value that may be NaN: outside the prover's NaN model");
  return e->decide(graph().op(NodeKind::signbit, Sort::b, x));
}
template <class F>
inline bool sym_signbit(Sym<F> x) {
  if (x.constant()) return std::signbit(x.v);
  return signbit_node(x.node(), x.node());
}

// --- the 16-bit formats --------------------------------------------------------------------------

// The formats: the real element type (whose conversions fold constants) and the SMT sort.
struct BF16 {
  using storage = bfloat16;
  static constexpr Sort sort = Sort::bf16;
};
struct F16 {
  using storage = float16;
  static constexpr Sort sort = Sort::f16;
};

// The kernels' T for a 16-bit dtype. Each operation is what scalar_math.cuh does for bfloat16 and
// float16 (ATen's opmath: float32 computes, one rounding to 16 bits), recorded node by node: widen
// (cvt to f32, exact), the float32 operation of Sym<float> (so two constants fold as float32 folds
// them), round (cvt to the 16-bit sort, RNE). Negation and |x| are the sign-bit operations the kernels
// use; comparisons compare the widened values, as the kernels' operators do. The operators are
// non-template friends: they win over scalar_math.cuh's 16-bit operator templates, which
// sym_kernels.hpp lets match (kIs16Bit), so the kernels' other 16-bit branches are taken.
template <class Fmt>
struct Sym16 {
  using Storage = typename Fmt::storage;
  static constexpr Sort sort = Fmt::sort;
  std::uint16_t v = 0;    // the constant's bits, while the Sym16 is a constant not yet in the graph
  std::uint32_t id1 = 0;  // node id + 1; 0: the constant v

  Sym16() = default;
  // T(u), static_cast<T>(u): Storage(u) converts through float (Storage(double d) is Storage(float(d)),
  // as c10's types do), so: Sym<float>(u), then rounded to 16 bits. A scalar sentinel becomes
  // cvt16(cvt32(s0)).
  template <class U>
    requires std::is_arithmetic_v<U>
  explicit Sym16(U u) : Sym16(round(Sym<float>(u))) {}

  static Sym16 from_bits(std::uint16_t bits) {
    Sym16 s;
    s.v = bits;
    return s;
  }
  static Sym16 of(NodeId id) {
    const Node& n = graph()[id];
    if (n.k == NodeKind::cst) return from_bits(static_cast<std::uint16_t>(n.bits));  // comparisons of it fold
    Sym16 s;
    s.id1 = id + 1;
    return s;
  }
  bool constant() const { return id1 == 0; }
  NodeId node() const { return id1 ? id1 - 1 : graph().constant(sort, v); }
  // static_cast<double>(t): only of a constant (gelu's c3 = R(3 * R(c))), exactly.
  explicit operator double() const {
    if (id1 != 0) throw ModelError("a symbolic value converted to double");
    return static_cast<double>(Storage::from_bits(v));
  }

  // static_cast<float>(x): exact.
  // A select with a constant branch widens branch by branch, the constant folded (exact: widening
  // is exact), so a select joined in 16 bits and then widened (a prim's) and one joined after the
  // widening (inside a kernel's exploration) are one graph.
  friend Sym<float> widen(Sym16 x) {
    if (x.constant()) return Sym<float>(static_cast<float>(Storage::from_bits(x.v)));
    const Node n = graph()[x.node()];
    auto value = [](NodeId id) {
      const Node& c = graph()[id];
      return c.k == NodeKind::cst ? from_bits(static_cast<std::uint16_t>(c.bits)) : of(id);
    };
    if (n.k == NodeKind::ite && (graph()[n.b].k == NodeKind::cst || graph()[n.c].k == NodeKind::cst))
      return Sym<float>::of(graph().op(NodeKind::ite, Sort::f32, n.a, widen(value(n.b)).node(), widen(value(n.c)).node()));
    return Sym<float>::of(graph().op(NodeKind::cvt, Sort::f32, x.node()));
  }
  // Storage(f): f rounded once to the format, RNE (a constant by the real conversion).
  static Sym16 round(Sym<float> f) {
    if (f.constant()) return from_bits(Storage(f.v).bits);
    return of(graph().op(NodeKind::cvt, sort, f.node()));
  }

  friend Sym16 operator+(Sym16 a, Sym16 b) { return round(widen(a) + widen(b)); }
  friend Sym16 operator-(Sym16 a, Sym16 b) { return round(widen(a) - widen(b)); }
  friend Sym16 operator*(Sym16 a, Sym16 b) { return round(widen(a) * widen(b)); }
  friend Sym16 operator/(Sym16 a, Sym16 b) { return round(widen(a) / widen(b)); }
  friend Sym16 operator-(Sym16 a) {
    if (a.constant()) return from_bits(static_cast<std::uint16_t>(a.v ^ 0x8000u));
    return of(graph().op(NodeKind::neg, sort, a.node()));
  }
  friend bool operator<(Sym16 a, Sym16 b) { return widen(a) < widen(b); }
  friend bool operator>(Sym16 a, Sym16 b) { return widen(a) > widen(b); }
  friend bool operator<=(Sym16 a, Sym16 b) { return widen(a) <= widen(b); }
  friend bool operator>=(Sym16 a, Sym16 b) { return widen(a) >= widen(b); }
  friend bool operator==(Sym16 a, Sym16 b) { return widen(a) == widen(b); }
  friend bool operator!=(Sym16 a, Sym16 b) { return widen(a) != widen(b); }

  // scalar_math.cuh's 16-bit libm: float32's function of the widened value, rounded once; sqrt too.
  friend Sym16 lm_exp(Sym16 x) { return round(prove::lm_exp(widen(x))); }
  friend Sym16 lm_log(Sym16 x) { return round(prove::lm_log(widen(x))); }
  friend Sym16 lm_sin(Sym16 x) { return round(prove::lm_sin(widen(x))); }
  friend Sym16 lm_cos(Sym16 x) { return round(prove::lm_cos(widen(x))); }
  friend Sym16 lm_tanh(Sym16 x) { return round(prove::lm_tanh(widen(x))); }
  // As Sym<F>'s: the sqrt of a select with a constant branch is the select of the sqrts.
  friend Sym16 lm_sqrt(Sym16 x) {
    if (!x.constant()) {
      const Node n = graph()[x.node()];
      auto value = [](NodeId id) {
        const Node& c = graph()[id];
        return c.k == NodeKind::cst ? from_bits(static_cast<std::uint16_t>(c.bits)) : of(id);
      };
      if (n.k == NodeKind::ite && (graph()[n.b].k == NodeKind::cst || graph()[n.c].k == NodeKind::cst))
        return of(graph().op(NodeKind::ite, sort, n.a, lm_sqrt(value(n.b)).node(), lm_sqrt(value(n.c)).node()));
    }
    return round(prove::lm_sqrt(widen(x)));
  }
  // |x| clears the sign bit.
  friend Sym16 lm_fabs(Sym16 x) {
    if (x.constant()) return from_bits(static_cast<std::uint16_t>(x.v & 0x7fffu));
    return of(graph().op(NodeKind::abs, sort, x.node()));
  }
  // sign_bit's 16-bit branch reads the sign bit of x's bits; like std::signbit on Sym, only where the
  // decisions so far show x is not NaN (its comparisons saw x widened).
  friend bool sign_bit(Sym16 x) {
    if (x.constant()) return (x.v & 0x8000u) != 0;
    return signbit_node(x.node(), widen(x).node());
  }
};
using SymBF16 = Sym16<BF16>;
using SymF16 = Sym16<F16>;
// The symbolic backend gives each element 4 bytes per byte of its dtype (forms.cpp: raw_allocate).
static_assert(sizeof(SymBF16) <= 8 && sizeof(SymF16) <= 8 && sizeof(Sym<float>) <= 16 && sizeof(Sym<double>) <= 32);

}  // namespace tapewise::prove

namespace std {
template <class F>
inline bool signbit(tapewise::prove::Sym<F> x) {
  return tapewise::prove::sym_signbit(x);
}
}  // namespace std
