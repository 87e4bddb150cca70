// evidence/exact-math/conversions-2026-12-06/variants.cu — an experiment, not part of the library: exact
// mode's float32 first passes (tanh, log, exp) at 2^26 elements with their float <-> double conversions
// done as the library does them (F2F, I2F) and by integer operations on the bits, to learn whether the
// 64-bit conversions (16 results a clock per SM on sm_90, against 64 for a DFMA) limit the kernels.
// Built by call.sh's build line; each variant's floats are checked against the library's where neither
// is flagged.
#define TAPEWISE_MATH_EXACT 1
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/speculative.cuh"

namespace sp = tapewise::detail::speculative;
namespace ex = tapewise::exact;
namespace et = tapewise::exact::detail::exp_tanh;
using ex::bits_of;
using ex::double_of;
using ex::float_of;

// A positive normal float as a double from its bits (a zero or subnormal gives a tiny positive double).
__device__ __forceinline__ double double_of_positive_float(float f) {
  const std::uint32_t u = bits_of(f);
  return double_of((static_cast<std::uint64_t>((u >> 3) + 0x38000000u) << 32) | static_cast<std::uint64_t>(u << 29));
}
// A normal float of either sign as a double from its bits.
__device__ __forceinline__ double double_of_float(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t hi = (((u & 0x7FFFFFFFu) >> 3) + 0x38000000u) | (u & 0x80000000u);
  return double_of((static_cast<std::uint64_t>(hi) << 32) | static_cast<std::uint64_t>(u << 29));
}
// A positive double of float's normal range, not on a midpoint, rounded to float by its bits.
__device__ __forceinline__ float float_of_positive_double(double y) {
  const std::uint64_t u = bits_of(y) + (std::uint64_t{1} << 28);
  return float_of(static_cast<std::uint32_t>(u >> 29) - 0xC0000000u);
}
// The same for either sign.
__device__ __forceinline__ float float_of_double(double y) {
  const std::uint64_t u = bits_of(y);
  const std::uint32_t magnitude = static_cast<std::uint32_t>((u + (std::uint64_t{1} << 28)) >> 29) - 0xC0000000u;
  return float_of((magnitude & 0x7FFFFFFFu) | (static_cast<std::uint32_t>(u >> 32) & 0x80000000u));
}

// ---- tanh
template <bool kIntIn, bool kIntOut>
__device__ __forceinline__ float tanh_variant(float x, bool& uncertain) {
  const std::uint32_t sign = bits_of(x) & 0x80000000u;
  const float ax = float_of(bits_of(x) ^ sign);
  const bool tiny = ax < 0x1p-12f;
  const bool below_10 = ax < 10.0f;
  const float twice = 2.0f * (below_10 ? ax : 10.0f);
  const double z = kIntIn ? double_of_positive_float(twice) : static_cast<double>(twice);
  const et::Reduced a = et::reduce(z);
  const double scale = et::two_to(a.k_int >> 6);
  const et::Exp2Of64th entry = et::exp2_64ths(a.k_int & 63);
  const double s_hi_minus_1 = entry.hi * scale - 1.0;
  const double e = ex::fma(ex::fma(entry.hi, et::expm1_poly5(a.r_hi), entry.lo), scale, s_hi_minus_1);
  const double y = et::ratio_to_rounded_sum(e, e + 2.0);
  uncertain = below_10 ? !tiny & !et::float_rounding_is_certain(y, 32) : ax != ax;
  const float fy = kIntOut ? float_of_positive_double(y) : static_cast<float>(y);
  const std::uint32_t magnitude_bits = below_10 ? bits_of(fy) : 0x3F800000u;
  return float_of(tiny ? bits_of(x) : magnitude_bits | sign);
}

// ---- log: the reduction on the float's bits (normal floats; others flagged)
template <bool kNoI2F, bool kIntInvC, bool kIntOut>
__device__ __forceinline__ float log_variant(float x, bool& uncertain) {
  using namespace tapewise::exact::detail;
  constexpr double kLn2 = 0x1.62e42fefa39efp-1;
  const std::uint32_t u0 = bits_of(x);
  const bool special = u0 - 0x00800000u >= 0x7F000000u;  // not positive, normal and finite
  const std::uint32_t u = special ? 0x3F800000u : u0;
  const std::uint32_t shifted = u - 0x3F2F8000u;  // 0.685546875f
  const int exponent = static_cast<std::int32_t>(shifted) >> 23;
  const int index = (shifted >> 16) & 127;
  const double m = double_of_positive_float(float_of(u - (shifted & 0xFF800000u)));
  const float inv_c_f = kLogInvC[index];
  const double inv_c = kIntInvC ? double_of_positive_float(inv_c_f) : static_cast<double>(inv_c_f);
  double k;
  if (kNoI2F) {
    k = double_of(0x4330000000000000ull | (static_cast<std::uint32_t>(exponent) ^ 0x80000000u)) - 0x1.00000800000p52;
  } else {
    k = static_cast<double>(exponent);
  }
  const double r = ex::fma(m, inv_c, -1.0);
  const double s1 = ex::fma(k, kLn2, kLogCHi[index]);
  const double y = s1 + ex::fma(r * r, log1p_minus_r_over_r2(r), r);
  const std::uint32_t below_float = static_cast<std::uint32_t>(bits_of(y)) & 0x1fffffffu;
  uncertain = special | !(below_float - (0x10000000u - 8u) > 16u);
  return kIntOut ? float_of_double(y) : static_cast<float>(y);
}

