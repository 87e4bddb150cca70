// python/src/backend_bindings.cpp — tapewise.Backend and tapewise.Buffer: making backends, memory
// statistics, zero-copy wrapping, and the low-level per-node kernels (forward, fused VJP) that
// tapewise.torch runs on framework-owned memory.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "node_kernels.h"  // python/tapewise/native: the kernel table's C layout, shipped with the package

namespace tapewise::py {
namespace {

using namespace nb::literals;

PyBackend make_cuda(int device, std::optional<std::intptr_t> stream, const std::string& math) {
  // DLPack and PyTorch name the legacy default stream 0, which CudaOptions reads as "no stream":
  // pass cudaStreamLegacy (1) instead, the same stream.
  void* handle = nullptr;
  if (stream) handle = reinterpret_cast<void*>(*stream == 0 ? std::intptr_t{1} : *stream);
  const MathMode mode = unwrap(math_mode_named(math));
  return PyBackend{unwrap(make_cuda_backend(CudaOptions{device, handle, mode})), stream.has_value()};
}

nb::dict stats_dict(const Backend& be) {
  nb::dict out;
  for (int t = 0; t < kAllocTagCount; ++t) {
    const auto tag = static_cast<AllocTag>(t);
    nb::dict entry;
    entry["count"] = be.stats().count(tag);
    entry["bytes"] = be.stats().bytes(tag);
    out[alloc_tag_name(tag)] = entry;
  }
  return out;
}

nb::dict memory_stats_dict(const Backend& be) {
  const MemoryStats stats = be.stats();
  nb::dict out;
  out["live_bytes"] = stats.total_live_bytes();
  out["reserved_bytes"] = stats.reserved_bytes;
  out["slab_bytes"] = stats.slab_bytes;
  out["kept_bytes"] = stats.kept_bytes;
  return out;
}

std::optional<std::int64_t> kept_memory_limit(const Backend& be) {
  const std::size_t limit = be.kept_memory_limit();
  if (limit > static_cast<std::size_t>(INT64_MAX)) return std::nullopt;
  return static_cast<std::int64_t>(limit);
}

void set_kept_memory_limit(Backend& be, std::optional<std::int64_t> bytes) {
  if (bytes && *bytes < 0)
    raise(ErrorCode::InvalidArgument, "kept_memory_limit: " + std::to_string(*bytes) + " bytes is negative (None: no limit)");
  be.set_kept_memory_limit(bytes ? static_cast<std::size_t>(*bytes) : SIZE_MAX);
}

Scalars scalars_from(const std::vector<double>& values, Op op) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(values.size()) != info.scalar_count())
    raise(ErrorCode::InvalidArgument, std::string(info.name) + " takes " + std::to_string(info.scalar_count()) +
                                          " scalar(s), got " + std::to_string(values.size()));
  return Scalars{values.size() > 0 ? values[0] : 0.0, values.size() > 1 ? values[1] : 0.0};
}

void check_arity(Op op, std::size_t inputs, std::size_t grads, const char* what) {
  const auto arity = static_cast<std::size_t>(op_info(op).arity);
  if (inputs != arity || grads != arity)
    raise(ErrorCode::InvalidArgument, std::string(what) + ": " + op_name(op) + " takes " + std::to_string(arity) +
                                          " input(s) and as many gradients");
}

// The Buffer-level kernels: every buffer is a tapewise Buffer of this backend.
void forward_buffers(PyBackend& be, const std::string& op_name_, const std::vector<PyBuffer*>& inputs,
                     PyBuffer& out, const std::vector<double>& scalars) {
  const Op op = op_from_python(op_name_);
  check_arity(op, inputs.size(), inputs.size(), "forward");
  std::vector<const Buffer*> in;
  for (PyBuffer* b : inputs) in.push_back(&b->get("forward: input"));
  Buffer& result = out.output("forward: out");
  unwrap(be.backend->forward(op, scalars_from(scalars, op), in, result));
}

