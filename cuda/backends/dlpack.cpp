// cuda/backends/dlpack.cpp — DLPack exchange for both backends: importing a framework's tensor as a borrowed
// buffer (no copy) and exporting buffers as DLManagedTensor, owning or as views. Only the checks and
// the bookkeeping live here; which memory a backend can use is the backend's own check.
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include <tapewise/backend.hpp>

namespace tapewise {
namespace {

const char* device_type_name(std::int32_t type) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLROCM: return "rocm";
    default: return "an unknown device type";
  }
}

// The tensor's device type as the int the producer stored. DLDeviceType has no fixed underlying
// type, so loading a value outside its enumerators (a producer's newer device, or garbage) as the
// enum is undefined behaviour: the bytes are read as an int instead.
std::int32_t raw_device_type(const DLDevice& device) {
  static_assert(sizeof(DLDeviceType) == sizeof(std::int32_t));
  std::int32_t type;
  std::memcpy(&type, &device.device_type, sizeof type);
  return type;
}

[[nodiscard]] Result<DType> dtype_of_dlpack(const DLDataType& t) {
  if (t.code == kDLFloat && t.lanes == 1 && t.bits == 32) return DType::float32;
  if (t.code == kDLFloat && t.lanes == 1 && t.bits == 64) return DType::float64;
  if (t.code == kDLFloat && t.lanes == 1 && t.bits == 16) return DType::float16;
  if (t.code == kDLBfloat && t.lanes == 1 && t.bits == 16) return DType::bfloat16;
  return fail(ErrorCode::DTypeMismatch, "import_dlpack: dtype (code " + std::to_string(t.code) + ", " +
                                            std::to_string(t.bits) + " bits, " + std::to_string(t.lanes) +
                                            " lanes) is not float32, float64, bfloat16 or float16");
}

// C-contiguous: no strides, or the row-major strides of the shape (any stride of a dim of size 1).
// A tensor of no elements is contiguous whatever its strides say: there is nothing to lay out.
bool c_contiguous(const DLTensor& t, const Shape& shape) {
  if (!t.strides || shape.numel() == 0) return true;
  std::int64_t expected = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] != 1 && t.strides[d] != expected) return false;
    expected *= t.shape[d];
  }
  return true;
}

// The first element's address, data + byte_offset, when it can be one: NULL data with elements to
// read is not, and neither is an offset that, with the elements after it, is larger than any object
// can be (PTRDIFF_MAX bytes) or wraps the address space. Each is an error naming the fields.
[[nodiscard]] Result<void*> first_element(const DLTensor& t, std::size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);  // nothing is ever read
  const auto base = reinterpret_cast<std::uintptr_t>(t.data);
  if (!t.data)
    return fail(ErrorCode::InvalidArgument, "import_dlpack: data is NULL (byte_offset " + std::to_string(t.byte_offset) +
                                                ") for " + std::to_string(bytes) + " bytes of elements");
  constexpr auto kLargestObject = static_cast<std::uint64_t>(PTRDIFF_MAX);
  if (t.byte_offset > kLargestObject - bytes || t.byte_offset + bytes > UINTPTR_MAX - base)
    return fail(ErrorCode::InvalidArgument, "import_dlpack: byte_offset " + std::to_string(t.byte_offset) + " plus " +
                                                std::to_string(bytes) + " bytes of elements is past any object data " +
                                                "can point into (more than PTRDIFF_MAX bytes, or past the address space)");
  return reinterpret_cast<void*>(base + t.byte_offset);
}

// What an exported tensor owns: its shape array, and the buffer when the export moved it in.
struct ExportContext {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape;
  Buffer owned;
};

void delete_export(DLManagedTensor* self) { delete static_cast<ExportContext*>(self->manager_ctx); }

