// reference/special_points.cpp — strict reader of spec/special_points. Exactness of every written
// value is decided with MPFR (a decimal such as 0.1 is rejected for an input, not silently rounded).
// It deliberately knows no op formula: only names, arities and scalar names from spec/ops.def.

#include "special_points.hpp"

#include <mpfr.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>

namespace tapewise {
namespace {

std::string_view trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// The non-finite spellings accepted for every value.
std::optional<double> parse_special_word(std::string_view t) {
  if (t == "inf" || t == "+inf") return HUGE_VAL;
  if (t == "-inf") return -HUGE_VAL;
  if (t == "nan" || t == "+nan" || t == "-nan") return std::nan("");
  return std::nullopt;
}

// A value that must denote a number exactly representable in `dtype`: a C hex float, a decimal, ±0,
// ±inf or nan. Returns nullopt and sets `why` otherwise.
std::optional<double> parse_exact(std::string_view tok, DType dtype, std::string& why) {
  if (auto w = parse_special_word(tok)) return w;
  if (tok.empty()) {
    why = "empty value";
    return std::nullopt;
  }
  const std::string s(tok);
  mpfr_t m;
  mpfr_init2(m, 8192);  // enough to hold exactly any decimal or hex that a binary64 can
  char* end = nullptr;
  const int ternary = mpfr_strtofr(m, s.c_str(), &end, 0, MPFR_RNDN);
  std::optional<double> out;
  if (end == s.c_str() || *end != '\0' || !mpfr_number_p(m)) {
    why = "not a number";
  } else if (ternary != 0) {
    why = "not exactly representable in binary (write it as a hex float)";
  } else {
    const double v = mpfr_get_d(m, MPFR_RNDN);
    if (!std::isfinite(v) || mpfr_cmp_d(m, v) != 0) {
      why = "not exactly representable in float64";
    } else if (round_to(dtype, v) != v) {
      why = std::string("not exactly representable in ") + dtype_name(dtype);
    } else {
      out = v;  // keeps the sign of a written -0
    }
  }
  mpfr_clear(m);
  return out;
}

// A scalar (c, lo, hi, eps) is a host double, written as a C double literal; the op rounds it once.
std::optional<double> parse_scalar(std::string_view tok, std::string& why) {
  if (auto w = parse_special_word(tok)) return w;
  const std::string s(tok);
  if (s.empty()) {
    why = "empty value";
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || std::isnan(v) || std::isinf(v)) {
    // strtod spells inf/nan in many ways; only the words above are accepted, and an overflowing
    // literal (1e999) is a mistake rather than a way to write inf.
    why = "not a number";
    return std::nullopt;
  }
  return v;
}

class Reader {
 public:
  Reader(const std::string& origin, int line) : origin_(origin), line_(line) {}

  tl::unexpected<Error> error(const std::string& what) const {
    return fail(ErrorCode::InvalidArgument, "special points " + origin_ + ":" + std::to_string(line_) + ": " + what);
  }

  [[nodiscard]] Result<SpecialPoint> parse_case(std::string_view body, std::string_view note) const {
    TAPEWISE_TRY(fields, tokenize(body));
    SpecialPoint p;
    p.line = line_;
    p.note = std::string(note);
    TAPEWISE_CHECK(parse_op_dtype_same(fields, p));
    TAPEWISE_CHECK(parse_scalars(fields, p));
    TAPEWISE_CHECK(parse_values(fields, p));
    TAPEWISE_CHECK(reject_leftovers(fields, p));
    return p;
  }

 private:
  // The key=value pairs of one case, in the order written; `take` consumes one.
  struct Fields {
    std::map<std::string, std::string> kv;
    std::vector<std::string> order;
    std::optional<std::string> take(const std::string& key) {
      auto it = kv.find(key);
      if (it == kv.end()) return std::nullopt;
      std::string v = std::move(it->second);
      kv.erase(it);
      return v;
    }
  };