void vjp_buffers(PyBackend& be, const std::string& op_name_, const std::vector<PyBuffer*>& inputs, PyBuffer& g,
                 const std::vector<PyBuffer*>& grads, const std::vector<double>& scalars) {
  const Op op = op_from_python(op_name_);
  check_arity(op, inputs.size(), grads.size(), "vjp_fused");
  std::vector<const Buffer*> in;
  std::vector<Buffer*> out;
  for (PyBuffer* b : inputs) in.push_back(&b->get("vjp_fused: input"));
  for (PyBuffer* b : grads) out.push_back(&b->output("vjp_fused: grads"));
  unwrap(be.backend->vjp_fused(op, scalars_from(scalars, op), in, g.get("vjp_fused: g"), out));
}

// The pointer-level kernels (tapewise.torch's fast path): raw addresses of contiguous framework
// memory holding `numel` elements each, wrapped as 1-D views for the duration of the call. No
// keep-alive: the caller holds the tensors, and the backend is on the caller's stream, so a
// framework reusing the memory afterwards is ordered after these kernels. Both entry points (the
// tuple form forward_ptrs/vjp_fused_ptrs, and the fixed-arity _forward_raw/_vjp_raw that
// tapewise.torch calls per node, where a 0 address means "no second input") end in these, after the
// same checks: op index, arity, dtype.
Op op_at(int op_index, const char* what) {
  if (op_index < 0 || op_index >= kOpCount)
    raise(ErrorCode::InvalidArgument, std::string(what) + ": op index " + std::to_string(op_index) +
                                          " out of range (0 .. " + std::to_string(kOpCount - 1) + ")");
  return static_cast<Op>(op_index);
}

DType dtype_at(int dtype_code, const char* what) {
  for (DType d : kDTypes)
    if (dtype_code == static_cast<int>(d)) return d;
  raise(ErrorCode::DTypeMismatch, std::string(what) + ": dtype code " + std::to_string(dtype_code) +
                                      " is not float32, float64, bfloat16 or float16 (see "
                                      "tapewise._tapewise.DTYPE_CODES)");
}

// How an address becomes a buffer: wrap (checked with the driver, for Python callers) or
// known_memory (the kernel table's, whose callers vouch for the device).
using ViewOf = Buffer (*)(Backend& be, std::uintptr_t p, std::int64_t numel, DType dtype);

Buffer wrap_pointer(Backend& be, std::uintptr_t p, std::int64_t numel, DType dtype) {
  return unwrap(be.wrap(reinterpret_cast<void*>(p), Shape{numel}, dtype));
}

// A view without wrap's driver query (cudaPointerGetAttributes, about a microsecond an address): the
// checks that cost nothing are kept.
Buffer known_memory(Backend& be, std::uintptr_t p, std::int64_t numel, DType dtype) {
  if (numel < 0) raise(ErrorCode::InvalidShape, "node_kernels: numel " + std::to_string(numel) + " < 0");
  if (numel > 0 && (p == 0 || p % dtype_size(dtype) != 0))
    raise(ErrorCode::InvalidArgument, "node_kernels: an address is null or not aligned to its dtype");
  return detail::engine_of(be).wrap_known_memory(reinterpret_cast<void*>(p), numel, dtype);
}

// At most two inputs (the op table's largest arity): fixed arrays, no heap vectors of pointers.
void forward_addresses(Backend& be, Op op, double s0, double s1, const std::uintptr_t* inputs, std::size_t count,
                       std::uintptr_t out, std::int64_t numel, DType dtype, ViewOf view = wrap_pointer) {
  Buffer in[2];
  const Buffer* in_ptrs[2] = {&in[0], &in[1]};
  for (std::size_t k = 0; k < count; ++k) in[k] = view(be, inputs[k], numel, dtype);
  Buffer result = view(be, out, numel, dtype);
  unwrap(be.forward(op, Scalars{s0, s1}, std::span<const Buffer* const>(in_ptrs, count), result));
}

