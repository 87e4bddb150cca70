// cuda/c_api/c_api.cpp — the C ABI (include/tapewise/tapewise.h) over the C++ API: live-handle registries,
// argument checks, and the translation of Result errors and C++ exceptions into tw_status codes.
//
// Every entry point runs its body through `guarded`: failures anywhere inside (a check of this file,
// an Error from the C++ API, an exception) are thrown as CallError or std exceptions and turned into
// a status and a thread-local message there, so no exception crosses the ABI. Bodies check every
// argument and output pointer before changing anything, and write outputs last.
#include <tapewise/tapewise.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <dlpack/dlpack.h>

#include <tapewise/tapewise.hpp>
#include <tapewise/version.hpp>

using namespace tapewise;

// The handles: one C++ object each. Tapes, buffers and gradients hold their backend themselves.
struct tw_backend {
  explicit tw_backend(std::shared_ptr<Backend> b) : backend(std::move(b)) {}
  std::shared_ptr<Backend> backend;
};
struct tw_tape {
  explicit tw_tape(std::shared_ptr<Backend> b) : tape(std::move(b)) {}
  Tape tape;
};
struct tw_buffer {
  explicit tw_buffer(Buffer b) : buffer(std::move(b)) {}
  Buffer buffer;
};
struct tw_gradients {
  tw_gradients(std::shared_ptr<Backend> b, Gradients g) : backend(std::move(b)), grads(std::move(g)) {}
  std::shared_ptr<Backend> backend;  // exports gradients (Backend::export_dlpack)
  Gradients grads;
};

