// tapewise/core.hpp — the value types of the public API: DType, Shape, Error, Result, HostArray.
// Plain data with no backend dependency; everything else in the API is built from these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace tapewise {

enum class DType : std::uint8_t { float32, float64 };

inline std::size_t dtype_size(DType d) { return d == DType::float32 ? 4 : 8; }
inline const char* dtype_name(DType d) { return d == DType::float32 ? "float32" : "float64"; }

// Rounds a host double once (round-to-nearest-even) to the dtype and widens it back exactly.
inline double round_to(DType d, double v) {
  return d == DType::float32 ? static_cast<double>(static_cast<float>(v)) : v;
}

enum class ErrorCode {
  InvalidNodeId,
  InvalidShape,
  ShapeMismatch,
  DTypeMismatch,
  SeedShapeMismatch,
  SeedDTypeMismatch,
  BackendMismatch,
  InvalidArgument,
  OutOfMemory,
  DeviceUnavailable,
  CudaFailure,
};

const char* error_code_name(ErrorCode c);

struct [[nodiscard]] Error {
  ErrorCode code;
  std::string message;  // names the op and the offending ids, shapes or dtypes
  std::string str() const { return std::string(error_code_name(code)) + ": " + message; }
};

// Every function that returns a Result is [[nodiscard]], and tapewise's own build makes ignoring
// one an error (-Werror=unused-result): a failed call whose Result is dropped, or read with `*`
// without a check, goes on with a value that was never computed. Use .value() (throws
// tl::bad_expected_access) or test the Result before `*` or `->`.
template <class T>
using Result = tl::expected<T, Error>;

[[nodiscard]] inline tl::unexpected<Error> fail(ErrorCode c, std::string message) {
  return tl::unexpected<Error>(Error{c, std::move(message)});
}

// The most dims a shape may have (the C ABI's TW_MAX_NDIM): every way in checks it, so that a
// shape can always be read back into a buffer of this size.
inline constexpr int kMaxNdim = 32;

// Rank-N shape with 64-bit dims; rank 0 is a scalar (one element), a zero dim makes it empty.
struct Shape {
  std::vector<std::int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<std::int64_t> d) : dims(d) {}
  explicit Shape(std::vector<std::int64_t> d) : dims(std::move(d)) {}

  // Element count, or -1 when a dim is negative or the product overflows int64.
  std::int64_t numel() const;
  // At most kMaxNdim dims, none negative, and an element count that fits int64.
  bool valid() const { return dims.size() <= static_cast<std::size_t>(kMaxNdim) && numel() >= 0; }
  // Why the shape is not valid (InvalidShape, naming the dims), or nothing when it is.
  [[nodiscard]] Result<void> check() const;
  std::string str() const;
  friend bool operator==(const Shape&, const Shape&) = default;
};

// The one way errors travel through tapewise's own code (library, runner, tools): a failed Result
// returns its Error from the enclosing function, whatever that function's Result<T> is.
//   TAPEWISE_TRY(buf, be.allocate(...));   declares `buf` from the value, or returns the error
//   TAPEWISE_CHECK(tape.flush());          returns the error of a Result<void> (or any Result)
#define TAPEWISE_TRY(var, expr)                                              \
  auto var##_result_ = (expr);                                               \
  if (!var##_result_) return ::tl::unexpected(std::move(var##_result_).error()); \
  auto var = std::move(*var##_result_)
#define TAPEWISE_CHECK(expr)                                                          \
  do {                                                                                \
    if (auto&& tapewise_check_ = (expr); !tapewise_check_)                            \
      return ::tl::unexpected(std::move(tapewise_check_).error());                    \
  } while (0)

// A host-side tensor: shape, dtype and the raw little-endian element bytes (bit-exact).
struct HostArray {
  Shape shape;
  DType dtype = DType::float32;
  std::vector<std::byte> bytes;

  template <class T>
  static HostArray of(Shape shape, std::span<const T> values);
  template <class T>
  static HostArray of(Shape shape, const std::vector<T>& values) {
    return of<T>(std::move(shape), std::span<const T>(values));
  }
  std::int64_t numel() const { return static_cast<std::int64_t>(bytes.size() / dtype_size(dtype)); }
  template <class T>
  T at(std::int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  // Element i widened to double (exact for both dtypes).
  double as_double(std::int64_t i) const {
    return dtype == DType::float32 ? static_cast<double>(at<float>(i)) : at<double>(i);
  }
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
};

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::float64;
};

template <class T>
HostArray HostArray::of(Shape shape, std::span<const T> values) {
  HostArray h;
  h.shape = std::move(shape);
  h.dtype = dtype_of<T>::value;
  h.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(h.bytes.data(), values.data(), h.bytes.size());
  return h;
}

}  // namespace tapewise
