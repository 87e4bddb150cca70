/// tapewise/core.hpp — the value types of the public API: DType, Shape, Error, Result, HostArray.
/// Plain data with no backend dependency; everything else in the API is built from these.
/// \file
#pragma once

#if !defined(__CUDACC_RTC__)  // NVRTC (compiled pieces) is always C++20
#include "requires_cpp20.hpp"
#endif

#include <cstdint>

#include "float16.hpp"

// Kernels compiled at run time (NVRTC, which has no C++ standard library) see only DType.
#if !defined(__CUDACC_RTC__)
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tl/expected.hpp>
#endif

/// Marks what the shared library exports: the library is compiled with hidden visibility, so a
/// declaration without it (the engine, the kernels, the programs) stays inside libtapewise.so.
#if defined(__GNUC__)
#define TAPEWISE_API __attribute__((visibility("default")))
#else
#define TAPEWISE_API
#endif

namespace tapewise {

/// Element types: IEEE binary32 and binary64, bfloat16 and IEEE binary16 (float16.hpp). The values
/// are the C ABI's tw_dtype.
enum class DType : std::uint8_t { float32, float64, bfloat16, float16 };
#if !defined(__CUDACC_RTC__)
/// The number of DType values.
inline constexpr int kDTypeCount = 4;
/// Every dtype, in enum order.
inline constexpr DType kDTypes[kDTypeCount] = {DType::float32, DType::float64, DType::bfloat16, DType::float16};

/// Bytes per element: 4, 8, 2 or 2.
inline std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::float32: return 4;
    case DType::float64: return 8;
    case DType::bfloat16:
    case DType::float16: return 2;
  }
  return 0;
}
/// "float32", "float64", "bfloat16" or "float16".
inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::float32: return "float32";
    case DType::float64: return "float64";
    case DType::bfloat16: return "bfloat16";
    case DType::float16: return "float16";
  }
  return "?";
}
/// Whether the dtype is one of the 16-bit formats, whose ops compute in float32 and round once.
constexpr bool is_16bit(DType d) { return d == DType::bfloat16 || d == DType::float16; }

/// Rounds a host double to the dtype (round-to-nearest-even) and widens it back exactly. float32 and
/// float64 round once; the 16-bit formats round to float32 first, then to 16 bits, as ATen converts
/// a scalar (c10::BFloat16 and c10::Half are built from a float).
inline double round_to(DType d, double v) {
  switch (d) {
    case DType::float32: return static_cast<double>(static_cast<float>(v));
    case DType::float64: return v;
    case DType::bfloat16: return static_cast<double>(bfloat16(v));
    case DType::float16: return static_cast<double>(float16(v));
  }
  return v;
}

/// What went wrong; the C ABI's tw_status is this enum's value + 1.
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

/// The enumerator's name, e.g. "InvalidNodeId".
TAPEWISE_API const char* error_code_name(ErrorCode c);

/// An error: its code and a message naming the op and the offending ids, shapes or dtypes.
struct [[nodiscard]] Error {
  /// What went wrong.
  ErrorCode code;
  std::string message;  ///< names the op and the offending ids, shapes or dtypes
  /// "Code: message".
  std::string str() const { return std::string(error_code_name(code)) + ": " + message; }
};

/// Every function that returns a Result is [[nodiscard]], and tapewise's own build makes ignoring
/// one an error (-Werror=unused-result): a failed call whose Result is dropped, or read with `*`
/// without a check, goes on with a value that was never computed. Use .value() (throws
/// tl::bad_expected_access) or test the Result before `*` or `->`.
template <class T>
using Result = tl::expected<T, Error>;

/// A failed Result of any type, with this code and message.
[[nodiscard]] inline tl::unexpected<Error> fail(ErrorCode c, std::string message) {
  return tl::unexpected<Error>(Error{c, std::move(message)});
}