// ---- exp
template <bool kIntIn, bool kIntOut>
__device__ __forceinline__ float exp_variant(float x, bool& uncertain) {
  const bool inside = (x >= -87.0f) & (x <= 88.0f);  // normal results only (the library: [-104, 89])
  const float xi = float_of(inside ? bits_of(x) : 0u);
  const double xd = kIntIn ? double_of_float(xi) : static_cast<double>(xi);
  const et::Reduced a = et::reduce(xd);
  const double s = et::exp2_64ths_hi(a.k_int & 63);
  const double y = ex::fma(s, et::expm1_poly5(et::reduced_double(a)), s) * et::two_to(a.k_int >> 6);
  uncertain = !(inside & et::float_rounding_is_certain(y, 4));
  return kIntOut ? float_of_positive_double(y) : static_cast<float>(y);
}

struct Copy { __device__ float operator()(float x, bool& u) const { u = false; return x; } };
struct TanhLib { __device__ float operator()(float x, bool& u) const { return sp::tanh(x, u); } };
template <bool I, bool O> struct Tanh { __device__ float operator()(float x, bool& u) const { return tanh_variant<I, O>(x, u); } };
struct LogLib { __device__ float operator()(float x, bool& u) const { return sp::log(x, u); } };
template <bool A, bool B, bool C> struct Log { __device__ float operator()(float x, bool& u) const { return log_variant<A, B, C>(x, u); } };
struct ExpLib { __device__ float operator()(float x, bool& u) const { return sp::exp(x, u); } };
template <bool I, bool O> struct Exp { __device__ float operator()(float x, bool& u) const { return exp_variant<I, O>(x, u); } };

// One tile per block, like the library's map kernels: Vectors float4s a thread, loaded first.
template <class F, int Threads, int Vectors>
__global__ void __launch_bounds__(Threads) run(F f, const float4* in, float4* out, long nvec, unsigned char* flags) {
  const long base = static_cast<long>(blockIdx.x) * Threads * Vectors + threadIdx.x;
  float4 xs[Vectors];
#pragma unroll
  for (int v = 0; v < Vectors; ++v)
    if (base + v * Threads < nvec) xs[v] = in[base + v * Threads];
#pragma unroll
  for (int v = 0; v < Vectors; ++v) {
    const long j = base + v * Threads;
    if (j >= nvec) continue;
    bool a, b, c, d;
    float4 y;
    y.x = f(xs[v].x, a);
    y.y = f(xs[v].y, b);
    y.z = f(xs[v].z, c);
    y.w = f(xs[v].w, d);
    out[j] = y;
    if (a | b | c | d) flags[j] = 1;  // rare: the library runs its second pass here
  }
}

__global__ void fill(float* x, long n, int kind) {  // inputs from a hash of the index
  for (long i = blockIdx.x * long(blockDim.x) + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u;
    h ^= h >> 15; h *= 2246822519u; h ^= h >> 13; h *= 3266489917u; h ^= h >> 16;
    const float unit = (h >> 8) * 0x1p-24f;  // [0, 1)
    if (kind == 0) x[i] = 10.0f * unit - 5.0f;                   // tanh: [-5, 5)
    else if (kind == 1) x[i] = float_of(0x30000000u + (h % 0x1C000000u));  // log: [2^-31, 2^25)
    else x[i] = 40.0f * unit - 20.0f;                            // exp: [-20, 20)
  }
}

#define CHECK(e) do { cudaError_t err_ = (e); if (err_ != cudaSuccess) { std::printf("%s: %s\n", #e, cudaGetErrorString(err_)); std::exit(1); } } while (0)

constexpr long kN = 1L << 26;
float *g_in, *g_out, *g_ref;
unsigned char *g_flags, *g_ref_flags;
int g_reps = 25;  // VARIANTS_REPS=1 for a profiler: each kernel once

