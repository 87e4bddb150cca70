// conform/library/cases.cpp — the input generators. Values are built from raw 64-bit draws (no
// std::*_distribution, whose output differs between standard libraries), so a seed means the
// same inputs everywhere.
#include "cases.hpp"

#include "bounds.hpp"  // bounds_domain
#include "format.hpp"  // format_of

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace tapewise::conform {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Stored significand bits (the implicit one aside) of each dtype.
int stored_bits(DType d) { return reference::format_of(d).precision - 1; }

// Magnitude in [2^lo, 2^hi): a uniformly drawn exponent, then a uniformly drawn significand of the
// dtype's width. The range is reference::bounds_domain's, the one the dtype's bounds are stated for
// (spec/ops.def's, narrowed for float16).
double domain_value(DType d, int lo, int hi, bool positive_only, std::mt19937_64& rng) {
  const int exponent = lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo));
  const int bits = stored_bits(d);
  const double significand = 1.0 + std::ldexp(static_cast<double>(rng() >> (64 - bits)), -bits);
  const double v = round_to(d, std::ldexp(significand, exponent));
  const bool negative = !positive_only && (rng() & 1);
  return negative ? -v : v;
}

double value_of_bits16(DType d, std::uint16_t b) {
  return d == DType::bfloat16 ? static_cast<double>(bfloat16::from_bits(b)) : static_cast<double>(float16::from_bits(b));
}

double random_bits_value(DType d, std::mt19937_64& rng) {
  if (is_16bit(d)) return value_of_bits16(d, static_cast<std::uint16_t>(rng() >> 48));
  if (d == DType::float32) {
    const auto b = static_cast<std::uint32_t>(rng() >> 32);
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;  // a signalling NaN becomes quiet here; host_array writes a quiet NaN either way
  }
  const std::uint64_t b = rng();
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

// The dtype's value next to `v` (a value of it) toward `toward`.
double next_value(DType d, double v, double toward) {
  switch (d) {
    case DType::float32: return static_cast<double>(std::nextafter(static_cast<float>(v), static_cast<float>(toward)));
    case DType::float64: return std::nextafter(v, toward);
    case DType::bfloat16:
    case DType::float16: break;
  }
  if (v == toward || std::isnan(v) || std::isnan(toward)) return v == toward ? v : v + toward;
  // The 16-bit formats order their magnitudes by their bits: one step of the bits is one value.
  const double smallest = std::ldexp(1.0, reference::format_of(d).min_exponent - stored_bits(d));
  if (v == 0) return toward > 0 ? smallest : -smallest;
  const std::uint16_t bits = d == DType::bfloat16 ? bfloat16(v).bits : float16(v).bits;
  const bool away_from_zero = (toward > v) == (v > 0);
  return value_of_bits16(d, static_cast<std::uint16_t>(away_from_zero ? bits + 1 : bits - 1));
}

Batch empty_batch(Op op, DType dtype, const Scalars& s) {
  Batch b;
  b.op = op;
  b.dtype = dtype;
  b.scalars = s;
  return b;
}

Batch make_batch(Op op, DType dtype, const Scalars& s, const std::vector<std::vector<double>>& inputs,
                 const std::vector<double>& g) {
  Batch b = empty_batch(op, dtype, s);
  for (const auto& in : inputs) b.inputs.push_back(host_array(dtype, in));
  b.g = host_array(dtype, g);
  return b;
}

// Replaces the last case with the op's kink (spec/ops.def), chosen by the bits of `pick`.
void put_kink(Kink kink, DType dtype, double lo, double hi, std::uint64_t pick, std::vector<std::vector<double>>& in) {
  switch (kink) {
    case Kink::none: break;
    case Kink::zero: in[0].back() = (pick & 1) ? -0.0 : 0.0; break;
    case Kink::tie:
      if (pick % 4 == 0) {
        in[0].back() = (pick & 4) ? -0.0 : 0.0;
        in[1].back() = -in[0].back();
      } else {
        in[1].back() = in[0].back();
      }
      break;
    case Kink::bounds: {
      const double bound = (pick & 1) ? hi : lo;
      const double toward = (pick & 2) ? HUGE_VAL : -HUGE_VAL;
      const double neighbour = next_value(dtype, bound, toward);
      in[0].back() = (pick & 4) ? neighbour : bound;
      break;
    }
  }
}

}  // namespace


std::vector<Scalars> default_scalar_sets(Op op) {
  const ScalarSets& sets = op_info(op).run_scalars;
  if (sets.empty()) return {Scalars{}};  // a node without scalars: one batch
  return {sets.begin(), sets.end()};
}

std::string scalars_text(Op op, const Scalars& s) {
  const OpInfo& info = op_info(op);
  std::string out;
  const double values[2] = {s.s0, s.s1};
  for (int i = 0; i < info.scalar_count(); ++i) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, values[i]);
    out += (i ? " " : "") + std::string(info.scalar_names[i]) + "=" + std::string(buf, r.ptr);
  }
  return out;
}

