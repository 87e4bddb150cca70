// cuda/tape/staging.cpp — reads spec/stagings.def: the grammar of one stage (the file's header states
// it) parsed into a Prim with its slots and constant, and the checks that make a staging well formed.
#include "tape/staging.hpp"

#include <cmath>
#include <map>
#include <mutex>
#include <regex>

namespace tapewise::staging {
namespace {

struct Row {
  Op op;
  Pass pass;
  const char* text;
};

constexpr Row kRows[] = {
#define TAPEWISE_STAGING(node, pass, text) {Op::node, Pass::pass, text},
#include <tapewise/stagings.def>
#undef TAPEWISE_STAGING
};

constexpr bool has_staging(Op op, Pass pass) {
  for (const Row& r : kRows)
    if (r.op == op && r.pass == pass) return true;
  return false;
}
// A node added to spec/ops.def without its rows here fails the build, naming the node.
#define TAPEWISE_OP(name, ...)                                                                    \
  static_assert(has_staging(Op::name, Pass::forward) && has_staging(Op::name, Pass::vjp), \
                "spec/stagings.def has no forward and vjp staging for " #name);
#include <tapewise/ops.def>
#undef TAPEWISE_OP

const char* pass_name(Pass p) { return p == Pass::forward ? "forward" : "vjp"; }

bool is_name(const std::string& s) { return std::regex_match(s, std::regex("[A-Za-z_][A-Za-z0-9_]*")); }

// A number exact in every dtype (so the text means one value whatever the dtype), or nullopt.
std::optional<double> exact_literal(const std::string& s) {
  std::smatch m;
  if (!std::regex_match(s, m, std::regex(R"(\(?([-+]?[0-9]+(\.[0-9]+)?)\)?)"))) return std::nullopt;
  if ((s.front() == '(') != (s.back() == ')')) return std::nullopt;
  const double v = std::stod(m[1].str());
  for (DType d : {DType::float32, DType::bfloat16, DType::float16})
    if (round_to(d, v) != v) return std::nullopt;
  return v;
}

Result<Constant> parse_constant(Op op, const std::string& s) {
  std::smatch m;
  if (auto v = exact_literal(s)) return Constant{Constant::Kind::literal, *v};
  if (std::regex_match(s, m, std::regex(R"(R\(([A-Za-z_]\w*)\))"))) {
    const OpInfo& info = op_info(op);
    for (int k = 0; k < 2; ++k)
      if (info.scalar_names[k][0] && m[1].str() == info.scalar_names[k])
        return Constant{k == 0 ? Constant::Kind::scalar0 : Constant::Kind::scalar1, 0.0};
    return fail(ErrorCode::InvalidArgument, "R(" + m[1].str() + "): the node has no scalar of that name");
  }
  if (std::regex_match(s, m, std::regex(R"(R\([A-Za-z_]\w*=([-+0-9.eE]+)\))")))
    return Constant{Constant::Kind::rounded, std::stod(m[1].str())};
  if (std::regex_match(s, m, std::regex(R"(R\([A-Za-z_]\w*=3\*R\(([-+0-9.eE]+)\)\))")))
    return Constant{Constant::Kind::tripled, std::stod(m[1].str())};
  return fail(ErrorCode::InvalidArgument, "'" + s + "' is not a constant (a number exact in every dtype, R(scalar), "
                                          "R(name=value) or R(name=3*R(value)))");
}

const std::map<std::string, Prim>& functions() {
  static const std::map<std::string, Prim> f = {
      {"copy", Prim::copy}, {"abs", Prim::abs}, {"sign", Prim::sign}, {"sqrt", Prim::sqrt},
      {"exp", Prim::exp}, {"log", Prim::log}, {"sin", Prim::sin}, {"cos", Prim::cos}, {"tanh", Prim::tanh},
      {"sigmoid", Prim::sigmoid}, {"sigmoid_split", Prim::sigmoid_split}, {"fmax", Prim::fmax},
      {"fmin", Prim::fmin}, {"where", Prim::where}};
  return f;
}

// The operation of one stage's right-hand side: its prim, operand names and constant.
struct Expr {
  Prim prim;
  std::vector<std::string> operands;
  Constant constant;
};

Result<Expr> parse_expr(Op op, const std::string& e) {
  std::smatch m;
  if (std::regex_match(e, m, std::regex(R"(full\((.+)\))"))) {
    TAPEWISE_TRY(k, parse_constant(op, m[1].str()));
    return Expr{Prim::fill, {}, k};
  }
  if (std::regex_match(e, m, std::regex(R"((\w+)\((\w+)(?:, (\w+))?(?:, (\w+))?\))"))) {
    const auto it = functions().find(m[1].str());
    if (it == functions().end()) return fail(ErrorCode::InvalidArgument, "no function " + m[1].str());
    Expr x{it->second, {}, {}};
    for (int k = 2; k <= 4; ++k)
      if (m[k].matched) x.operands.push_back(m[k].str());
    return x;
  }
  if (std::regex_match(e, m, std::regex(R"(-(\w+))"))) return Expr{Prim::neg, {m[1].str()}, {}};
  if (!std::regex_match(e, m, std::regex(R"((\S+) (\+|-|\*|/|>|<|<=) (\S+))")))
    return fail(ErrorCode::InvalidArgument, "'" + e + "' is not one operation");
  const std::string lhs = m[1].str(), oper = m[2].str(), rhs = m[3].str();
  if (is_name(lhs) && is_name(rhs)) {
    const std::map<std::string, Prim> binary = {{"+", Prim::add}, {"-", Prim::sub}, {"*", Prim::mul},
                                                {"/", Prim::div}, {">", Prim::greater}, {"<", Prim::less},
                                                {"<=", Prim::less_equal}};
    return Expr{binary.at(oper), {lhs, rhs}, {}};
  }
  if (is_name(lhs) && (oper == "*" || oper == "+")) {
    TAPEWISE_TRY(k, parse_constant(op, rhs));
    return Expr{oper == "*" ? Prim::mul_scalar : Prim::add_scalar, {lhs}, k};
  }
  if (is_name(rhs) && lhs == "1" && oper == "/") return Expr{Prim::reciprocal, {rhs}, {}};
  if (is_name(rhs) && oper == "-") {
    TAPEWISE_TRY(k, parse_constant(op, lhs));
    return Expr{Prim::rsub_scalar, {rhs}, k};
  }
  return fail(ErrorCode::InvalidArgument, "'" + e + "': a constant operand is written A * K, A + K, K - A or 1 / A");
}

std::vector<std::string> input_names(Op op, Pass pass) {
  std::vector<std::string> n = op_info(op).arity == 1 ? std::vector<std::string>{"x"} : std::vector<std::string>{"a", "b"};
  if (pass == Pass::vjp) n.push_back("g");
  return n;
}
std::vector<std::string> output_names(Op op, Pass pass) {
  if (pass == Pass::forward) return {"y"};
  return op_info(op).arity == 1 ? std::vector<std::string>{"dx"} : std::vector<std::string>{"da", "db"};
}

// Splits "s1; s2; ..." at each "; ".
std::vector<std::string> split_stages(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t end = text.find("; ", start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) return out;
    start = end + 2;
  }
}

}  // namespace

double Constant::value_in(DType d, const Scalars& s) const {
  switch (kind) {
    case Kind::none: return 0.0;
    case Kind::literal: case Kind::rounded: return value;
    case Kind::scalar0: return s.s0;
    case Kind::scalar1: return s.s1;
    case Kind::tripled: return 3.0 * round_to(d, value);  // the prim rounds it again: R(3 * R(v))
  }
  return 0.0;
}

Result<Staging> parse_staging(Op op, Pass pass, const std::string& text) {
  Staging st{op, pass, 0, 0, 0, {}, {}, text};
  std::vector<std::string> slots = input_names(op, pass);
  const std::vector<std::string> outputs = output_names(op, pass);
  st.inputs = static_cast<int>(slots.size());
  st.outputs = static_cast<int>(outputs.size());
  slots.insert(slots.end(), outputs.begin(), outputs.end());
  std::vector<bool> defined(slots.size(), false);
  for (int k = 0; k < st.inputs; ++k) defined[static_cast<std::size_t>(k)] = true;
  const std::string where = std::string(op_name(op)) + " " + pass_name(pass) + " staging, stage '";
  auto slot_of = [&](const std::string& name) {
    const auto it = std::find(slots.begin(), slots.end(), name);
    return it == slots.end() ? -1 : static_cast<int>(it - slots.begin());
  };
  for (const std::string& stage : split_stages(text)) {
    auto bad = [&](const std::string& why) { return fail(ErrorCode::InvalidArgument, where + stage + "': " + why); };
    std::smatch m;
    if (!std::regex_match(stage, m, std::regex(R"((ws )?([A-Za-z_]\w*) = (.+))")))
      return bad("not 'NAME = operation' or 'ws NAME = operation'");
    auto expr = parse_expr(op, m[3].str());
    if (!expr) return bad(expr.error().message);
    Stage s{expr->prim, 0, {-1, -1, -1}, expr->constant, stage};
    if (static_cast<int>(expr->operands.size()) != prim_arity(expr->prim))
      return bad(std::string(prim_name(expr->prim)) + " takes " + std::to_string(prim_arity(expr->prim)) + " operands");
    for (std::size_t k = 0; k < expr->operands.size(); ++k) {
      const int slot = slot_of(expr->operands[k]);
      if (slot < 0 || !defined[static_cast<std::size_t>(slot)] || (slot >= st.inputs && slot < st.inputs + st.outputs))
        return bad("reads " + expr->operands[k] + ", which is not an input or a workspace buffer defined before");
      s.operands[k] = slot;
    }
    const std::string name = m[2].str();
    const int existing = slot_of(name);
    if (m[1].matched) {
      if (existing >= 0) return bad(name + " is already a name of this staging");
      slots.push_back(name);
      defined.push_back(true);
      st.workspace_names.push_back(name);
      s.result = static_cast<int>(slots.size()) - 1;
    } else {
      if (existing < st.inputs || existing >= st.inputs + st.outputs)
        return bad(name + " is not an output (y, dx, da, db): a workspace buffer is written 'ws " + name + " = ...'");
      if (defined[static_cast<std::size_t>(existing)]) return bad(name + " is written twice");
      defined[static_cast<std::size_t>(existing)] = true;
      s.result = existing;
    }
    st.stages.push_back(std::move(s));
  }
  for (int k = st.inputs; k < st.inputs + st.outputs; ++k)
    if (!defined[static_cast<std::size_t>(k)])
      return fail(ErrorCode::InvalidArgument, std::string(op_name(op)) + " " + pass_name(pass) + " staging never writes " +
                                                  slots[static_cast<std::size_t>(k)]);
  st.workspace = static_cast<int>(st.workspace_names.size());
  return st;
}

Result<const Staging*> staging_of(Op op, Pass pass) {
  static std::once_flag once;
  static std::map<std::pair<Op, Pass>, Result<Staging>>* parsed = nullptr;
  std::call_once(once, [] {
    parsed = new std::map<std::pair<Op, Pass>, Result<Staging>>();  // never freed: used until exit
    for (const Row& r : kRows) {
      const auto [it, fresh] = parsed->emplace(std::pair{r.op, r.pass}, parse_staging(r.op, r.pass, r.text));
      if (!fresh)
        it->second = fail(ErrorCode::InvalidArgument, "spec/stagings.def has two " + std::string(pass_name(r.pass)) +
                                                          " stagings for " + op_name(r.op));
    }
  });
  const auto it = parsed->find({op, pass});
  if (it == parsed->end())
    return fail(ErrorCode::InvalidArgument, "spec/stagings.def has no " + std::string(pass_name(pass)) + " staging for " +
                                                op_label(op));
  if (!it->second) return tl::unexpected(it->second.error());
  return &*it->second;
}

}  // namespace tapewise::staging