template <class F, int T, int V>
float time_variant(const char* name, const float copy_us) {
  const long nvec = kN / 4;
  const unsigned blocks = static_cast<unsigned>((nvec + T * V - 1) / (T * V));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
  std::vector<float> times;
  for (int rep = 0; rep < g_reps; ++rep) {
    CHECK(cudaMemset(g_flags, 0, nvec));
    CHECK(cudaEventRecord(a));
    run<F, T, V><<<blocks, T>>>(F{}, reinterpret_cast<const float4*>(g_in), reinterpret_cast<float4*>(g_out), nvec, g_flags);
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    float ms; CHECK(cudaEventElapsedTime(&ms, a, b));
    if (rep >= g_reps - 20 || g_reps <= 20) times.push_back(ms * 1000.0f);
  }
  std::sort(times.begin(), times.end());
  const float median = times[times.size() / 2];
  // Against the reference (the library's first pass, run last into g_ref): floats where neither flags.
  long differ = 0, flagged = 0;
  if (g_ref) {
    std::vector<float> out(kN), ref(kN);
    std::vector<unsigned char> fl(nvec), rf(nvec);
    CHECK(cudaMemcpy(out.data(), g_out, kN * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(ref.data(), g_ref, kN * 4, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(fl.data(), g_flags, nvec, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(rf.data(), g_ref_flags, nvec, cudaMemcpyDeviceToHost));
    for (long i = 0; i < kN; ++i) {
      if (fl[i / 4]) { ++flagged; continue; }
      if (rf[i / 4]) continue;
      if (bits_of(out[i]) != bits_of(ref[i])) ++differ;
    }
  }
  std::printf("%-34s %3dx%d  median %8.1f us (min %8.1f, max %8.1f)  %5.1f%% of the copy  vectors flagged %ld/4  differ %ld\n",
              name, T, V, median, times.front(), times.back(), copy_us > 0 ? 100.0f * copy_us / median : 100.0f, flagged / 4,
              differ);
  return median;
}

template <class Lib, int T, int V>
void reference() {  // the library's first pass into g_ref, g_ref_flags
  float* keep = g_out; unsigned char* keep_flags = g_flags;
  g_out = g_ref; g_flags = g_ref_flags;
  float* ref = g_ref; g_ref = nullptr;
  time_variant<Lib, T, V>("(reference)", 0);
  g_ref = ref; g_out = keep; g_flags = keep_flags;
}

int main() {
  if (const char* reps = std::getenv("VARIANTS_REPS")) g_reps = std::max(1, std::atoi(reps));
  CHECK(cudaMalloc(&g_in, kN * 4)); CHECK(cudaMalloc(&g_out, kN * 4)); CHECK(cudaMalloc(&g_ref, kN * 4));
  CHECK(cudaMalloc(&g_flags, kN / 4)); CHECK(cudaMalloc(&g_ref_flags, kN / 4));
  cudaDeviceProp prop; CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs; 2^26 float32, medians of 20 timed launches after 5\n", prop.name, prop.multiProcessorCount);
  cudaEvent_t a, b; CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
  std::vector<float> copies;
  for (int rep = 0; rep < 25; ++rep) {
    CHECK(cudaEventRecord(a)); CHECK(cudaMemcpyAsync(g_out, g_in, kN * 4, cudaMemcpyDeviceToDevice)); CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b)); float ms; CHECK(cudaEventElapsedTime(&ms, a, b)); if (rep >= 5) copies.push_back(ms * 1000);
  }
  std::sort(copies.begin(), copies.end());
  const float copy = copies[copies.size() / 2];
  std::printf("cudaMemcpy D2D: median %.1f us (%.0f GB/s)\n", copy, 2.0 * kN * 4 / copy / 1e3);
  for (int kind = 0; kind < 3; ++kind) {
    fill<<<1024, 256>>>(g_in, kN, kind);
    CHECK(cudaDeviceSynchronize());
    float* ref = g_ref; g_ref = nullptr;
    time_variant<Copy, 256, 4>("copy kernel", copy);
    g_ref = ref;
    if (kind == 0) {
      reference<TanhLib, 256, 4>();
      time_variant<TanhLib, 256, 4>("tanh: library", copy);
      time_variant<Tanh<false, false>, 256, 4>("tanh: F2F in, F2F out", copy);
      time_variant<Tanh<true, false>, 256, 4>("tanh: bits in, F2F out", copy);
      time_variant<Tanh<true, true>, 256, 4>("tanh: bits in, bits out", copy);
      time_variant<Tanh<true, true>, 128, 2>("tanh: bits in, bits out", copy);
    } else if (kind == 1) {
      reference<LogLib, 128, 2>();
      time_variant<LogLib, 128, 2>("log: library", copy);
      time_variant<Log<false, false, false>, 128, 2>("log: float bits, I2F, F2F inv_c", copy);
      time_variant<Log<true, false, false>, 128, 2>("log: float bits, no I2F", copy);
      time_variant<Log<true, true, false>, 128, 2>("log: + inv_c by bits", copy);
      time_variant<Log<true, true, true>, 128, 2>("log: + result by bits", copy);
      time_variant<Log<true, true, true>, 256, 4>("log: + result by bits", copy);
    } else {
      reference<ExpLib, 256, 4>();
      time_variant<ExpLib, 256, 4>("exp: library", copy);
      time_variant<Exp<false, false>, 256, 4>("exp: F2F in, F2F out", copy);
      time_variant<Exp<true, false>, 256, 4>("exp: bits in, F2F out", copy);
      time_variant<Exp<true, true>, 256, 4>("exp: bits in, bits out", copy);
    }
  }
  return 0;
}
