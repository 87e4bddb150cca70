// python/src/backend_bindings.cpp — tapewise.Backend and tapewise.Buffer: making backends, memory
// statistics, zero-copy wrapping, and the low-level per-node kernels (forward, fused VJP) that
// tapewise.torch runs on framework-owned memory.
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace tapewise::py {
namespace {

using namespace nb::literals;

PyBackend make_cuda(int device, std::optional<std::intptr_t> stream) {
  // DLPack and PyTorch name the legacy default stream 0, which CudaOptions reads as "no stream":
  // pass cudaStreamLegacy (1) instead, the same stream.
  void* handle = nullptr;
  if (stream) handle = reinterpret_cast<void*>(*stream == 0 ? std::intptr_t{1} : *stream);
  return PyBackend{unwrap(make_cuda_backend(CudaOptions{device, handle})), stream.has_value()};
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
// framework reusing the memory afterwards is ordered after these kernels.
std::vector<Buffer> wrap_pointers(Backend& be, const std::vector<std::uintptr_t>& ptrs, std::int64_t numel, DType dtype) {
  std::vector<Buffer> views;
  views.reserve(ptrs.size());
  for (std::uintptr_t p : ptrs) views.push_back(unwrap(be.wrap(reinterpret_cast<void*>(p), Shape{numel}, dtype)));
  return views;
}

void forward_pointers(PyBackend& be, int op_index, double s0, double s1, const std::vector<std::uintptr_t>& inputs,
                      std::uintptr_t out, std::int64_t numel, const std::string& dtype_name_) {
  if (op_index < 0 || op_index >= kOpCount) raise(ErrorCode::InvalidArgument, "forward_ptrs: op index out of range");
  const Op op = static_cast<Op>(op_index);
  check_arity(op, inputs.size(), inputs.size(), "forward_ptrs");
  const DType dtype = dtype_from_python(dtype_name_);
  std::vector<Buffer> in = wrap_pointers(*be.backend, inputs, numel, dtype);
  std::vector<Buffer> outs = wrap_pointers(*be.backend, {out}, numel, dtype);
  std::vector<const Buffer*> in_ptrs;
  for (const Buffer& b : in) in_ptrs.push_back(&b);
  unwrap(be.backend->forward(op, Scalars{s0, s1}, in_ptrs, outs[0]));
}

void vjp_pointers(PyBackend& be, int op_index, double s0, double s1, const std::vector<std::uintptr_t>& inputs,
                  std::uintptr_t g, const std::vector<std::uintptr_t>& grads, std::int64_t numel,
                  const std::string& dtype_name_) {
  if (op_index < 0 || op_index >= kOpCount) raise(ErrorCode::InvalidArgument, "vjp_fused_ptrs: op index out of range");
  const Op op = static_cast<Op>(op_index);
  check_arity(op, inputs.size(), grads.size(), "vjp_fused_ptrs");
  const DType dtype = dtype_from_python(dtype_name_);
  std::vector<Buffer> in = wrap_pointers(*be.backend, inputs, numel, dtype);
  std::vector<Buffer> gs = wrap_pointers(*be.backend, {g}, numel, dtype);
  std::vector<Buffer> out = wrap_pointers(*be.backend, grads, numel, dtype);
  std::vector<const Buffer*> in_ptrs;
  std::vector<Buffer*> out_ptrs;
  for (const Buffer& b : in) in_ptrs.push_back(&b);
  for (Buffer& b : out) out_ptrs.push_back(&b);
  unwrap(be.backend->vjp_fused(op, Scalars{s0, s1}, in_ptrs, gs[0], out_ptrs));
}

PyBuffer allocate_buffer(PyBackend& be, const std::vector<std::int64_t>& shape, const std::string& dtype) {
  return PyBuffer{unwrap(be.backend->allocate(Shape(shape), dtype_from_python(dtype), AllocTag::value)),
                  Access::writable};
}

nb::tuple shape_tuple(const Shape& s) {
  nb::list dims;
  for (std::int64_t d : s.dims) dims.append(d);
  return nb::tuple(dims);
}

PyBuffer wrap_array(const PyBackend& be, nb::handle array, bool copy, const std::optional<std::string>& dtype) {
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
      .def("synchronize", [](const PyBackend& b) { unwrap(b.backend->synchronize()); },
           "Waits for all queued work; raises CudaFailureError for an asynchronous failure.")
      .def("_inject_allocation_failure",
           [](PyBackend& b, std::int64_t nth) { detail::engine_of(*b.backend).inject_allocation_failure(nth); },
           "nth"_a, "Test hook: the nth allocation from now fails with OutOfMemory.")
      .def("wrap", &wrap_array, "array"_a, "copy"_a = false, "dtype"_a = nb::none(),
           "A Buffer over `array`'s memory, no copy (see Tape.leaf for what is accepted); copy=True copies.\n"
           "A Python float or (nested) list of numbers is always copied, as dtype (\"float32\", the default,\n"
           "or \"float64\"); an array keeps its own dtype (a dtype= that differs raises DTypeMismatchError).\n"
           "A view of read-only memory is read-only: its array() refuses writes and it cannot be an output.")
      .def("allocate", &allocate_buffer, "shape"_a, "dtype"_a = "float32",
           "A fresh, uninitialised Buffer of this backend (tag \"value\").")
      .def("forward", &forward_buffers, "op"_a, "inputs"_a, "out"_a, "scalars"_a = std::vector<double>{},
           "Low level: out = op(*inputs, *scalars), one kernel on the backend's stream (not synchronised).\n"
           "Every buffer belongs to this backend and has one shape and dtype; a released buffer, or a\n"
           "read-only one as `out`, raises InvalidArgumentError.")
      .def("vjp_fused", &vjp_buffers, "op"_a, "inputs"_a, "g"_a, "grads"_a, "scalars"_a = std::vector<double>{},
           "Low level: writes the node's fused VJP of upstream `g` into `grads` (one per input), one\n"
           "kernel on the backend's stream (not synchronised). Read-only `grads` raise InvalidArgumentError.")
      .def("forward_ptrs", &forward_pointers, "op_index"_a, "s0"_a, "s1"_a, "inputs"_a, "out"_a, "numel"_a, "dtype"_a,
           "Low level, for framework adapters: forward on raw addresses of contiguous memory of this\n"
           "backend, each holding `numel` elements of `dtype` (\"float32\"/\"float64\"). The caller keeps\n"
           "the memory alive and must be on the backend's stream (or synchronise).")
      .def("vjp_fused_ptrs", &vjp_pointers, "op_index"_a, "s0"_a, "s1"_a, "inputs"_a, "g"_a, "grads"_a, "numel"_a,
           "dtype"_a, "Low level: the fused VJP on raw addresses (see forward_ptrs).");

  nb::class_<PyBuffer>(m, "Buffer",
      "A tapewise buffer owned by Python (a gradient, or Backend.wrap/allocate): move-only device or\n"
      "host memory. array() (or __dlpack__) exports it without a copy; the arrays share the memory, so\n"
      "it stays valid while any of them lives, even after release(). A view of read-only memory\n"
      "(Backend.wrap of a read-only array) is exported read-only.")
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
           "exporting __dlpack__ on a device. Synchronises the backend first.")
      .def("host", [](const PyBuffer& b) {
             const Buffer& buffer = live_buffer(b);
             return host_numpy(unwrap(const_cast<Backend*>(buffer.backend())->download(buffer))); },
           "A host copy as a new numpy array.")
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

  m.def("cpu", [] { return PyBackend{make_cpu_backend(), false}; },
        "A new CPU backend: the same per-element code as the CUDA kernels, compiled for the host.");
  m.def("_cuda", &make_cuda, "device"_a, "stream"_a = nb::none(),
        "Low level of tapewise.cuda: `stream` is a cudaStream_t as an int (0: the legacy default stream)\n"
        "or None for a stream of the backend's own.");
  m.def("cuda_available", [] { return cuda_available(); }, "True when a CUDA device can be opened.");
  m.def("cuda_unavailable_reason", [] {
          std::string why;
          return cuda_available(&why) ? std::string() : why; },
        "Why no CUDA device can be opened (\"\" when one can).");
}

}  // namespace tapewise::py
