// cuda/kernels/rtc_std.hpp — the few standard-library names the kernels' headers use, for kernels
// compiled at run time (compiled_pieces.cpp): NVRTC has no C++ standard library, so every standard
// header those headers include resolves to this one there. Never included by nvcc or g++.
#pragma once

#if !defined(__CUDACC_RTC__)
#error "rtc_std.hpp stands in for the standard library under NVRTC only"
#endif

namespace std {
using int8_t = signed char;
using uint8_t = unsigned char;
using int16_t = short;
using uint16_t = unsigned short;
using int32_t = int;
using uint32_t = unsigned int;
using int64_t = long;  // LP64, as the host's <cstdint>: the Step a kernel reads is the host's
using uint64_t = unsigned long;
using size_t = decltype(sizeof 0);
static_assert(sizeof(int64_t) == 8 && sizeof(uint64_t) == 8, "an LP64 target");

template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> {
  using type = T;
};
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;

template <class A, class B>
inline constexpr bool is_same_v = false;
template <class A>
inline constexpr bool is_same_v<A, A> = true;

__device__ inline bool signbit(float x) { return ::signbit(x); }
__device__ inline bool signbit(double x) { return ::signbit(x); }
}  // namespace std