  [[nodiscard]] Result<Fields> tokenize(std::string_view body) const {
    Fields f;
    std::size_t i = 0;
    while (i < body.size()) {
      while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
      if (i >= body.size()) break;
      std::size_t j = i;
      while (j < body.size() && body[j] != ' ' && body[j] != '\t') ++j;
      const std::string tok(body.substr(i, j - i));
      i = j;
      const auto eq = tok.find('=');
      if (eq == std::string::npos || eq == 0) return error("bad token '" + tok + "' (expected key=value)");
      std::string key = tok.substr(0, eq);
      if (f.kv.count(key)) return error("duplicate key '" + key + "'");
      f.kv.emplace(key, tok.substr(eq + 1));
      f.order.push_back(std::move(key));
    }
    return f;
  }

  [[nodiscard]] Result<void> parse_op_dtype_same(Fields& f, SpecialPoint& p) const {
    const auto op_tok = f.take("op");
    if (!op_tok) return error("missing key 'op'");
    const auto op = op_from_name(*op_tok);
    if (!op) return error("unknown op '" + *op_tok + "'");
    p.op = *op;
    const auto dt_tok = f.take("dtype");
    if (!dt_tok) return error("missing key 'dtype'");
    const DType* named = nullptr;
    for (const DType& d : kDTypes)
      if (*dt_tok == special_dtype_name(d)) named = &d;
    if (!named) return error("unknown dtype '" + *dt_tok + "' (expected f32, f64, bf16 or f16)");
    p.dtype = *named;
    if (auto s = f.take("same")) {
      if (*s != "0" && *s != "1") return error("same must be 0 or 1, got '" + *s + "'");
      p.same = *s == "1";
      if (p.same && op_info(p.op).arity != 2)
        return error(std::string("same=1 needs a binary op; ") + op_name(p.op) + " is unary");
    }
    return {};
  }

  // Exactly the op's scalar names, each required.
  [[nodiscard]] Result<void> parse_scalars(Fields& f, SpecialPoint& p) const {
    const OpInfo& info = op_info(p.op);
    double* slots[2] = {&p.scalars.s0, &p.scalars.s1};
    for (int k = 0; k < 2; ++k) {
      const std::string name = info.scalar_names[k];
      if (name.empty()) continue;
      const auto tok = f.take(name);
      if (!tok) return error("missing key '" + name + "' (" + info.name + " takes it)");
      std::string why;
      const auto v = parse_scalar(*tok, why);
      if (!v) return error("key '" + name + "': '" + *tok + "' is " + why);
      *slots[k] = *v;
    }
    return {};
  }

  // Inputs, g, y and the gradients: each exactly representable in the case's dtype.
  [[nodiscard]] Result<void> parse_values(Fields& f, SpecialPoint& p) const {
    const OpInfo& info = op_info(p.op);
    auto value = [&](const std::string& key) -> Result<double> {
      const auto tok = f.take(key);
      if (!tok) return error("missing key '" + key + "' (" + info.name + " needs it)");
      std::string why;
      const auto v = parse_exact(*tok, p.dtype, why);
      if (!v) return error("key '" + key + "': '" + *tok + "' is " + why);
      return *v;
    };
    const bool two_inputs = info.arity == 2 && !p.same;
    const std::vector<std::string> in_keys = info.arity == 1 ? std::vector<std::string>{"x"}
                                             : two_inputs    ? std::vector<std::string>{"a", "b"}
                                                             : std::vector<std::string>{"a"};
    const std::vector<std::string> grad_keys = info.arity == 1 ? std::vector<std::string>{"dx"}
                                               : two_inputs    ? std::vector<std::string>{"da", "db"}
                                                               : std::vector<std::string>{"da"};
    for (const auto& k : in_keys) {
      TAPEWISE_TRY(v, value(k));
      p.inputs.push_back(v);
    }
    TAPEWISE_TRY(g, value("g"));
    p.g = g;
    TAPEWISE_TRY(y, value("y"));
    p.y = y;
    for (const auto& k : grad_keys) {
      TAPEWISE_TRY(v, value(k));
      p.grads.push_back(v);
    }
    return {};
  }

