// python/src/bindings.hpp — what the parts of the nanobind module tapewise._tapewise share: the
// Python-side wrappers of Backend, Buffer, Tape and Gradients, errors as exceptions, and the array
// conversions (zero-copy DLPack import and export).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <tapewise/tapewise.hpp>

#include "backends/engine.hpp"  // the engine behind Backend: the copy prim, the allocation-failure hook

// Arrays are exported as nanobind's nb_ndarray (DLPack and the buffer protocol), which nanobind calls
// the array_api framework (added in nanobind 2.2).
#if NB_VERSION_MAJOR < 2 || (NB_VERSION_MAJOR == 2 && NB_VERSION_MINOR < 2)
#error "tapewise's Python module needs nanobind >= 2.2 (pip install -U nanobind)"
#endif

namespace tapewise::py {

namespace nb = nanobind;

// A tapewise Error on its way to Python; the module's translator raises tapewise.<Code>Error.
struct ErrorException : std::exception {
  Error error;
  explicit ErrorException(Error e) : error(std::move(e)) {}
  const char* what() const noexcept override { return error.message.c_str(); }
};

[[noreturn]] inline void raise(ErrorCode code, std::string message) {
  throw ErrorException(Error{code, std::move(message)});
}

template <class T>
T unwrap(Result<T> r) {
  if (!r) throw ErrorException(std::move(r.error()));
  return std::move(*r);
}
inline void unwrap(Result<void> r) {
  if (!r) throw ErrorException(std::move(r.error()));
}

// A backend as Python holds it. `callers_stream` is true for a CUDA backend created on a stream the
// caller gave: consumers on that stream are ordered after its work already, so handing out arrays
// needs no host synchronisation. A backend on its own stream synchronises first (settle()).
struct PyBackend {
  std::shared_ptr<Backend> backend;
  bool callers_stream = false;

  bool is_cuda() const { return backend->kind() == BackendKind::cuda; }
  // Makes all queued work complete before an array is handed to a consumer (see above).
  void settle() const {
    if (is_cuda() && !callers_stream) unwrap(backend->synchronize());
  }
  // The stream to name in __dlpack__(stream=...), or nullopt for the CPU backend (DLPack: 1 is the
  // legacy default stream, 0 is not allowed).
  std::optional<std::intptr_t> dlpack_stream() const;
};

// Whether an exported array may be written through: read-only memory stays read-only, and so does
// memory the tape reads again (a node's value), so that no write can corrupt a later backward.
enum class Access { read_only, writable };

// A buffer Python owns: gradients taken out of a Gradients object, Backend.allocate/wrap results.
// The memory is shared with every array exported from it, so release() never frees memory that an
// array still shows: the last of them frees it.
struct PyBuffer {
  std::shared_ptr<Buffer> memory;  // null once released
  Access access = Access::writable;

