// cuda/core/core.cpp — the out-of-line parts of the core value types (tapewise/core.hpp): shape
// arithmetic with overflow checks and the names of error codes.
#include <string>

#include <tapewise/core.hpp>

namespace tapewise {

// Called several times per buffer made: a checked multiply, not a division per dim.
std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

Result<void> Shape::check() const {
  if (dims.size() > static_cast<std::size_t>(kMaxNdim))
    return fail(ErrorCode::InvalidShape, "shape has " + std::to_string(dims.size()) + " dims, more than the " +
                                             std::to_string(kMaxNdim) + " allowed");
  if (numel() < 0)
    return fail(ErrorCode::InvalidShape, "invalid shape " + str() + " (negative dim or element count overflows int64)");
  return {};
}

std::string Shape::str() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::InvalidNodeId: return "InvalidNodeId";
    case ErrorCode::InvalidShape: return "InvalidShape";
    case ErrorCode::ShapeMismatch: return "ShapeMismatch";
    case ErrorCode::DTypeMismatch: return "DTypeMismatch";
    case ErrorCode::SeedShapeMismatch: return "SeedShapeMismatch";
    case ErrorCode::SeedDTypeMismatch: return "SeedDTypeMismatch";
    case ErrorCode::BackendMismatch: return "BackendMismatch";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::OutOfMemory: return "OutOfMemory";
    case ErrorCode::DeviceUnavailable: return "DeviceUnavailable";
    case ErrorCode::CudaFailure: return "CudaFailure";
  }
  return "UnknownError";
}

}  // namespace tapewise