/// The most dims a shape may have (the C ABI's TW_MAX_NDIM): every way in checks it, so that a
/// shape can always be read back into a buffer of this size.
inline constexpr int kMaxNdim = 32;

/// A shape's dims: a vector of int64 that holds up to kInline of them in place, so that the shape
/// every buffer carries is copied without a heap allocation (a tape makes a buffer per node); more
/// dims than that live on the heap. Reads like the std::vector it replaces, and converts to one.
class Dims {
 public:
  using value_type = std::int64_t;            ///< a dim
  using size_type = std::size_t;              ///< a count of dims
  using iterator = std::int64_t*;             ///< iterates over the dims
  using const_iterator = const std::int64_t*; ///< iterates over the dims, read-only
  static constexpr std::size_t kInline = 5;   ///< the most dims held in place

  Dims() = default;  ///< no dims
  Dims(std::initializer_list<std::int64_t> d) { assign(d.begin(), d.end()); }  ///< these dims
  /// From a std::vector: Shape's dims were one.
  Dims(const std::vector<std::int64_t>& d) { assign(d.data(), d.data() + d.size()); }
  Dims(const Dims& other) { assign(other.begin(), other.end()); }  ///< a copy
  /// Takes other's dims; other is left empty.
  Dims(Dims&& other) noexcept : heap_(std::move(other.heap_)), size_(std::exchange(other.size_, 0)) {
    std::memcpy(inline_, other.inline_, sizeof inline_);
  }
  /// Becomes a copy of other.
  Dims& operator=(const Dims& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  /// Takes other's dims; other is left empty.
  Dims& operator=(Dims&& other) noexcept {
    if (this != &other) {
      size_ = other.size_;
      std::memcpy(inline_, other.inline_, sizeof inline_);
      heap_ = std::move(other.heap_);
      other.size_ = 0;
      other.heap_.clear();
    }
    return *this;
  }
  /// A copy as a std::vector.
  operator std::vector<std::int64_t>() const { return std::vector<std::int64_t>(begin(), end()); }

  std::size_t size() const { return size_; }  ///< the number of dims
  bool empty() const { return size_ == 0; }   ///< no dims (a scalar's shape)
  std::int64_t* data() { return size_ <= kInline ? inline_ : heap_.data(); }              ///< the dims, in order
  const std::int64_t* data() const { return size_ <= kInline ? inline_ : heap_.data(); }  ///< the dims, read-only
  std::int64_t* begin() { return data(); }                    ///< the first dim
  std::int64_t* end() { return data() + size_; }              ///< past the last dim
  const std::int64_t* begin() const { return data(); }        ///< the first dim, read-only
  const std::int64_t* end() const { return data() + size_; }  ///< past the last dim, read-only
  std::int64_t& operator[](std::size_t i) { return data()[i]; }      ///< dim i (unchecked)
  std::int64_t operator[](std::size_t i) const { return data()[i]; }  ///< dim i (unchecked)
  /// Appends a dim (the sixth moves them all to the heap).
  void push_back(std::int64_t d) {
    if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
    if (size_ < kInline) inline_[size_] = d;
    else heap_.push_back(d);
    ++size_;
  }
  /// Removes every dim.
  void clear() {
    size_ = 0;
    heap_.clear();
  }
  /// Equal when they hold the same dims.
  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void assign(const std::int64_t* first, const std::int64_t* last) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n <= kInline) {
      std::copy(first, last, inline_);
      heap_.clear();
    } else {
      heap_.assign(first, last);
    }
    size_ = n;
  }
  std::int64_t inline_[kInline] = {};
  std::vector<std::int64_t> heap_;  // every dim, when there are more than kInline
  std::size_t size_ = 0;
};

/// Rank-N shape with 64-bit dims; rank 0 is a scalar (one element), a zero dim makes it empty.
struct TAPEWISE_API Shape {
  /// The dims, outermost first.
  Dims dims;