  // Names the first leftover key, in the order written.
  [[nodiscard]] Result<void> reject_leftovers(const Fields& f, const SpecialPoint& p) const {
    static const std::set<std::string> known = {"op", "dtype", "same", "c", "lo", "hi", "eps", "x",
                                                "a",  "b",     "g",    "y", "dx", "da", "db"};
    for (const auto& k : f.order) {
      if (!f.kv.count(k)) continue;
      if (!known.count(k)) return error("unknown key '" + k + "'");
      if (p.same && (k == "b" || k == "db"))
        return error("key '" + k + "' with same=1 (a and b are one node; give a= and da= only)");
      return error("key '" + k + "' does not apply to " + op_name(p.op) + " (arity " +
                   std::to_string(op_info(p.op).arity) + ")");
    }
    return {};
  }

  const std::string& origin_;
  int line_;
};

}  // namespace

const char* special_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "f32";
    case DType::float64: return "f64";
    case DType::bfloat16: return "bf16";
    case DType::float16: return "f16";
  }
  return "?";
}

Result<SpecialPoints> parse_special_points(const std::string& text, const std::string& origin) {
  SpecialPoints out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    Reader reader(origin, line);
    std::string_view s = trim(raw);
    if (s.empty() || s.front() == '#') continue;

    // `why <op>: <text>` — the rationale shown by the audit tool; several lines concatenate.
    if (s.substr(0, 4) == "why " || s.substr(0, 4) == "why\t") {
      std::string_view rest = trim(s.substr(4));
      const auto colon = rest.find(':');
      if (colon == std::string_view::npos) return reader.error("why line without ':'");
      const std::string name(trim(rest.substr(0, colon)));
      if (!op_from_name(name)) return reader.error("why line for unknown op '" + name + "'");
      const std::string body(trim(rest.substr(colon + 1)));
      if (body.empty()) return reader.error("empty why line for " + name);
      std::string& w = out.why[name];
      w += (w.empty() ? "" : " ") + body;
      continue;
    }

    std::string_view body = s;
    std::string_view note;
    if (const auto hash = s.find('#'); hash != std::string_view::npos) {
      body = trim(s.substr(0, hash));
      note = trim(s.substr(hash + 1));
    }
    auto p = reader.parse_case(body, note);
    TAPEWISE_CHECK(p);
    out.points.push_back(std::move(*p));
  }
  return out;
}

Result<SpecialPoints> load_special_points(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail(ErrorCode::InvalidArgument, "special points: cannot open " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_special_points(ss.str(), path);
}

bool bits_match(double expected, double produced, DType dtype) {
  if (std::isnan(expected)) return std::isnan(produced);
  // Both sides are values of the dtype widened exactly (an unrepresentable `produced` never matches),
  // so their double bit patterns compare as the dtype's would, signed zeros included.
  if (!std::isnan(produced) && round_to(dtype, produced) != produced) return false;
  return std::bit_cast<std::uint64_t>(expected) == std::bit_cast<std::uint64_t>(produced);
}

std::string format_value(double v, DType dtype) {
  char buf[128];
  if (dtype == DType::float32) {
    const float f = static_cast<float>(v);
    const auto bits = std::bit_cast<std::uint32_t>(f);
    std::snprintf(buf, sizeof buf, "%a (%.9g, bits 0x%08x)", static_cast<double>(f), static_cast<double>(f),
                  static_cast<unsigned>(bits));
  } else if (is_16bit(dtype)) {
    const unsigned bits = dtype == DType::bfloat16 ? bfloat16(v).bits : float16(v).bits;
    std::snprintf(buf, sizeof buf, "%a (%.5g, bits 0x%04x)", v, v, bits);
  } else {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    std::snprintf(buf, sizeof buf, "%a (%.17g, bits 0x%016llx)", v, v, static_cast<unsigned long long>(bits));
  }
  return buf;
}

}  // namespace tapewise