  PyBuffer(Buffer b, Access a) : memory(std::make_shared<Buffer>(std::move(b))), access(a) {}
  bool live() const { return memory && *memory; }
  // The buffer, or InvalidArgumentError naming `what` when it was released.
  const Buffer& get(const std::string& what) const;
  // The buffer as an output: also refuses read-only memory.
  Buffer& output(const std::string& what);
  void release() { memory.reset(); }
};

// tapewise.Node: a node of one tape, as the tape's methods return it. It holds its tapewise.Tape, so
// the id never outlives the tape that gives it meaning; the id itself (serial and position) is what
// every tape checks, so a node of another tape is refused by name.
struct PyNode {
  nb::object tape;
  NodeId id = -1;
};
// A new tapewise.Node for node `id` of `tape` (a tapewise.Tape).
nb::object make_node(nb::handle tape, NodeId id);

// A node from Python: a tapewise.Node, or its id as an int or an object with __index__ (numpy
// integers), never a bool.
struct NodeIdArg {
  NodeId value = -1;
};
std::vector<NodeId> node_ids(const std::vector<NodeIdArg>& ids);

// Python object -> buffer: zero-copy (Backend::wrap) when the array lives where the backend can use
// it, is float32/float64/bfloat16/float16 and C-contiguous; otherwise a copy when the mode allows one, else an error
// that names what is wrong. `what` names the argument in messages ("leaf", "seed", ...). `access`
// is writable for a copy (fresh memory) and for a view of writable memory.
enum class Copy { never, always, if_needed };
struct Imported {
  Buffer buffer;
  Access access = Access::writable;
  bool copied = false;
};
// A Python number or (nested) list of numbers is always copied, as an array of `numbers_dtype`.
Imported import_array(const PyBackend& be, nb::handle obj, Copy copy, const char* what,
                      DType numbers_dtype = DType::float64);

// Buffer -> array, no copy: a numpy array on the host (bfloat16 as ml_dtypes.bfloat16; without
// ml_dtypes a DLPack-only object), an object exporting __dlpack__ on a device; `owner`
// is kept alive by the array (the Tape for values). A read-only export refuses writes through the
// buffer protocol and carries DLPack's read-only flag in versioned capsules.
nb::object export_array(const Buffer& buffer, nb::handle owner, Access access);
// The same for a PyBuffer's memory: the array shares it, so it outlives a release().
nb::object export_buffer(const PyBuffer& holder, const std::string& what);

// A DLPack object of dtype bfloat16 over a uint16 array of bfloat16 bit patterns (any strides), for
// tapewise._arrays: numpy cannot export the ml_dtypes.bfloat16 dtype itself. It keeps `bits` alive.
nb::object bfloat16_dlpack(nb::handle bits, bool read_only);

// A host copy as a new numpy array (owning its bytes): Tape.host, Gradients.host; bfloat16 as
// ml_dtypes.bfloat16, and without ml_dtypes a TypeError (naming `what`) that points to DLPack instead.
nb::object host_numpy(HostArray host, const char* what);
// The same TypeError, raised before a download that could not be handed out anyway.
void check_numpy_dtype(DType dtype, const char* what);

// The parts of a repr the classes share: "(3, 4)" and "cpu" / "cuda:0".
std::string shape_text(const Shape& shape);
std::string device_text(const Backend& backend);
// What a Buffer holds, e.g. "(3,) float64 on cpu, owned, writable" (or "released").
std::string buffer_summary(const PyBuffer& buffer);

Op op_from_python(const std::string& name);
DType dtype_from_python(const std::string& name);
// A dtype= argument as tapewise's name for it: None stays None; "float32" and the other names as
// given; numpy's spellings ("f8", np.float64, np.dtype("<f4")), ml_dtypes.bfloat16 and torch dtypes by
// the name they stand for. Anything else is a TypeError naming `what`.
std::optional<std::string> dtype_name_from_python(nb::handle dtype, const char* what);
// A count or size given from Python: an int, never a bool (True is no count) nor a float, else a
// TypeError of `type_error_prefix` and the type's name; nullopt when it does not fit in 64 bits.
std::optional<std::int64_t> int64_from_python(nb::handle value, const std::string& type_error_prefix);
VjpPath path_from_python(const std::string& name);
// A Python number or (nested) list/tuple of numbers: memory-less data that import_array copies.
bool is_python_numbers(nb::handle obj);
// The dtype of a Python list's (or number's) copy: dtype= as given, "float32" when None; anything
// else raises DTypeMismatchError naming it.
DType numbers_dtype_from_python(const std::optional<std::string>& name, const char* what);
// An array keeps its own dtype: a dtype= that differs from it raises DTypeMismatchError (a list,
// copied in the dtype asked for, always matches).
void check_requested_dtype(const std::optional<std::string>& name, DType imported, bool from_numbers, const char* what);

void bind_backend(nb::module_& m);
void bind_tape(nb::module_& m);

}  // namespace tapewise::py

namespace nanobind::detail {
// A tapewise.Node or an id; refuses bool (an int subclass) so that tape.sin(True) is a TypeError.
template <>
struct type_caster<tapewise::py::NodeIdArg> {
  NB_TYPE_CASTER(tapewise::py::NodeIdArg, const_name("Node | int"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    if (nanobind::isinstance<tapewise::py::PyNode>(src)) {
      value.value = nanobind::inst_ptr<tapewise::py::PyNode>(src)->id;
      return true;
    }
    PyObject* o = src.ptr();
    if (PyBool_Check(o) || !PyIndex_Check(o) || PyFloat_Check(o)) return false;
    PyObject* index = PyNumber_Index(o);
    if (!index) {
      PyErr_Clear();
      return false;
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    value.value = static_cast<tapewise::NodeId>(v);
    return true;
  }
  static handle from_cpp(const tapewise::py::NodeIdArg& id, rv_policy, cleanup_list*) noexcept {
    return PyLong_FromLongLong(id.value);
  }
};
}  // namespace nanobind::detail