  Shape() = default;
  /// A shape of these dims, e.g. Shape{2, 3}.
  Shape(std::initializer_list<std::int64_t> d) : dims(d) {}
  /// A shape of these dims.
  explicit Shape(const std::vector<std::int64_t>& d) : dims(d) {}

  /// Element count, or -1 when a dim is negative or the product overflows int64.
  std::int64_t numel() const;
  /// At most kMaxNdim dims, none negative, and an element count that fits int64.
  bool valid() const { return dims.size() <= static_cast<std::size_t>(kMaxNdim) && numel() >= 0; }
  /// Why the shape is not valid (InvalidShape, naming the dims), or nothing when it is.
  [[nodiscard]] Result<void> check() const;
  /// The dims as text, e.g. "[2, 3]".
  std::string str() const;
  /// Equal when the dims are.
  friend bool operator==(const Shape&, const Shape&) = default;
};

/// The one way errors travel through tapewise's own code (library, runner, tools): a failed Result
/// returns its Error from the enclosing function, whatever that function's Result<T> is.
///   TAPEWISE_TRY(buf, be.allocate(...));   declares `buf` from the value, or returns the error
///   TAPEWISE_CHECK(tape.flush());          returns the error of a Result<void> (or any Result)
#define TAPEWISE_TRY(var, expr)                                              \
  auto var##_result_ = (expr);                                               \
  if (!var##_result_) return ::tl::unexpected(std::move(var##_result_).error()); \
  auto var = std::move(*var##_result_)
/// Returns the error of a failed Result from the enclosing function (see TAPEWISE_TRY).
#define TAPEWISE_CHECK(expr)                                                          \
  do {                                                                                \
    if (auto&& tapewise_check_ = (expr); !tapewise_check_)                            \
      return ::tl::unexpected(std::move(tapewise_check_).error());                    \
  } while (0)

/// A host-side tensor: shape, dtype and the raw little-endian element bytes (bit-exact).
struct HostArray {
  /// The shape.
  Shape shape;
  /// The element type.
  DType dtype = DType::float32;
  /// The elements' bytes, little-endian, numel() * dtype_size(dtype).
  std::vector<std::byte> bytes;

  template <class T>
  /// A copy of `values` (float, double, bfloat16 or float16) with this shape.
  static HostArray of(Shape shape, std::span<const T> values);
  template <class T>
  /// A copy of `values` (float, double, bfloat16 or float16) with this shape.
  static HostArray of(Shape shape, const std::vector<T>& values) {
    return of<T>(std::move(shape), std::span<const T>(values));
  }
  /// The element count.
  std::int64_t numel() const { return static_cast<std::int64_t>(bytes.size() / dtype_size(dtype)); }
  template <class T>
  /// Element i as T (T must match the dtype).
  T at(std::int64_t i) const {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return v;
  }
  /// Element i widened to double (exact for every dtype).
  double as_double(std::int64_t i) const {
    switch (dtype) {
      case DType::float32: return static_cast<double>(at<float>(i));
      case DType::float64: return at<double>(i);
      case DType::bfloat16: return static_cast<double>(at<bfloat16>(i));
      case DType::float16: return static_cast<double>(at<float16>(i));
    }
    return 0.0;
  }
  template <class T>
  /// The elements as T (T must match the dtype).
  std::vector<T> to_vector() const {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
};

template <class T>
struct dtype_of;
template <>
/// float is float32.
struct dtype_of<float> {
  /// The dtype.
  static constexpr DType value = DType::float32;
};
template <>
/// double is float64.
struct dtype_of<double> {
  /// The dtype.
  static constexpr DType value = DType::float64;
};
template <>
/// bfloat16 is bfloat16.
struct dtype_of<bfloat16> {
  /// The dtype.
  static constexpr DType value = DType::bfloat16;
};
template <>
/// float16 is float16.
struct dtype_of<float16> {
  /// The dtype.
  static constexpr DType value = DType::float16;
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

#endif  // !defined(__CUDACC_RTC__)

}  // namespace tapewise
