// cuda/backends/speculative_math.hpp — the CPU backend's two passes over the float32 exact math: a
// branch-free first pass over a block of elements, which the compiler vectorizes (kernels/speculative.cuh),
// and a scalar second pass over the few it could not decide, with the bits of the scalar exact functions
// (kernels/exact_math.cuh) on every input.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/speculative.cuh"

namespace tapewise::detail::speculative {

// Calls body(scalar_fn, speculative_fn) when fn is a float32 functor that runs in two passes and
// returns true; false (nothing called) otherwise.
template <class Fn, class Body>
bool with_speculative(const Fn& fn, Body&& body) {
  if constexpr (Speculating<Fn>::value) {
    body(fn, Speculating<Fn>::twin(fn));
    return true;
  } else {
    return false;
  }
}

// The second pass over one block: every flagged element recomputed by the scalar functor.
template <class Fn, int kBlock>
void redo_flagged(const Fn& fn, const float* const* in, std::int64_t first, int count, const unsigned char* uncertain,
                  float (&results)[Fn::nout][kBlock]) {
  for (int word = 0; word < count; word += 8) {
    std::uint64_t flags = 0;
    std::memcpy(&flags, uncertain + word, std::min(8, count - word));
    if (flags == 0) continue;
    for (int i = word; i < std::min(word + 8, count); ++i) {
      if (!uncertain[i]) continue;
      float x[Fn::nin > 0 ? Fn::nin : 1];
      float y[Fn::nout];
      for (int k = 0; k < Fn::nin; ++k) x[k] = in[k][first + i];
      fn(x, y);
      for (int k = 0; k < Fn::nout; ++k) results[k][i] = y[k];
    }
  }
}

// Elements [lo, hi) in blocks: the first pass over a block (the loop the compiler vectorizes) keeps
// the results and flags on the stack, the second recomputes the flagged elements with the scalar
// functor, then the block is stored. Every input of a block is read before any output of it is
// written, so an output may be its own input.
template <class Fn, class SpeculativeFn>
void run_two_passes(const Fn& fn, const SpeculativeFn& speculative_fn, std::int64_t lo, std::int64_t hi,
                    const float* const* in, float* const* out) {
  constexpr int kBlock = 512;
  constexpr int nin = Fn::nin, nout = Fn::nout;
  static_assert(SpeculativeFn::nin == nin && SpeculativeFn::nout == nout);
  float results[nout][kBlock];
  unsigned char uncertain[kBlock];
  for (std::int64_t first = lo; first < hi; first += kBlock) {
    const int count = static_cast<int>(std::min<std::int64_t>(kBlock, hi - first));
    unsigned char any_in_block = 0;
    for (int i = 0; i < count; ++i) {
      Speculative x[nin];
      Speculative y[nout];
      for (int k = 0; k < nin; ++k) x[k] = Speculative(in[k][first + i]);
      speculative_fn(x, y);
      bool any = false;
      for (int k = 0; k < nout; ++k) {
        results[k][i] = y[k].v;
        any |= y[k].uncertain;
      }
      uncertain[i] = any;
      any_in_block |= static_cast<unsigned char>(any);
    }
    // Most blocks flag nothing; elsewhere the flags are read eight at a time (a byte-by-byte scan took
    // a sixth of log's forward at 2^22, perf).
    if (any_in_block) redo_flagged(fn, in, first, count, uncertain, results);
    for (int k = 0; k < nout; ++k) std::copy_n(results[k], count, out[k] + first);
  }
}

}  // namespace tapewise::detail::speculative
