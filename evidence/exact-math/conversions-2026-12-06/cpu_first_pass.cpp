// evidence/exact-math/conversions-2026-12-06/cpu_first_pass.cpp — the CPU's float32 first passes (tanh, log, exp, sin)
// timed alone, one thread, 2^22 elements, best of 15, for two trees side by side: built from the repository root with
//   g++ -std=c++20 -O3 -march=x86-64-v3 -ffp-contract=off -I TREE/cuda -I TREE/include -I build/include \
//       -I build/generated -o cpu_first_pass evidence/exact-math/conversions-2026-12-06/cpu_first_pass.cpp
// where TREE is a checkout of the commit to time (git archive COMMIT cuda include | tar x -C TREE).
#define TAPEWISE_MATH_EXACT 1
#include <chrono>
#include <cstdio>
#include <vector>
#include "kernels/speculative.cuh"
namespace sp = tapewise::detail::speculative;
template <class F> void time_it(const char* name, F f, const std::vector<float>& x) {
  const int n = x.size(); std::vector<float> y(n); std::vector<unsigned char> u(n);
  double best = 1e9;
  for (int rep = 0; rep < 15; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) { bool fl; y[i] = f(x[i], fl); u[i] = fl; }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%-5s %.3f ns/element\n", name, best * 1e9 / n);
}
int main() {
  const int n = 1 << 22; std::vector<float> a(n), b(n), c(n);
  unsigned h = 1;
  for (int i = 0; i < n; ++i) { h = h * 1664525u + 1013904223u; float unit = (h >> 8) * 0x1p-24f;
    a[i] = 10 * unit - 5; b[i] = tapewise::exact::float_of(0x30000000u + (h >> 4) % 0x1C000000u); c[i] = 40 * unit - 20; }
  time_it("tanh", [](float x, bool& f) { return sp::tanh(x, f); }, a);
  time_it("log", [](float x, bool& f) { return sp::log(x, f); }, b);
  time_it("exp", [](float x, bool& f) { return sp::exp(x, f); }, c);
  time_it("sin", [](float x, bool& f) { return sp::sin_or_cos<0>(x, f); }, c);
}