// The C op ids (pinned numbers in tapewise.h) are the C++ enumerators, row for row of the op table: a
// row inserted mid-table, or one without its TW_OP_ id, fails here naming the node.
#define TAPEWISE_OP(name, ...) \
  static_assert(static_cast<int>(Op::name) == TW_OP_##name, "C op id of " #name " differs from tapewise::Op");
#include <tapewise/ops.def>
#undef TAPEWISE_OP
static_assert(kOpCount == TW_OP_COUNT);
static_assert(kMaxNdim == TW_MAX_NDIM, "the C ABI's shape limit is the core's");

// The documented numbering: tw_status = ErrorCode + 1.
static_assert(TW_INVALID_NODE_ID == 1 + static_cast<int>(ErrorCode::InvalidNodeId));
static_assert(TW_INVALID_SHAPE == 1 + static_cast<int>(ErrorCode::InvalidShape));
static_assert(TW_SHAPE_MISMATCH == 1 + static_cast<int>(ErrorCode::ShapeMismatch));
static_assert(TW_DTYPE_MISMATCH == 1 + static_cast<int>(ErrorCode::DTypeMismatch));
static_assert(TW_SEED_SHAPE_MISMATCH == 1 + static_cast<int>(ErrorCode::SeedShapeMismatch));
static_assert(TW_SEED_DTYPE_MISMATCH == 1 + static_cast<int>(ErrorCode::SeedDTypeMismatch));
static_assert(TW_BACKEND_MISMATCH == 1 + static_cast<int>(ErrorCode::BackendMismatch));
static_assert(TW_INVALID_ARGUMENT == 1 + static_cast<int>(ErrorCode::InvalidArgument));
static_assert(TW_OUT_OF_MEMORY == 1 + static_cast<int>(ErrorCode::OutOfMemory));
static_assert(TW_DEVICE_UNAVAILABLE == 1 + static_cast<int>(ErrorCode::DeviceUnavailable));
static_assert(TW_CUDA_FAILURE == 1 + static_cast<int>(ErrorCode::CudaFailure));
// The C constants and the C++ ones come from the same CMake version; tw_version() is compiled here,
// so it reports the library's version whatever headers its caller was built with.
static_assert(TW_VERSION_MAJOR == TAPEWISE_VERSION_MAJOR && TW_VERSION_MINOR == TAPEWISE_VERSION_MINOR &&
              TW_VERSION_PATCH == TAPEWISE_VERSION_PATCH);
static_assert(static_cast<int>(DType::float32) == TW_FLOAT32 && static_cast<int>(DType::float64) == TW_FLOAT64 &&
              static_cast<int>(DType::bfloat16) == TW_BFLOAT16 && static_cast<int>(DType::float16) == TW_FLOAT16);
static_assert(static_cast<int>(AllocTag::value) == TW_TAG_VALUE && static_cast<int>(AllocTag::gradient) == TW_TAG_GRADIENT &&
              static_cast<int>(AllocTag::workspace) == TW_TAG_WORKSPACE && kAllocTagCount == 3);

namespace {

// --- failures: thrown inside a call, turned into a status at its edge ------------------------------

struct CallError {
  tw_status status;
  std::string message;
};

[[noreturn]] void raise(tw_status status, std::string message) { throw CallError{status, std::move(message)}; }

tw_status status_of(ErrorCode code) {
  switch (code) {  // no default: a new ErrorCode is a -Wswitch warning here until it has its status
    case ErrorCode::InvalidNodeId: return TW_INVALID_NODE_ID;
    case ErrorCode::InvalidShape: return TW_INVALID_SHAPE;
    case ErrorCode::ShapeMismatch: return TW_SHAPE_MISMATCH;
    case ErrorCode::DTypeMismatch: return TW_DTYPE_MISMATCH;
    case ErrorCode::SeedShapeMismatch: return TW_SEED_SHAPE_MISMATCH;
    case ErrorCode::SeedDTypeMismatch: return TW_SEED_DTYPE_MISMATCH;
    case ErrorCode::BackendMismatch: return TW_BACKEND_MISMATCH;
    case ErrorCode::InvalidArgument: return TW_INVALID_ARGUMENT;
    case ErrorCode::OutOfMemory: return TW_OUT_OF_MEMORY;
    case ErrorCode::DeviceUnavailable: return TW_DEVICE_UNAVAILABLE;
    case ErrorCode::CudaFailure: return TW_CUDA_FAILURE;
  }
  return TW_INTERNAL;
}

[[noreturn]] void raise(const Error& e) { raise(status_of(e.code), e.str()); }

// The value of a Result, or its error thrown.
template <class T>
T unwrap(Result<T>&& r) {
  if (!r) raise(r.error());
  return std::move(*r);
}
void unwrap(Result<void>&& r) {
  if (!r) raise(r.error());
}

// A fixed array, so that recording a failure never allocates (nor throws).
thread_local char t_last_error[2048] = "";

tw_status record_failure(const char* function, tw_status status, const char* message) noexcept {
  std::snprintf(t_last_error, sizeof t_last_error, "%s: %s", function, message);
  return status;
}

// Runs one entry point's body (which returns nothing or throws) and reports how it went.
template <class Body>
tw_status guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    t_last_error[0] = '\0';
    return TW_OK;
  } catch (const CallError& e) {
    return record_failure(function, e.status, e.message.c_str());
  } catch (const std::bad_alloc&) {
    return record_failure(function, TW_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    std::string message = std::string("internal error: ") + e.what();
    return record_failure(function, TW_INTERNAL, message.c_str());
  } catch (...) {
    return record_failure(function, TW_INTERNAL, "internal error: unknown exception");
  }
}

// --- handles: a registry of the live ones per type --------------------------------------------------

template <class Handle>
class Registry {
 public:
  Handle* add(std::unique_ptr<Handle> handle) {
    std::lock_guard lock(mutex_);
    live_.insert(handle.get());
    return handle.release();
  }
  bool contains(const Handle* handle) const {
    std::lock_guard lock(mutex_);
    return live_.count(handle) != 0;
  }
  // Ownership of a live handle, now unregistered; nullptr when it was not live.
  std::unique_ptr<Handle> remove(const Handle* handle) {
    std::lock_guard lock(mutex_);
    if (live_.erase(handle) == 0) return nullptr;
    return std::unique_ptr<Handle>(const_cast<Handle*>(handle));
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<const Handle*> live_;
};

// Never destroyed: handles may be released from other libraries' exit handlers.
template <class Handle>
Registry<Handle>& registry() {
  static auto* r = new Registry<Handle>;
  return *r;
}

template <class Handle>
const char* handle_name();
template <> const char* handle_name<tw_backend>() { return "backend"; }
template <> const char* handle_name<tw_tape>() { return "tape"; }
template <> const char* handle_name<tw_buffer>() { return "buffer"; }
template <> const char* handle_name<tw_gradients>() { return "gradients"; }

// The object behind a live handle; NULL and handles that are not live are failures, not dereferenced.
template <class Handle>
Handle& live(const Handle* handle) {
  if (!handle) raise(TW_NULL_POINTER, std::string(handle_name<Handle>()) + " handle is NULL");
  if (!registry<Handle>().contains(handle))
    raise(TW_INVALID_HANDLE, std::string(handle_name<Handle>()) + " handle is not live (destroyed, never created, or another type)");
  return *const_cast<Handle*>(handle);
}

template <class Handle>
tw_status destroy(const char* function, Handle* handle) {
  return guarded(function, [&] {
    if (!handle) return;  // like free(NULL)
    if (!registry<Handle>().remove(handle))
      raise(TW_INVALID_HANDLE, std::string(handle_name<Handle>()) + " handle is not live (destroyed twice, never created, or another type)");
  });
}

// --- arguments ----------------------------------------------------------------------------------------

template <class T>
T& required(T* pointer, const char* name) {
  if (!pointer) raise(TW_NULL_POINTER, std::string(name) + " is NULL");
  return *pointer;
}

Shape shape_from(const std::int64_t* dims, int ndim) {
  if (ndim < 0 || ndim > TW_MAX_NDIM)
    raise(TW_INVALID_SHAPE, "ndim " + std::to_string(ndim) + " is outside [0, " + std::to_string(TW_MAX_NDIM) + "]");
  if (ndim > 0 && !dims) raise(TW_NULL_POINTER, "shape is NULL with ndim " + std::to_string(ndim));
  Shape shape(std::vector<std::int64_t>(dims, dims + ndim));
  if (!shape.valid())
    raise(TW_INVALID_SHAPE, "invalid shape " + shape.str() + " (a negative dim, or the element count overflows int64)");
  return shape;
}

DType dtype_from(int dtype) {
  for (DType d : kDTypes)
    if (dtype == static_cast<int>(d)) return d;
  raise(TW_INVALID_ARGUMENT, "unknown dtype " + std::to_string(dtype) +
                                 " (TW_FLOAT32 = 0, TW_FLOAT64 = 1, TW_BFLOAT16 = 2, TW_FLOAT16 = 3)");
}

VjpPath path_from(int path) {
  if (path == TW_PATH_FUSED) return VjpPath::fused;
  if (path == TW_PATH_STAGED) return VjpPath::staged;
  raise(TW_INVALID_ARGUMENT, "unknown path " + std::to_string(path) + " (TW_PATH_FUSED = 0, TW_PATH_STAGED = 1)");
}

const OpInfo& op_from(int op) {
  if (op < 0 || op >= kOpCount)
    raise(TW_INVALID_ARGUMENT, "unknown op id " + std::to_string(op) + " (ops are 0.." + std::to_string(kOpCount - 1) + ")");
  return kOps[op];
}

std::size_t byte_size(const Shape& shape, DType dtype) {
  const auto element = static_cast<std::int64_t>(dtype_size(dtype));
  if (shape.numel() > std::numeric_limits<std::int64_t>::max() / element)
    raise(TW_INVALID_SHAPE, "shape " + shape.str() + " is too large to address in bytes");
  return static_cast<std::size_t>(shape.numel() * element);
}

// Caller memory of `given` bytes that must hold exactly `shape` of `dtype`.
void check_memory(const char* name, const void* data, std::size_t given, const Shape& shape, DType dtype) {
  const std::size_t needed = byte_size(shape, dtype);
  if (given != needed)
    raise(TW_INVALID_ARGUMENT, std::string(name) + " has " + std::to_string(given) + " bytes, shape " + shape.str() +
                                   " of " + dtype_name(dtype) + " needs " + std::to_string(needed));
  if (needed > 0 && !data) raise(TW_NULL_POINTER, std::string(name) + " is NULL");
}

const Node& node_of(const Tape& tape, std::int64_t id) { return *unwrap(tape.node(id)); }

void check_gradient_id(const Gradients& grads, std::int64_t id) { unwrap(grads.check_id(id)); }

std::string no_gradient(std::int64_t id) {
  return "node #" + std::to_string(node_position(id)) + " received no gradient";
}

void copy_out(const HostArray& host, void* dst, std::size_t dst_bytes) {
  check_memory("dst", dst, dst_bytes, host.shape, host.dtype);
  if (dst_bytes > 0) std::memcpy(dst, host.bytes.data(), dst_bytes);
}

// --- DLPack import that leaves the tensor with the caller on every failure ---------------------------

// Backend::import_dlpack owns its tensor from its success on, but a later step (recording the leaf,
// making the handle) may still fail. So the backend imports a stand-in whose deleter reaches the
// caller's tensor only once the new owner exists (committed); until then the stand-in is ours.
struct StandIn {
  DLManagedTensor managed{};
  DLManagedTensor* original = nullptr;
  bool committed = false;
};

void release_stand_in(DLManagedTensor* self) {
  auto* stand_in = static_cast<StandIn*>(self->manager_ctx);
  if (!stand_in->committed) return;  // a failed import: import_dlpack_into frees it, the caller keeps the tensor
  if (stand_in->original->deleter) stand_in->original->deleter(stand_in->original);
  delete stand_in;
}

// Imports `tensor` and passes the buffer to `adopt`, which stores it or fails (throws).
template <class Adopt>
void import_dlpack_into(Backend& backend, DLManagedTensor* tensor, Adopt&& adopt) {
  auto stand_in = std::make_unique<StandIn>();
  stand_in->managed.dl_tensor = tensor->dl_tensor;
  stand_in->managed.manager_ctx = stand_in.get();
  stand_in->managed.deleter = release_stand_in;
  stand_in->original = tensor;
  {
    // The buffer is gone by the end of this block whatever happens, before the stand-in may be freed.
    Buffer buffer = unwrap(backend.import_dlpack(&stand_in->managed));
    adopt(std::move(buffer));
  }
  stand_in->committed = true;  // the adopter holds the buffer, and with it the stand-in
  stand_in.release();
}

template <class Handle, class... Args>
Handle* new_handle(Args&&... args) {
  return registry<Handle>().add(std::make_unique<Handle>(std::forward<Args>(args)...));
}

// One field of a tape's options, read or set (Tape::set_options checks it; the others stay as they are).
tw_status set_tape_option(const char* function, tw_tape* tape, std::int64_t TapeOptions::*field, std::int64_t value) {
  return guarded(function, [&] {
    Tape& t = live(tape).tape;
    TapeOptions options = t.options();
    options.*field = value;
    unwrap(t.set_options(options));
  });
}
tw_status get_tape_option(const char* function, const tw_tape* tape, std::int64_t TapeOptions::*field,
                          std::int64_t* out) {
  return guarded(function, [&] { required(out, "out") = live(tape).tape.options().*field; });
}

// The ids a backward returns the gradients of: all (wanted NULL with count 0 from the entry points
// without a list), or the count ids at wanted (NULL only with count 0).
struct Wanted {
  const std::int64_t* ids = nullptr;
  std::size_t count = 0;
  bool all = true;
};

// Every backward entry point: `seed_of(output value)` gives the seed, a Buffer or a HostArray.
template <class SeedOf>
tw_status backward(const char* function, tw_tape* tape, std::int64_t out_id, int path, int dense, Wanted wanted,
                   tw_gradients** out, SeedOf&& seed_of) {
  return guarded(function, [&] {
    Tape& t = live(tape).tape;
    tw_gradients*& result = required(out, "out");
    const VjpPath vjp_path = path_from(path);
    if (!wanted.all && wanted.count > 0) required(wanted.ids, "wanted");
    const auto& seed = seed_of(node_of(t, out_id).value);
    const std::span<const NodeId> ids(wanted.ids, wanted.count);
    Gradients grads = unwrap(wanted.all ? (dense ? t.backward_dense(out_id, seed, vjp_path) : t.backward(out_id, seed, vjp_path))
                                        : (dense ? t.backward_dense(out_id, seed, ids, vjp_path)
                                                 : t.backward(out_id, seed, ids, vjp_path)));
    result = new_handle<tw_gradients>(t.backend().shared_from_this(), std::move(grads));
  });
}

// The host seed of the backward entry points, checked against the output's shape and dtype.
HostArray host_seed(const Buffer& output, const void* seed, std::size_t seed_bytes) {
  HostArray host{output.shape(), output.dtype(), {}};
  check_memory("seed", seed, seed_bytes, host.shape, host.dtype);
  host.bytes.resize(seed_bytes);
  if (seed_bytes > 0) std::memcpy(host.bytes.data(), seed, seed_bytes);
  return host;
}

}  // namespace

extern "C" {

// --- library ----------------------------------------------------------------------------------------

const char* tw_last_error(void) { return t_last_error; }

const char* tw_status_name(int status) {
  switch (status) {
    case TW_OK: return "TW_OK";
    case TW_INVALID_NODE_ID: return "TW_INVALID_NODE_ID";
    case TW_INVALID_SHAPE: return "TW_INVALID_SHAPE";
    case TW_SHAPE_MISMATCH: return "TW_SHAPE_MISMATCH";
    case TW_DTYPE_MISMATCH: return "TW_DTYPE_MISMATCH";
    case TW_SEED_SHAPE_MISMATCH: return "TW_SEED_SHAPE_MISMATCH";
    case TW_SEED_DTYPE_MISMATCH: return "TW_SEED_DTYPE_MISMATCH";
    case TW_BACKEND_MISMATCH: return "TW_BACKEND_MISMATCH";
    case TW_INVALID_ARGUMENT: return "TW_INVALID_ARGUMENT";
    case TW_OUT_OF_MEMORY: return "TW_OUT_OF_MEMORY";
    case TW_DEVICE_UNAVAILABLE: return "TW_DEVICE_UNAVAILABLE";
    case TW_CUDA_FAILURE: return "TW_CUDA_FAILURE";
    case TW_NULL_POINTER: return "TW_NULL_POINTER";
    case TW_INVALID_HANDLE: return "TW_INVALID_HANDLE";
    case TW_INTERNAL: return "TW_INTERNAL";
    case TW_VERSION_MISMATCH: return "TW_VERSION_MISMATCH";
  }
  return "TW_UNKNOWN_STATUS";
}

const char* tw_status_string(int status) {
  switch (status) {
    case TW_OK: return "success";
    case TW_INVALID_NODE_ID: return "a node id of another tape or outside the tape, or a node with no gradient";
    case TW_INVALID_SHAPE: return "an invalid shape: a negative rank or dimension, too many dimensions, or an element count that overflows";
    case TW_SHAPE_MISMATCH: return "the inputs of a binary node differ in shape";
    case TW_DTYPE_MISMATCH: return "the inputs of a binary node differ in dtype, or a DLPack tensor's dtype is not float32, float64, bfloat16 or float16";
    case TW_SEED_SHAPE_MISMATCH: return "the backward seed's shape differs from the output's";
    case TW_SEED_DTYPE_MISMATCH: return "the backward seed's dtype differs from the output's";
    case TW_BACKEND_MISMATCH: return "memory or a buffer from another backend or device";
    case TW_INVALID_ARGUMENT: return "an invalid argument: an unknown op, dtype, path or tag, a wrong count, or a wrong byte size";
    case TW_OUT_OF_MEMORY: return "out of memory (host or device)";
    case TW_DEVICE_UNAVAILABLE: return "no usable CUDA device, or a library built without CUDA";
    case TW_CUDA_FAILURE: return "a CUDA call failed";
    case TW_NULL_POINTER: return "a required pointer argument is NULL";
    case TW_INVALID_HANDLE: return "a handle that is not live: destroyed, never created, or of another type";
    case TW_INTERNAL: return "an unexpected failure inside tapewise (a bug: please report it)";
    case TW_VERSION_MISMATCH: return "the library's version cannot serve headers of the version asked for";
  }
  // Per thread, so that concurrent callers never see each other's number; never allocates.
  thread_local char unknown[64];
  std::snprintf(unknown, sizeof unknown, "unknown status %d (not a tw_status value)", status);
  return unknown;
}

int tw_version(void) { return TW_VERSION; }

const char* tw_version_string(void) { return kVersion; }

tw_status tw_check_version(int header_version) {
  return guarded(__func__, [&] {
    if (header_version < 0) raise(TW_INVALID_ARGUMENT, "negative header version " + std::to_string(header_version));
    const int header_major = header_version / 10000, header_minor = header_version / 100 % 100;
    const int header_patch = header_version % 100;
    // Before 1.0 a minor version is a new ABI (the soname is MAJOR.MINOR); from 1.0 on minors only add.
    const bool compatible = header_major == TW_VERSION_MAJOR &&
                            (TW_VERSION_MAJOR == 0 ? header_minor == TW_VERSION_MINOR : header_minor <= TW_VERSION_MINOR);
    if (!compatible)
      raise(TW_VERSION_MISMATCH, std::string("library ") + kVersion + " (" + std::to_string(TW_VERSION) +
                                     ") cannot serve headers " + std::to_string(header_major) + "." +
                                     std::to_string(header_minor) + "." + std::to_string(header_patch) + " (" +
                                     std::to_string(header_version) + "): " +
                                     (TW_VERSION_MAJOR == 0 ? "before 1.0 the major and minor versions must be equal"
                                                            : "the major versions must be equal and the library's minor at least the headers'"));
  });
}

int tw_op_count(void) { return kOpCount; }

const char* tw_op_name(int op) { return op >= 0 && op < kOpCount ? kOps[op].name : nullptr; }

tw_status tw_op_info(int op, int* arity, int* scalar_count) {
  return guarded(__func__, [&] {
    const OpInfo& info = op_from(op);
    if (arity) *arity = info.arity;
    if (scalar_count) *scalar_count = info.scalar_count();
  });
}

int tw_cuda_available(void) {
  try {
    return cuda_available() ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

// --- backends ---------------------------------------------------------------------------------------

tw_status tw_backend_create_cpu(tw_backend** out) {
  return guarded(__func__, [&] {
    tw_backend*& result = required(out, "out");
    result = new_handle<tw_backend>(make_cpu_backend());
  });
}

tw_status tw_backend_create_cpu_threads(int threads, tw_backend** out) {
  return guarded(__func__, [&] {
    tw_backend*& result = required(out, "out");
    result = new_handle<tw_backend>(unwrap(make_cpu_backend(CpuOptions{threads})));
  });
}

tw_status tw_backend_cpu_threads(const tw_backend* backend, int* threads) {
  return guarded(__func__, [&] { required(threads, "threads") = cpu_threads(*live(backend).backend); });
}

tw_status tw_backend_create_cuda(int device, void* stream, tw_backend** out) {
  return guarded(__func__, [&] {
    tw_backend*& result = required(out, "out");
    result = new_handle<tw_backend>(unwrap(make_cuda_backend(CudaOptions{device, stream})));
  });
}

tw_status tw_backend_create_cuda_math(int device, void* stream, int math, tw_backend** out) {
  return guarded(__func__, [&] {
    tw_backend*& result = required(out, "out");
    if (math != TW_MATH_ATEN && math != TW_MATH_EXACT)
      raise(TW_INVALID_ARGUMENT, "math " + std::to_string(math) + " is neither TW_MATH_ATEN (0) nor TW_MATH_EXACT (1)");
    const MathMode mode = math == TW_MATH_EXACT ? MathMode::exact : MathMode::aten;
    result = new_handle<tw_backend>(unwrap(make_cuda_backend(CudaOptions{device, stream, mode})));
  });
}

tw_status tw_backend_math_mode(const tw_backend* backend, int* out) {
  return guarded(__func__, [&] {
    required(out, "out") = math_mode(*live(backend).backend) == MathMode::exact ? TW_MATH_EXACT : TW_MATH_ATEN;
  });
}

tw_status tw_backend_destroy(tw_backend* backend) { return destroy(__func__, backend); }

tw_status tw_backend_kind_of(const tw_backend* backend, int* out) {
  return guarded(__func__, [&] {
    const Backend& be = *live(backend).backend;
    required(out, "out") = be.kind() == BackendKind::cuda ? TW_BACKEND_CUDA : TW_BACKEND_CPU;
  });
}

tw_status tw_backend_stream(const tw_backend* backend, void** out) {
  return guarded(__func__, [&] {
    const Backend& be = *live(backend).backend;
    required(out, "out") = cuda_stream(be);
  });
}

tw_status tw_backend_describe(const tw_backend* backend, char* dst, size_t dst_size, size_t* needed) {
  return guarded(__func__, [&] {
    const std::string text = live(backend).backend->describe();
    const std::size_t size = text.size() + 1;
    // Written first, as snprintf reports the length it needed: a caller whose buffer was short learns
    // the size to retry with from the failing call itself.
    if (needed) *needed = size;
    if (dst || dst_size > 0) {
      if (!dst) raise(TW_NULL_POINTER, "dst is NULL with dst_size " + std::to_string(dst_size));
      if (dst_size < size)
        raise(TW_INVALID_ARGUMENT, "dst_size " + std::to_string(dst_size) + " is less than the " + std::to_string(size) + " bytes needed");
      std::memcpy(dst, text.c_str(), size);
    }
  });
}

tw_status tw_backend_synchronize(tw_backend* backend) {
  return guarded(__func__, [&] { unwrap(live(backend).backend->synchronize()); });
}

tw_status tw_backend_memory_stats(const tw_backend* backend, int tag, int64_t* live_count, int64_t* live_bytes) {
  return guarded(__func__, [&] {
    const Backend& be = *live(backend).backend;
    if (tag < 0 || tag >= kAllocTagCount) raise(TW_INVALID_ARGUMENT, "unknown allocation tag " + std::to_string(tag));
    if (live_count) *live_count = be.stats().count(static_cast<AllocTag>(tag));
    if (live_bytes) *live_bytes = be.stats().bytes(static_cast<AllocTag>(tag));
  });
}

tw_status tw_backend_memory_reserved(const tw_backend* backend, int64_t* reserved_bytes, int64_t* slab_bytes,
                                     int64_t* kept_bytes) {
  return guarded(__func__, [&] {
    const MemoryStats stats = live(backend).backend->stats();
    if (reserved_bytes) *reserved_bytes = stats.reserved_bytes;
    if (slab_bytes) *slab_bytes = stats.slab_bytes;
    if (kept_bytes) *kept_bytes = stats.kept_bytes;
  });
}

tw_status tw_backend_trim(tw_backend* backend, int64_t* released_bytes) {
  return guarded(__func__, [&] {
    const std::size_t given = live(backend).backend->trim();
    if (released_bytes) *released_bytes = static_cast<int64_t>(given);
  });
}

tw_status tw_backend_kept_memory_limit(const tw_backend* backend, int64_t* bytes) {
  return guarded(__func__, [&] {
    const std::size_t limit = live(backend).backend->kept_memory_limit();
    required(bytes, "bytes") = limit > static_cast<std::size_t>(INT64_MAX) ? -1 : static_cast<int64_t>(limit);
  });
}

tw_status tw_backend_set_kept_memory_limit(tw_backend* backend, int64_t bytes) {
  return guarded(__func__, [&] {
    Backend& be = *live(backend).backend;
    if (bytes < -1) raise(TW_INVALID_ARGUMENT, "bytes " + std::to_string(bytes) + " is negative (-1: no limit)");
    be.set_kept_memory_limit(bytes == -1 ? SIZE_MAX : static_cast<std::size_t>(bytes));
  });
}

// --- buffers ----------------------------------------------------------------------------------------

tw_status tw_buffer_wrap(tw_backend* backend, void* data, size_t data_bytes, const int64_t* shape, int ndim,
                         int dtype, tw_buffer** out) {
  return guarded(__func__, [&] {
    Backend& be = *live(backend).backend;
    tw_buffer*& result = required(out, "out");
    const Shape s = shape_from(shape, ndim);
    const DType d = dtype_from(dtype);
    check_memory("data", data, data_bytes, s, d);
    Buffer view = unwrap(be.wrap(data, s, d));
    result = new_handle<tw_buffer>(std::move(view));
  });
}

tw_status tw_buffer_from_dlpack(tw_backend* backend, struct DLManagedTensor* tensor, tw_buffer** out) {
  return guarded(__func__, [&] {
    Backend& be = *live(backend).backend;
    tw_buffer*& result = required(out, "out");
    required(tensor, "tensor");
    tw_buffer* made = nullptr;
    import_dlpack_into(be, tensor, [&](Buffer view) {
      made = new_handle<tw_buffer>(std::move(view));
    });
    result = made;
  });
}

tw_status tw_buffer_destroy(tw_buffer* buffer) { return destroy(__func__, buffer); }

// --- tapes ------------------------------------------------------------------------------------------

tw_status tw_tape_create(tw_backend* backend, tw_tape** out) {
  return guarded(__func__, [&] {
    std::shared_ptr<Backend> be = live(backend).backend;
    tw_tape*& result = required(out, "out");
    result = new_handle<tw_tape>(std::move(be));
  });
}

tw_status tw_tape_destroy(tw_tape* tape) { return destroy(__func__, tape); }

tw_status tw_tape_set_program_threshold(tw_tape* tape, int64_t numel) {
  return set_tape_option(__func__, tape, &TapeOptions::program_threshold, numel);
}

tw_status tw_tape_program_threshold(const tw_tape* tape, int64_t* out) {
  return get_tape_option(__func__, tape, &TapeOptions::program_threshold, out);
}

tw_status tw_tape_set_max_pending_nodes(tw_tape* tape, int64_t count) {
  return set_tape_option(__func__, tape, &TapeOptions::max_pending_nodes, count);
}

tw_status tw_tape_max_pending_nodes(const tw_tape* tape, int64_t* out) {
  return get_tape_option(__func__, tape, &TapeOptions::max_pending_nodes, out);
}

tw_status tw_tape_leaf_host(tw_tape* tape, const void* data, size_t data_bytes, const int64_t* shape, int ndim,
                            int dtype, int requires_grad, int64_t* out_id) {
  return guarded(__func__, [&] {
    Tape& t = live(tape).tape;
    int64_t& result = required(out_id, "out_id");
    HostArray host{shape_from(shape, ndim), dtype_from(dtype), {}};
    check_memory("data", data, data_bytes, host.shape, host.dtype);
    host.bytes.resize(data_bytes);
    if (data_bytes > 0) std::memcpy(host.bytes.data(), data, data_bytes);
    result = unwrap(t.leaf(host, requires_grad != 0));
  });
}

tw_status tw_tape_leaf_wrap(tw_tape* tape, void* data, size_t data_bytes, const int64_t* shape, int ndim,
                            int dtype, int requires_grad, int64_t* out_id) {
  return guarded(__func__, [&] {
    Tape& t = live(tape).tape;
    int64_t& result = required(out_id, "out_id");
    const Shape s = shape_from(shape, ndim);
    const DType d = dtype_from(dtype);
    check_memory("data", data, data_bytes, s, d);
    Buffer view = unwrap(t.backend().wrap(data, s, d));
    result = unwrap(t.leaf(std::move(view), requires_grad != 0));
  });
}

tw_status tw_tape_leaf_dlpack(tw_tape* tape, struct DLManagedTensor* tensor, int requires_grad, int64_t* out_id) {
  return guarded(__func__, [&] {
    Tape& t = live(tape).tape;
    int64_t& result = required(out_id, "out_id");
    required(tensor, "tensor");
    NodeId id = -1;
    import_dlpack_into(t.backend(), tensor, [&](Buffer view) { id = unwrap(t.leaf(std::move(view), requires_grad != 0)); });
    result = id;
  });
}

tw_status tw_tape_apply(tw_tape* tape, int op, const int64_t* parents, int nparents, const double* scalars,
                        int nscalars, int64_t* out_id) {
  return guarded(__func__, [&] {
    Tape& t = live(tape).tape;
    int64_t& result = required(out_id, "out_id");
    const OpInfo& info = op_from(op);
    if (nparents != info.arity)
      raise(TW_INVALID_ARGUMENT, std::string(info.name) + " takes " + std::to_string(info.arity) + " parents, got " +
                                     std::to_string(nparents));
    if (nscalars != info.scalar_count())
      raise(TW_INVALID_ARGUMENT, std::string(info.name) + " takes " + std::to_string(info.scalar_count()) +
                                     " scalars, got " + std::to_string(nscalars));
    required(parents, "parents");
    if (nscalars > 0) required(scalars, "scalars");
    const Scalars s{nscalars > 0 ? scalars[0] : 0.0, nscalars > 1 ? scalars[1] : 0.0};
    result = unwrap(t.apply(info.op, std::span<const NodeId>(parents, static_cast<std::size_t>(nparents)), s));
  });
}

tw_status tw_tape_size(const tw_tape* tape, int64_t* out) {
  return guarded(__func__, [&] {
    const Tape& t = live(tape).tape;
    required(out, "out") = static_cast<int64_t>(t.size());
  });
}

tw_status tw_tape_pending(const tw_tape* tape, int64_t* out) {
  return guarded(__func__, [&] {
    const Tape& t = live(tape).tape;
    required(out, "out") = static_cast<int64_t>(t.pending());
  });
}

tw_status tw_tape_flush(tw_tape* tape) {
  return guarded(__func__, [&] { unwrap(live(tape).tape.flush()); });
}

tw_status tw_tape_value_shape(const tw_tape* tape, int64_t id, int* ndim, int64_t* dims, int dims_capacity) {
  return guarded(__func__, [&] {
    const Shape& shape = node_of(live(tape).tape, id).value.shape();
    int& rank = required(ndim, "ndim");
    const int n = static_cast<int>(shape.dims.size());
    if (dims) {
      if (dims_capacity < n)
        raise(TW_INVALID_ARGUMENT, "dims_capacity " + std::to_string(dims_capacity) + " is less than ndim " + std::to_string(n));
      std::copy(shape.dims.begin(), shape.dims.end(), dims);
    }
    rank = n;
  });
}

tw_status tw_tape_value_dtype(const tw_tape* tape, int64_t id, int* out) {
  return guarded(__func__, [&] {
    const Buffer& value = node_of(live(tape).tape, id).value;
    required(out, "out") = static_cast<int>(value.dtype());
  });
}

tw_status tw_tape_value_bytes(const tw_tape* tape, int64_t id, size_t* out) {
  return guarded(__func__, [&] {
    const Buffer& value = node_of(live(tape).tape, id).value;
    required(out, "out") = value.bytes();
  });
}

tw_status tw_tape_value_host(tw_tape* tape, int64_t id, void* dst, size_t dst_bytes) {
  return guarded(__func__, [&] {
    const Tape& t = live(tape).tape;
    const Buffer& value = node_of(t, id).value;
    check_memory("dst", dst, dst_bytes, value.shape(), value.dtype());  // before any work runs
    copy_out(unwrap(t.value(id)), dst, dst_bytes);
  });
}

tw_status tw_tape_value_dlpack(tw_tape* tape, int64_t id, struct DLManagedTensor** out) {
  return guarded(__func__, [&] {
    const Tape& t = live(tape).tape;
    DLManagedTensor*& result = required(out, "out");
    node_of(t, id);
    const Buffer* value = unwrap(t.value_buffer(id));
    result = unwrap(t.backend().export_dlpack_view(*value));
  });
}

// --- backward -----------------------------------------------------------------------------------------

tw_status tw_tape_backward_host(tw_tape* tape, int64_t out_id, const void* seed, size_t seed_bytes, int path,
                                int dense, tw_gradients** out) {
  return backward(__func__, tape, out_id, path, dense, Wanted{}, out,
                  [&](const Buffer& output) { return host_seed(output, seed, seed_bytes); });
}

tw_status tw_tape_backward_buffer(tw_tape* tape, int64_t out_id, const tw_buffer* seed, int path, int dense,
                                  tw_gradients** out) {
  return backward(__func__, tape, out_id, path, dense, Wanted{}, out,
                  [&](const Buffer&) -> const Buffer& { return live(seed).buffer; });
}

tw_status tw_tape_backward_host_wanted(tw_tape* tape, int64_t out_id, const void* seed, size_t seed_bytes, int path,
                                       int dense, const int64_t* wanted, size_t wanted_count, tw_gradients** out) {
  return backward(__func__, tape, out_id, path, dense, Wanted{wanted, wanted_count, false}, out,
                  [&](const Buffer& output) { return host_seed(output, seed, seed_bytes); });
}

tw_status tw_tape_backward_buffer_wanted(tw_tape* tape, int64_t out_id, const tw_buffer* seed, int path, int dense,
                                         const int64_t* wanted, size_t wanted_count, tw_gradients** out) {
  return backward(__func__, tape, out_id, path, dense, Wanted{wanted, wanted_count, false}, out,
                  [&](const Buffer&) -> const Buffer& { return live(seed).buffer; });
}

tw_status tw_gradients_has(const tw_gradients* grads, int64_t id, int* out) {
  return guarded(__func__, [&] {
    const Gradients& g = live(grads).grads;
    int& result = required(out, "out");
    check_gradient_id(g, id);
    result = g.has(id) ? 1 : 0;
  });
}

tw_status tw_gradients_download(const tw_gradients* grads, int64_t id, void* dst, size_t dst_bytes) {
  return guarded(__func__, [&] {
    const Gradients& g = live(grads).grads;
    check_gradient_id(g, id);
    const Buffer* gradient = g.get(id);
    if (!gradient) raise(TW_INVALID_NODE_ID, no_gradient(id));
    check_memory("dst", dst, dst_bytes, gradient->shape(), gradient->dtype());
    copy_out(unwrap(g.host(id)), dst, dst_bytes);
  });
}

tw_status tw_gradients_dlpack(tw_gradients* grads, int64_t id, struct DLManagedTensor** out) {
  return guarded(__func__, [&] {
    tw_gradients& handle = live(grads);
    DLManagedTensor*& result = required(out, "out");
    check_gradient_id(handle.grads, id);
    if (!handle.grads.has(id)) raise(TW_INVALID_NODE_ID, no_gradient(id));
    // The export cannot fail for a live gradient of this backend short of host memory running out,
    // which would lose this one gradient (moved out first); the status says so.
    result = unwrap(handle.backend->export_dlpack(handle.grads.take(id)));
  });
}

tw_status tw_gradients_destroy(tw_gradients* grads) { return destroy(__func__, grads); }

}  // extern "C"