void vjp_addresses(Backend& be, Op op, double s0, double s1, const std::uintptr_t* inputs, std::size_t count,
                   std::uintptr_t g, const std::uintptr_t* grads, std::int64_t numel, DType dtype,
                   ViewOf view = wrap_pointer) {
  Buffer in[2], out[2];
  const Buffer* in_ptrs[2] = {&in[0], &in[1]};
  Buffer* out_ptrs[2] = {&out[0], &out[1]};
  for (std::size_t k = 0; k < count; ++k) {
    in[k] = view(be, inputs[k], numel, dtype);
    out[k] = view(be, grads[k], numel, dtype);
  }
  const Buffer upstream = view(be, g, numel, dtype);
  unwrap(be.vjp_fused(op, Scalars{s0, s1}, std::span<const Buffer* const>(in_ptrs, count), upstream,
                      std::span<Buffer* const>(out_ptrs, count)));
}

void forward_pointers(PyBackend& be, int op_index, double s0, double s1, const std::vector<std::uintptr_t>& inputs,
                      std::uintptr_t out, std::int64_t numel, const std::string& dtype_name_) {
  const Op op = op_at(op_index, "forward_ptrs");
  check_arity(op, inputs.size(), inputs.size(), "forward_ptrs");
  const DType dtype = dtype_from_python(dtype_name_);
  forward_addresses(*be.backend, op, s0, s1, inputs.data(), inputs.size(), out, numel, dtype);
}

void vjp_pointers(PyBackend& be, int op_index, double s0, double s1, const std::vector<std::uintptr_t>& inputs,
                  std::uintptr_t g, const std::vector<std::uintptr_t>& grads, std::int64_t numel,
                  const std::string& dtype_name_) {
  const Op op = op_at(op_index, "vjp_fused_ptrs");
  check_arity(op, inputs.size(), grads.size(), "vjp_fused_ptrs");
  const DType dtype = dtype_from_python(dtype_name_);
  vjp_addresses(*be.backend, op, s0, s1, inputs.data(), inputs.size(), g, grads.data(), numel, dtype);
}

// The fixed-arity entries: b (and db) are 0 for a unary node and non-zero for a binary one.
std::size_t raw_arity(Op op, std::uintptr_t b, std::uintptr_t db, bool has_grads, const char* what) {
  const int arity = op_info(op).arity;
  const bool second = b != 0;
  if (second != (arity == 2) || (has_grads && (db != 0) != second))
    raise(ErrorCode::InvalidArgument, std::string(what) + ": " + op_name(op) + " takes " + std::to_string(arity) +
                                          " input(s) and as many gradients (pass 0 for an unused second address)");
  return static_cast<std::size_t>(arity);
}

// The fixed-arity kernels behind Backend._forward_raw/_vjp_raw and the kernel table alike: the same
// checks of op index, arity and dtype code, then the kernel on views made by `view`.
void forward_fixed(Backend& be, const char* what, int op_index, double s0, double s1, std::uintptr_t a,
                   std::uintptr_t b, std::uintptr_t out, std::int64_t numel, int dtype_code, ViewOf view) {
  const Op op = op_at(op_index, what);
  const std::size_t arity = raw_arity(op, b, 0, false, what);
  const DType dtype = dtype_at(dtype_code, what);
  const std::uintptr_t inputs[2] = {a, b};
  forward_addresses(be, op, s0, s1, inputs, arity, out, numel, dtype, view);
}

void vjp_fixed(Backend& be, const char* what, int op_index, double s0, double s1, std::uintptr_t a, std::uintptr_t b,
               std::uintptr_t g, std::uintptr_t da, std::uintptr_t db, std::int64_t numel, int dtype_code, ViewOf view) {
  const Op op = op_at(op_index, what);
  const std::size_t arity = raw_arity(op, b, db, true, what);
  const DType dtype = dtype_at(dtype_code, what);
  const std::uintptr_t inputs[2] = {a, b}, grads[2] = {da, db};
  vjp_addresses(be, op, s0, s1, inputs, arity, g, grads, numel, dtype, view);
}