// Reads everything from `buffer` first, then (an owning export) moves it into the context.
DLManagedTensor* make_export(Buffer& buffer, bool take_ownership) {
  auto* ctx = new ExportContext;
  ctx->shape = buffer.shape().dims;
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = const_cast<void*>(buffer.data());
  t.device = DLDevice{static_cast<DLDeviceType>(buffer.backend()->dlpack_device_type()), buffer.backend()->device_id()};
  t.ndim = static_cast<int>(ctx->shape.size());
  const auto code = static_cast<std::uint8_t>(buffer.dtype() == DType::bfloat16 ? kDLBfloat : kDLFloat);
  t.dtype = DLDataType{code, static_cast<std::uint8_t>(dtype_size(buffer.dtype()) * 8), 1};
  t.shape = ctx->shape.data();
  t.strides = nullptr;  // C-contiguous
  t.byte_offset = 0;
  if (take_ownership) ctx->owned = std::move(buffer);
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = delete_export;
  return &ctx->managed;
}

}  // namespace

Result<Buffer> Backend::import_dlpack(DLManagedTensor* tensor) {
  if (!tensor) return fail(ErrorCode::InvalidArgument, "import_dlpack: null tensor");
  const DLTensor& t = tensor->dl_tensor;
  const std::int32_t device_type = raw_device_type(t.device);
  const bool device_ok = device_type == dlpack_device_type() ||
                         (dlpack_device_type() == kDLCUDA && device_type == kDLCUDAManaged);
  if (!device_ok || (device_type != kDLCPU && t.device.device_id != device_id()))
    return fail(ErrorCode::BackendMismatch, "import_dlpack: tensor is on device_type " + std::to_string(device_type) +
                                                " (" + device_type_name(device_type) + ") device_id " +
                                                std::to_string(t.device.device_id) + ", this backend is " + describe());
  auto dtype = dtype_of_dlpack(t.dtype);
  TAPEWISE_CHECK(dtype);
  // ndim is checked before the shape array is read: it says how long that array is.
  if (t.ndim < 0 || t.ndim > kMaxNdim)
    return fail(ErrorCode::InvalidShape, "import_dlpack: ndim " + std::to_string(t.ndim) + " is outside [0, " +
                                             std::to_string(kMaxNdim) + "]");
  if (t.ndim > 0 && !t.shape)
    return fail(ErrorCode::InvalidShape, "import_dlpack: ndim " + std::to_string(t.ndim) + " without a shape");
  Shape shape(std::vector<std::int64_t>(t.shape, t.shape + t.ndim));
  if (auto ok = shape.check(); !ok) return fail(ok.error().code, "import_dlpack: " + ok.error().message);
  if (!c_contiguous(t, shape))
    return fail(ErrorCode::InvalidArgument, "import_dlpack: tensor of shape " + shape.str() +
                                                " is not C-contiguous (make it contiguous first)");
  if (shape.numel() > std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(dtype_size(*dtype)))
    return fail(ErrorCode::InvalidShape, "import_dlpack: shape " + shape.str() + " is too large to address in bytes");
  const auto bytes = static_cast<std::size_t>(shape.numel()) * dtype_size(*dtype);
  auto data = first_element(t, bytes);
  TAPEWISE_CHECK(data);
  auto view = wrap(*data, shape, *dtype);
  if (!view) return fail(view.error().code, "import_dlpack: " + view.error().message);
  // From here the buffer owns the tensor: its deleter runs when the last holder lets go.
  view->keep_alive_ = std::shared_ptr<void>(tensor, [](void* p) {
    auto* managed = static_cast<DLManagedTensor*>(p);
    if (managed->deleter) managed->deleter(managed);
  });
  return view;
}

Result<DLManagedTensor*> Backend::export_dlpack(Buffer buffer) {
  if (!buffer) return fail(ErrorCode::InvalidArgument, "export_dlpack: empty buffer");
  if (buffer.backend() != this) return fail(ErrorCode::BackendMismatch, "export_dlpack: buffer belongs to another backend");
  return make_export(buffer, true);
}

Result<DLManagedTensor*> Backend::export_dlpack_view(const Buffer& buffer) {
  if (!buffer) return fail(ErrorCode::InvalidArgument, "export_dlpack_view: empty buffer");
  if (buffer.backend() != this)
    return fail(ErrorCode::BackendMismatch, "export_dlpack_view: buffer belongs to another backend");
  return make_export(const_cast<Buffer&>(buffer), false);
}

}  // namespace tapewise