std::mt19937_64 batch_rng(std::uint64_t seed, Op op, DType dtype, int scalar_set, int kind) {
  std::uint64_t key = splitmix64(seed);
  for (std::uint64_t part : {static_cast<std::uint64_t>(op), static_cast<std::uint64_t>(dtype),
                             static_cast<std::uint64_t>(scalar_set), static_cast<std::uint64_t>(kind)})
    key = splitmix64(key ^ part);
  return std::mt19937_64(key);
}

Batch domain_batch(Op op, DType dtype, const Scalars& s, std::int64_t n, std::mt19937_64& rng) {
  const OpInfo& info = op_info(op);
  std::vector<std::vector<double>> in(static_cast<std::size_t>(info.arity));
  std::vector<double> g;
  const double lo = round_to(dtype, s.s0), hi = round_to(dtype, s.s1);
  const reference::DomainLog2 domain = reference::bounds_domain(info, dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    for (auto& v : in) v.push_back(domain_value(dtype, domain.lo, domain.hi, info.positive_only, rng));
    g.push_back(domain_value(dtype, domain.lo, domain.hi, false, rng));
    if (rng() % 8 != 0) continue;
    put_kink(info.kink, dtype, lo, hi, rng(), in);
  }
  return make_batch(op, dtype, s, in, g);
}

Batch bit_pattern_batch(Op op, DType dtype, const Scalars& s, std::int64_t n, std::mt19937_64& rng) {
  std::vector<std::vector<double>> in(static_cast<std::size_t>(op_info(op).arity));
  std::vector<double> g;
  for (std::int64_t i = 0; i < n; ++i) {
    for (auto& v : in) v.push_back(random_bits_value(dtype, rng));
    g.push_back(random_bits_value(dtype, rng));
  }
  return make_batch(op, dtype, s, in, g);
}

Batch special_value_batch(Op op, DType dtype, const Scalars& s) {
  const std::vector<double> sv = special_values(dtype);
  const std::size_t k = sv.size();
  std::vector<std::vector<double>> in(static_cast<std::size_t>(op_info(op).arity));
  std::vector<double> g;
  if (in.size() == 1) {
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j) {
        in[0].push_back(sv[i]);
        g.push_back(sv[j]);
      }
  } else {
    for (std::size_t i = 0; i < k; ++i)
      for (std::size_t j = 0; j < k; ++j)
        for (std::size_t m = 0; m < k; m += 3) {  // every third g: the pairs are what matter
          in[0].push_back(sv[i]);
          in[1].push_back(sv[j]);
          g.push_back(sv[(m + i + j) % k]);
        }
  }
  return make_batch(op, dtype, s, in, g);
}

Batch tiled(const Batch& b, std::int64_t n) {
  Batch out = empty_batch(b.op, b.dtype, b.scalars);
  const std::int64_t have = b.size();
  const std::int64_t copies = have == 0 ? 0 : (n + have - 1) / have;
  auto tile = [&](const HostArray& a) {
    HostArray t;
    t.dtype = a.dtype;
    t.shape = Shape{have * copies};
    for (std::int64_t c = 0; c < copies; ++c) t.bytes.insert(t.bytes.end(), a.bytes.begin(), a.bytes.end());
    return t;
  };
  for (const HostArray& in : b.inputs) out.inputs.push_back(tile(in));
  out.g = tile(b.g);
  return out;
}

std::vector<double> special_values(DType dtype) {
  const reference::FloatFormat f = reference::format_of(dtype);
  const int bits = stored_bits(dtype);
  const double denorm = std::ldexp(1.0, f.min_exponent - bits);
  const double tiny = std::ldexp(1.0, f.min_exponent);
  const double huge = std::ldexp(2.0 - std::ldexp(1.0, -bits), f.max_exponent);
  const double inf = HUGE_VAL, nan = std::numeric_limits<double>::quiet_NaN();
  return {0.0, -0.0, denorm, -denorm, tiny, -tiny, huge, -huge, inf, -inf, nan,
          1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 20.0, -20.0, 100.0, -100.0,
          round_to(dtype, 1e-30), round_to(dtype, -1e-30)};
}

namespace {
template <class T>
HostArray narrowed(const Shape& shape, const std::vector<double>& values) {
  std::vector<T> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(static_cast<T>(v));  // exact: already values of the dtype
  return HostArray::of<T>(shape, out);
}
}  // namespace

HostArray host_array(DType dtype, const std::vector<double>& values) {
  const Shape shape{static_cast<std::int64_t>(values.size())};
  switch (dtype) {
    case DType::float32: return narrowed<float>(shape, values);
    case DType::float64: return HostArray::of<double>(shape, values);
    case DType::bfloat16: return narrowed<bfloat16>(shape, values);
    case DType::float16: return narrowed<float16>(shape, values);
  }
  return {};
}

}  // namespace tapewise::conform