void forward_raw(PyBackend& be, int op_index, double s0, double s1, std::uintptr_t a, std::uintptr_t b,
                 std::uintptr_t out, std::int64_t numel, int dtype_code) {
  forward_fixed(*be.backend, "_forward_raw", op_index, s0, s1, a, b, out, numel, dtype_code, wrap_pointer);
}

void vjp_raw(PyBackend& be, int op_index, double s0, double s1, std::uintptr_t a, std::uintptr_t b, std::uintptr_t g,
             std::uintptr_t da, std::uintptr_t db, std::int64_t numel, int dtype_code) {
  vjp_fixed(*be.backend, "_vjp_raw", op_index, s0, s1, a, b, g, da, db, numel, dtype_code, wrap_pointer);
}

// The kernel table of node_kernels.h: the fixed-arity kernels above for code compiled outside this
// module, which runs them without the GIL on PyTorch's autograd threads too. A backend per place is
// made on first use and kept for the process (one per CUDA stream, as tapewise.torch's Python cache
// does; never destroyed, so that no CUDA call runs after the runtime has gone at exit). Errors come
// back as a status and a message, never as exceptions across the C boundary.
// The math mode of the CUDA backends the table makes (tapewise.torch.set_math); the CPU's is exact.
std::atomic<MathMode> node_cuda_math{MathMode::aten};

Backend& backend_at(const tapewise_node_place& place) {
  if (!place.is_cuda) {
    static auto* const cpu = new std::shared_ptr<Backend>(make_cpu_backend());
    return **cpu;
  }
  static std::mutex mutex;
  static auto* const cuda = new std::map<std::tuple<int, void*, MathMode>, std::shared_ptr<Backend>>;
  const MathMode math = node_cuda_math.load(std::memory_order_relaxed);
  const std::lock_guard lock(mutex);
  std::shared_ptr<Backend>& backend = (*cuda)[{place.device, place.stream, math}];
  if (!backend) backend = make_cuda(place.device, reinterpret_cast<std::intptr_t>(place.stream), math_mode_name(math)).backend;
  return *backend;
}

template <class Run>
int node_status(Run&& run, char* error, std::size_t error_size) {
  std::string message;
  try {
    run();
    return 0;
  } catch (const ErrorException& e) {
    message = std::string(error_code_name(e.error.code)) + ": " + e.error.message;
  } catch (const std::bad_alloc&) {
    message = "OutOfMemory: a host allocation failed (std::bad_alloc)";
  } catch (const std::exception& e) {
    message = e.what();
  }
  if (error && error_size) {
    const std::size_t length = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), length);
    error[length] = '\0';
  }
  return 1;
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

int node_forward(tapewise_node_place place, int op_index, double s0, double s1, const void* a, const void* b,
                 void* out, std::int64_t numel, int dtype_code, char* error, std::size_t error_size) {
  return node_status([&] {
    forward_fixed(backend_at(place), "node_kernels.forward", op_index, s0, s1, address(a), address(b), address(out),
                  numel, dtype_code, known_memory);
  }, error, error_size);
}

int node_vjp(tapewise_node_place place, int op_index, double s0, double s1, const void* a, const void* b,
             const void* g, void* da, void* db, std::int64_t numel, int dtype_code, char* error,
             std::size_t error_size) {
  return node_status([&] {
    vjp_fixed(backend_at(place), "node_kernels.vjp", op_index, s0, s1, address(a), address(b), address(g), address(da),
              address(db), numel, dtype_code, known_memory);
  }, error, error_size);
}

const tapewise_node_kernels kNodeKernels = {
    TAPEWISE_NODE_KERNELS_VERSION, sizeof(tapewise_node_kernels),
    static_cast<int>(DType::float32), static_cast<int>(DType::float64),
    static_cast<int>(DType::bfloat16), static_cast<int>(DType::float16),
    &node_forward, &node_vjp};

PyBuffer allocate_buffer(PyBackend& be, const std::vector<std::int64_t>& shape, nb::handle dtype_arg) {
  const std::string dtype = dtype_name_from_python(dtype_arg, "allocate").value_or("float32");
  return PyBuffer{unwrap(be.backend->allocate(Shape(shape), dtype_from_python(dtype), AllocTag::value)),
                  Access::writable};
}

nb::tuple shape_tuple(const Shape& s) {
  nb::list dims;
  for (std::int64_t d : s.dims) dims.append(d);
  return nb::tuple(dims);
}

PyBuffer wrap_array(const PyBackend& be, nb::handle array, bool copy, nb::handle dtype_arg) {
  const std::optional<std::string> dtype = dtype_name_from_python(dtype_arg, "wrap");
  const bool numbers = is_python_numbers(array);
  Imported in = import_array(be, array, copy ? Copy::always : Copy::never, "wrap", numbers_dtype_from_python(dtype, "wrap"));
  check_requested_dtype(dtype, in.buffer.dtype(), numbers, "wrap");
  return PyBuffer{std::move(in.buffer), in.access};
}

// Properties of a released buffer describe no memory: they say so rather than invent a shape.
const Buffer& live_buffer(const PyBuffer& b) { return b.get("Buffer"); }

}  // namespace

void bind_backend(nb::module_& m) {
  nb::class_<PyBackend>(m, "Backend",
      "Where a tape's memory lives and its kernels run: tapewise.cpu() or tapewise.cuda(...).\n\n"
      "CUDA work is queued on the backend's stream. Arrays tapewise hands out (Tape.value, gradients,\n"
      "Buffer.array) are ready to read: a backend on its own stream synchronises before returning them; a\n"
      "backend created on the caller's stream (tapewise.cuda(stream=...)) does not need to, because work\n"
      "the caller queues on that stream runs after tapewise's. Consumers on any other stream must\n"
      "synchronise themselves. Inputs (leaves, seeds) imported from a framework's device array are\n"
      "requested with __dlpack__(stream=<this backend's stream>), so the producer orders its writes first.")
      .def_prop_ro("kind", [](const PyBackend& b) { return b.is_cuda() ? "cuda" : "cpu"; }, "\"cpu\" or \"cuda\".")
      .def("describe", [](const PyBackend& b) { return b.backend->describe(); },
           "A line naming the backend, e.g. \"CUDA device 0: NVIDIA H200 (sm_90, 132 SMs)\".")
      .def("__repr__", [](const PyBackend& b) {
             return std::string("<tapewise.Backend ") + (b.is_cuda() ? "cuda" : "cpu") + ": " + b.backend->describe() + ">"; })
      .def_prop_ro("device_id", [](const PyBackend& b) { return b.backend->device_id(); }, "The CUDA ordinal (0 on the CPU).")
      .def_prop_ro("threads", [](const PyBackend& b) { return cpu_threads(*b.backend); },
                   "The threads a CPU backend runs large tensors on (tapewise.cpu(threads=...)); 0 for CUDA.")
      .def_prop_ro("math", [](const PyBackend& b) { return std::string(math_mode_name(math_mode(*b.backend))); },
                   "The kernels' exp, log, sin, cos and tanh: \"exact\" (tapewise's own, the CPU backend's only mode)\n"
                   "or \"aten\" (ATen's libm; tapewise.cuda(math=...)).")
      .def("__dlpack_device__", [](const PyBackend& b) {
             return std::make_tuple(b.backend->dlpack_device_type(), b.backend->device_id()); },
           "(DLPack device type, device id): (1, 0) for the CPU, (2, ordinal) for CUDA.")
      .def_prop_ro("stream", [](const PyBackend& b) -> std::optional<std::intptr_t> {
             if (!b.is_cuda()) return std::nullopt;
             return reinterpret_cast<std::intptr_t>(cuda_stream(*b.backend)); },
           "The cudaStream_t the backend queues its work on, as an int (None on the CPU).")
      .def_prop_ro("on_callers_stream", [](const PyBackend& b) { return b.callers_stream; },
                   "True when the backend was created on a stream the caller gave: handing out arrays then\n"
                   "does not synchronise (see the class docstring).")
      .def("stats", [](const PyBackend& b) { return stats_dict(*b.backend); },
           "Live allocations per tag: {\"value\"|\"gradient\"|\"workspace\": {\"count\": n, \"bytes\": b}}.\n"
           "Borrowed (wrapped) memory is not counted.")
      .def("memory_stats", [](const PyBackend& b) { return memory_stats_dict(*b.backend); },
           "The memory held for the live buffers, in bytes: {\"live_bytes\": the live buffers' (every tag's),\n"
           "\"reserved_bytes\": all the backend holds from the host heap or the CUDA pool (slabs, large\n"
           "buffers, kept blocks), \"slab_bytes\": the slabs' part (buffers of up to 256 KiB are carved from\n"
           "slabs), \"kept_bytes\": the part kept for reuse with no buffer in it (at most kept_memory_limit;\n"
           "trim() gives it back)}.")
      .def("trim", [](const PyBackend& b) { return b.backend->trim(); },
           "Gives back to the system every empty slab and released block the backend keeps for reuse (as\n"
           "torch.cuda.empty_cache); live buffers are untouched. Returns the bytes given back. A CUDA\n"
           "backend then waits for its stream and returns its pool's unused memory.")
      .def_prop_rw("kept_memory_limit", [](const PyBackend& b) { return kept_memory_limit(*b.backend); },
                   [](PyBackend& b, std::optional<std::int64_t> bytes) { set_kept_memory_limit(*b.backend, bytes); },
                   nb::for_setter("bytes"_a.none()),
                   "The most bytes kept for reuse with no buffer in them (memory_stats()[\"kept_bytes\"]), None\n"
                   "for no limit: at first TAPEWISE_KEPT_MEMORY_LIMIT when set, else 256 MiB on the CPU and no\n"
                   "limit on CUDA. Setting it gives back what is kept beyond it; a negative value raises\n"
                   "InvalidArgumentError.")
      .def("synchronize", [](const PyBackend& b) { unwrap(b.backend->synchronize()); },
           "Waits for all queued work; raises CudaFailureError for an asynchronous failure.")
      .def("_inject_allocation_failure",
           [](PyBackend& b, std::int64_t nth) { detail::engine_of(*b.backend).inject_allocation_failure(nth); },
           "nth"_a, "Test hook: the nth allocation from now fails with OutOfMemory.")
      .def("wrap", &wrap_array, "array"_a, "copy"_a = false, "dtype"_a = nb::none(),
           "A Buffer over `array`'s memory, no copy (see Tape.leaf for what is accepted); copy=True copies.\n"
           "A Python float or (nested) list of numbers is always copied, as dtype (\"float32\", the default,\n"
           "\"float64\", \"bfloat16\" or \"float16\"; a 16-bit dtype rounds each number to float32 first, then\n"
           "to 16 bits, as tapewise rounds scalars); an array keeps its own dtype (a dtype= that differs\n"
           "raises DTypeMismatchError).\n"
           "A view of read-only memory is read-only: its array() refuses writes and it cannot be an output.")
      .def("allocate", &allocate_buffer, "shape"_a, "dtype"_a = "float32",
           "A fresh, uninitialised Buffer of this backend (tag \"value\"); dtype \"float32\", \"float64\",\n"
           "\"bfloat16\" or \"float16\".")
      .def("forward", &forward_buffers, "op"_a, "inputs"_a, "out"_a, "scalars"_a = std::vector<double>{},
           "Low level: out = op(*inputs, *scalars), one kernel on the backend's stream (not synchronised).\n"
           "Every buffer belongs to this backend and has one shape and dtype; a released buffer, or a\n"
           "read-only one as `out`, raises InvalidArgumentError.")
      .def("vjp_fused", &vjp_buffers, "op"_a, "inputs"_a, "g"_a, "grads"_a, "scalars"_a = std::vector<double>{},
           "Low level: writes the node's fused VJP of upstream `g` into `grads` (one per input), one\n"
           "kernel on the backend's stream (not synchronised). Read-only `grads` raise InvalidArgumentError.")
      .def("forward_ptrs", &forward_pointers, "op_index"_a, "s0"_a, "s1"_a, "inputs"_a, "out"_a, "numel"_a, "dtype"_a,
           "Low level, for framework adapters: forward on raw addresses of contiguous memory of this\n"
           "backend, each holding `numel` elements of `dtype` (\"float32\", \"float64\", \"bfloat16\" or\n"
           "\"float16\"). The caller keeps the memory alive and must be on the backend's stream (or\n"
           "synchronise).")
      .def("vjp_fused_ptrs", &vjp_pointers, "op_index"_a, "s0"_a, "s1"_a, "inputs"_a, "g"_a, "grads"_a, "numel"_a,
           "dtype"_a, "Low level: the fused VJP on raw addresses (see forward_ptrs).")
      .def("_forward_raw", &forward_raw, "op_index"_a, "s0"_a, "s1"_a, "a"_a, "b"_a, "out"_a, "numel"_a,
           "dtype_code"_a,
           "forward_ptrs with fixed arity, for tapewise.torch's per-node path: b is 0 for a unary node;\n"
           "dtype_code is tapewise._tapewise.DTYPE_CODES[dtype]. Same checks and errors.")
      .def("_vjp_raw", &vjp_raw, "op_index"_a, "s0"_a, "s1"_a, "a"_a, "b"_a, "g"_a, "da"_a, "db"_a, "numel"_a,
           "dtype_code"_a, "vjp_fused_ptrs with fixed arity (see _forward_raw): b and db are 0 for a unary node.");

  nb::class_<PyBuffer>(m, "Buffer",
      "A tapewise buffer owned by Python (a gradient, or Backend.wrap/allocate): move-only device or\n"
      "host memory. array() (or __dlpack__) exports it without a copy (on the host a numpy array; for\n"
      "bfloat16 an ml_dtypes.bfloat16 one, or without ml_dtypes a DLPack-only object); the arrays share\n"
      "the memory, so it stays valid\n"
      "while any of them lives, even after release(). A view of read-only memory (Backend.wrap of a\n"
      "read-only array) is exported read-only.")
      .def("__repr__", [](const PyBuffer& b) { return "<tapewise.Buffer " + buffer_summary(b) + ">"; })
      .def_prop_ro("shape", [](const PyBuffer& b) { return shape_tuple(live_buffer(b).shape()); })
      .def_prop_ro("dtype", [](const PyBuffer& b) { return std::string(dtype_name(live_buffer(b).dtype())); })
      .def_prop_ro("nbytes", [](const PyBuffer& b) { return live_buffer(b).bytes(); })
      .def_prop_ro("borrowed", [](const PyBuffer& b) { return live_buffer(b).borrowed(); },
                   "True for a view of caller memory (wrap): not counted in Backend.stats().")
      .def_prop_ro("read_only", [](const PyBuffer& b) { return b.access == Access::read_only; },
                   "True for a view of read-only memory: exported read-only, refused as an output.")
      .def_prop_ro("released", [](const PyBuffer& b) { return !b.live(); }, "True after release().")
      .def_prop_ro("tag", [](const PyBuffer& b) { return std::string(alloc_tag_name(live_buffer(b).tag())); })
      .def_prop_ro("data_ptr", [](const PyBuffer& b) { return reinterpret_cast<std::uintptr_t>(live_buffer(b).data()); },
                   "The address of the first element (host or device), as an int.")
      .def("array", [](const PyBuffer& b) {
             const Buffer& buffer = live_buffer(b);
             // A Buffer does not know its Python backend; waiting for the device is always correct.
             unwrap(const_cast<Backend*>(buffer.backend())->synchronize());
             return export_buffer(b, "Buffer"); },
           "The buffer as an array (no copy, shares the memory): a numpy array on the host, an object\n"
           "exporting __dlpack__ on a device; bfloat16 as ml_dtypes.bfloat16 (without ml_dtypes a\n"
           "DLPack-only object: torch.from_dlpack reads it,\n"
           "numpy.asarray raises TypeError).\n"
           "Synchronises the backend first.")
      .def("host", [](const PyBuffer& b) {
             const Buffer& buffer = live_buffer(b);
             check_numpy_dtype(buffer.dtype(), "Buffer.host");
             return host_numpy(unwrap(const_cast<Backend*>(buffer.backend())->download(buffer)), "Buffer.host"); },
           "A host copy as a new numpy array (bfloat16 as ml_dtypes.bfloat16; without ml_dtypes TypeError:\n"
           "use torch.from_dlpack(buffer)).")
      .def("__dlpack_device__", [](const PyBuffer& b) {
             const Backend& be = *live_buffer(b).backend();
             return std::make_tuple(be.dlpack_device_type(), be.device_id()); })
      .def("__dlpack__", [](nb::handle self, nb::kwargs kwargs) {
             return self.attr("array")().attr("__dlpack__")(**kwargs); },
           "DLPack export of array() (torch.from_dlpack(buffer) works).")
      .def("release", [](PyBuffer& b) { b.release(); },
           "Drops this Buffer's memory: freed now, or when the last array exported from it goes. The\n"
           "Buffer is then empty (its properties raise InvalidArgumentError), and a gradient's Buffer\n"
           "leaves its Gradients.");

  nb::dict dtype_codes;  // every dtype by name: {"float32": 0, "float64": 1, "bfloat16": 2, "float16": 3}
  for (DType d : kDTypes) dtype_codes[dtype_name(d)] = static_cast<int>(d);
  m.attr("DTYPE_CODES") = dtype_codes;
  m.def("cpu", [](nb::handle threads) {
          int count = 0;  // the default: TAPEWISE_CPU_THREADS, else the CPUs this process may use
          if (!threads.is_none()) {
            const auto value = int64_from_python(threads, "cpu: threads must be an int or None, not ");
            if (!value || *value < 0 || *value > 256)
              raise(ErrorCode::InvalidArgument, std::string("cpu: threads ") + nb::str(threads).c_str() +
                                                    " is outside 0..256 (0 or None: the default)");
            count = static_cast<int>(*value);
          }
          return PyBackend{unwrap(make_cpu_backend(CpuOptions{count})), false}; },
        "threads"_a = nb::none(),
        "A new CPU backend: the same per-element code as the CUDA kernels, compiled for the host. Tensors\n"
        "of more than 2^15 elements run on `threads` threads, the calling thread included (None: the\n"
        "TAPEWISE_CPU_THREADS environment variable, else the CPUs this process may use; 1: the calling\n"
        "thread alone; at most 256). Results never depend on the thread count.");
  m.def("_cuda", &make_cuda, "device"_a, "stream"_a = nb::none(), "math"_a = "aten",
        "Low level of tapewise.cuda: `stream` is a cudaStream_t as an int (0: the legacy default stream)\n"
        "or None for a stream of the backend's own; `math` is \"aten\" or \"exact\".");
  m.def("_node_kernels", [] {
          return nb::capsule(const_cast<tapewise_node_kernels*>(&kNodeKernels), TAPEWISE_NODE_KERNELS_CAPSULE); },
        "The capsule \"" TAPEWISE_NODE_KERNELS_CAPSULE "\" holding the per-node kernel table of\n"
        "tapewise/native/node_kernels.h, for compiled extensions (tapewise.torch's C++ nodes).");
  m.def("_set_node_math", [](const std::string& math) { node_cuda_math = unwrap(math_mode_named(math)); }, "math"_a,
        "The math mode (\"aten\" or \"exact\") of the CUDA backends the kernel table makes from now on\n"
        "(tapewise.torch.set_math).");
  m.def("cuda_available", [] { return cuda_available(); }, "True when a CUDA device can be opened.");
  m.def("cuda_unavailable_reason", [] {
          std::string why;
          return cuda_available(&why) ? std::string() : why; },
        "Why no CUDA device can be opened (\"\" when one can).");
}

}  // namespace tapewise::py
