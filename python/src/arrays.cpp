// python/src/arrays.cpp — arrays across the Python boundary: any object exporting __dlpack__ (numpy,
// torch, jax, cupy) or the buffer protocol becomes a borrowed Buffer over its memory (no copy), and
// buffers go out as nanobind ndarrays (no copy) that keep their owner alive, read-only where the
// memory is read-only or must not change.
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace tapewise::py {
namespace {

// DLPack device types (dlpack.h) that matter here.
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string device_name(int type, int id) {
  switch (type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda:" + std::to_string(id);
    case kDLCUDAHost: return "cuda_host";
    case kDLCUDAManaged: return "cuda_managed:" + std::to_string(id);
    default: return "DLPack device type " + std::to_string(type);
  }
}

// DLPack 1.1's codes of the 8-, 6- and 4-bit float formats (dlpack.h, kDLFloat8_e3m4 = 7 on), which
// nanobind's dtype_code does not list: named so that an error says which one was passed.
const char* small_float_name(std::uint8_t code) {
  static constexpr const char* kNames[] = {
      "float8_e3m4",  "float8_e4m3",     "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
      "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn"};
  constexpr std::uint8_t first = 7;
  return code >= first && code - first < static_cast<int>(std::size(kNames)) ? kNames[code - first] : nullptr;
}

std::string dtype_name(const nb::dlpack::dtype& t) {
  const char* kind = "unknown";
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Complex: kind = "complex"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  if (const char* small = small_float_name(t.code))
    return t.lanes == 1 ? small : small + std::string("x") + std::to_string(t.lanes);
  std::string name = kind + std::to_string(t.bits);
  return t.lanes == 1 ? name : name + "x" + std::to_string(t.lanes);
}

bool host_accessible(int type) { return type == kDLCPU || type == kDLCUDAHost; }

// The tapewise dtype of a DLPack dtype (float16 is kDLFloat of 16 bits, bfloat16 kDLBfloat of 16),
// or nullopt for one tapewise does not take.
std::optional<DType> dtype_from_dlpack(const nb::dlpack::dtype& t) {
  if (t.lanes != 1) return std::nullopt;
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  if (code == nb::dlpack::dtype_code::Float && t.bits == 32) return DType::float32;
  if (code == nb::dlpack::dtype_code::Float && t.bits == 64) return DType::float64;
  if (code == nb::dlpack::dtype_code::Float && t.bits == 16) return DType::float16;
  if (code == nb::dlpack::dtype_code::Bfloat && t.bits == 16) return DType::bfloat16;
  return std::nullopt;
}

nb::dlpack::dtype dlpack_dtype(DType d) {
  const auto code = d == DType::bfloat16 ? nb::dlpack::dtype_code::Bfloat : nb::dlpack::dtype_code::Float;
  return nb::dlpack::dtype{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(dtype_size(d) * 8), 1};
}

// Whether the backend's kernels can use memory on this DLPack device directly.
bool usable_in_place(const PyBackend& be, int type, int id) {
  if (!be.is_cuda()) return host_accessible(type);
  return (type == kDLCUDA || type == kDLCUDAManaged) && id == be.backend->device_id();
}

// C order with strides in elements; a dim of size 1 (or an empty array) may have any stride.
bool c_contiguous(const nb::ndarray<nb::ro>& a) {
  if (a.size() == 0 || a.stride_ptr() == nullptr) return true;
  std::int64_t expected = 1;
  for (std::size_t d = a.ndim(); d-- > 0;) {
    if (a.shape(d) != 1 && a.stride(d) != expected) return false;
    expected *= static_cast<std::int64_t>(a.shape(d));
  }
  return true;
}

// The object to hand to nanobind's importer. For device arrays the DLPack capsule is requested with
// the backend's stream, so the producer orders its pending writes before our kernels (the consumer's
// half of the DLPack stream protocol); host arrays go as they are.
nb::object dlpack_source(const PyBackend& be, nb::handle obj) {
  auto stream = be.dlpack_stream();
  if (!stream || !nb::hasattr(obj, "__dlpack_device__") || !nb::hasattr(obj, "__dlpack__"))
    return nb::borrow(obj);
  nb::tuple device = nb::cast<nb::tuple>(obj.attr("__dlpack_device__")());
  const int type = nb::cast<int>(device[0]);
  if (type != kDLCUDA && type != kDLCUDAManaged) return nb::borrow(obj);
  return obj.attr("__dlpack__")(nb::arg("stream") = *stream);
}

// Whether obj is a numpy array of ml_dtypes.bfloat16, which numpy cannot export: it is read as its
// uint16 bit patterns (a view, same memory and strides) and taken as bfloat16.
bool is_ml_dtypes_bfloat16(nb::handle obj) {
  if (!nb::hasattr(obj, "dtype") || !nb::isinstance(obj, nb::module_::import_("numpy").attr("ndarray"))) return false;
  nb::object dtype = obj.attr("dtype");
  return std::string(nb::str(dtype.attr("name")).c_str()) == "bfloat16" && nb::cast<int>(dtype.attr("itemsize")) == 2;
}

// A strided host array gathered into a contiguous HostArray (the copy=True path).
HostArray gather_host(const nb::ndarray<nb::ro>& a, DType dtype, const Shape& shape) {
  HostArray h;
  h.shape = shape;
  h.dtype = dtype;
  const std::size_t item = dtype_size(dtype);
  const std::size_t n = a.size();
  // A zero-stride view can claim any shape: refuse a size that does not fit before allocating it.
  if (!shape.valid() || n > std::numeric_limits<std::size_t>::max() / item)
    raise(ErrorCode::InvalidShape, "copy: the array of shape " + shape.str() + " has too many elements to copy");
  try {
    h.bytes.resize(n * item);
  } catch (const std::bad_alloc&) {
    raise(ErrorCode::OutOfMemory, "copy: cannot allocate " + std::to_string(n * item) + " bytes for the array of shape " +
                                      shape.str());
  }
  const auto* base = static_cast<const std::byte*>(a.data());
  if (c_contiguous(a)) {
    if (n) std::memcpy(h.bytes.data(), base, n * item);
    return h;
  }
  std::vector<std::size_t> index(a.ndim(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < a.ndim(); ++d)
      offset += static_cast<std::int64_t>(index[d]) * (a.stride_ptr() ? a.stride(d) : 0);
    std::memcpy(h.bytes.data() + i * item, base + offset * static_cast<std::int64_t>(item), item);
    for (std::size_t d = a.ndim(); d-- > 0;) {  // odometer: the last dim moves fastest
      if (++index[d] < a.shape(d)) break;
      index[d] = 0;
    }
  }
  return h;
}

// Holds the imported ndarray for as long as a buffer views its memory. Releasing it may run the
// producer's DLPack deleter (Python code), so it takes the GIL; after interpreter shutdown it leaks.
std::shared_ptr<void> keep_alive(const nb::ndarray<nb::ro>& a) {
  return std::shared_ptr<void>(new nb::ndarray<nb::ro>(a), [](void* p) {
    if (!Py_IsInitialized()) return;
    nb::gil_scoped_acquire gil;
    delete static_cast<nb::ndarray<nb::ro>*>(p);
  });
}

// A copy made on the backend: the view is copied by the backend's own copy primitive, then waited
// for (the source may be released as soon as we return).
Buffer copy_on_backend(const PyBackend& be, const Buffer& view) {
  Buffer out = unwrap(be.backend->allocate(view.shape(), view.dtype(), AllocTag::value));
  const Buffer* inputs[1] = {&view};
  unwrap(detail::engine_of(*be.backend).prim(Prim::copy, 0.0, inputs, out));
  be.settle();
  return out;
}

}  // namespace

std::optional<std::intptr_t> PyBackend::dlpack_stream() const {
  if (!is_cuda()) return std::nullopt;
  auto handle = reinterpret_cast<std::intptr_t>(cuda_stream(*backend));
  return handle == 0 ? 1 : handle;
}

// A Python number or (nested) list/tuple of numbers: memory-less data that is always copied.
bool is_python_numbers(nb::handle obj) {
  PyObject* o = obj.ptr();
  return PyList_Check(o) || PyTuple_Check(o) || PyFloat_Check(o) || (PyLong_Check(o) && !PyBool_Check(o));
}

// The numbers as a new numpy array of `dtype`; anything numpy cannot read as one rectangular array
// of ints or floats (strings, ragged lists, None, bools) is the TypeError every argument of the wrong
// type raises. numpy reads without a dtype first: asked for float64 it would turn None into NaN.
nb::object numbers_as_array(nb::handle obj, DType dtype, const char* what) {
  const std::string prefix = std::string(what) + ": this " + nb::type_name(obj.type()).c_str();
  nb::object numpy = nb::module_::import_("numpy");
  nb::object parsed;
  try {
    parsed = numpy.attr("array")(obj);
  } catch (nb::python_error& refusal) {
    throw nb::type_error((prefix + " is not a rectangular array of numbers (" + nb::type_name(refusal.type()).c_str() +
                          ": " + nb::str(refusal.value()).c_str() + ")").c_str());
  }
  const nb::object parsed_dtype = parsed.attr("dtype");
  const std::string kind = nb::cast<const char*>(parsed_dtype.attr("kind"));
  if (kind != "i" && kind != "u" && kind != "f") {
    const std::string dtype_text = nb::cast<const char*>(parsed_dtype.attr("name"));
    throw nb::type_error((prefix + " holds " + dtype_text + " elements, not ints or floats").c_str());
  }
  // A 16-bit dtype goes through float32 here and is rounded to 16 bits by numbers_16bit, as round_to
  // and ATen round a double: R16(R32(v)) (numpy's float64 -> float16 would round once).
  const char* parse_as = is_16bit(dtype) ? "float32" : tapewise::dtype_name(dtype);
  return numpy.attr("asarray")(parsed, nb::arg("dtype") = parse_as, nb::arg("order") = "C");
}

// The float32 numbers (a fresh C-contiguous numpy array) rounded to a 16-bit dtype: a HostArray of
// the dtype's bits, each R16 of the float32.
HostArray numbers_16bit(nb::handle float32_numbers, DType dtype) {
  using Float32Numbers = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
  const auto a = nb::cast<Float32Numbers>(float32_numbers);
  std::vector<std::int64_t> dims(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) dims[d] = static_cast<std::int64_t>(a.shape(d));
  HostArray h;
  h.shape = Shape(std::move(dims));
  h.dtype = dtype;
  h.bytes.resize(a.size() * sizeof(std::uint16_t));
  auto* out = reinterpret_cast<std::uint16_t*>(h.bytes.data());
  for (std::size_t i = 0; i < a.size(); ++i)
    out[i] = dtype == DType::bfloat16 ? bfloat16(a.data()[i]).bits : float16(a.data()[i]).bits;
  return h;
}

Imported import_array(const PyBackend& be, nb::handle obj, Copy copy, const char* what, DType numbers_dtype) {
  if (is_python_numbers(obj)) {
    // A list has no memory to view: its fresh array is the copy, used in place on the host (unless
    // copy=True asks for backend-owned memory) and uploaded to a CUDA backend. Either way the result
    // is a copy, so a leaf's value is read-only.
    nb::object fresh = numbers_as_array(obj, numbers_dtype, what);
    if (is_16bit(numbers_dtype))  // numpy holds no bfloat16: the rounded bits are uploaded
      return Imported{unwrap(be.backend->upload(numbers_16bit(fresh, numbers_dtype))), Access::writable, true};
    const Copy mode = be.is_cuda() || copy == Copy::always ? Copy::always : Copy::never;
    Imported in = import_array(be, fresh, mode, what, numbers_dtype);
    in.access = Access::writable;
    in.copied = true;
    return in;
  }
  const bool bfloat16_bits = is_ml_dtypes_bfloat16(obj);
  nb::object source = bfloat16_bits ? obj.attr("view")("uint16") : dlpack_source(be, obj);
  nb::ndarray<nb::ro> a;
  // Asked for writable first: nanobind refuses a read-only source (buffer protocol, or DLPack's
  // read-only flag), which is then taken read-only and stays so in every export of the view.
  Access source_access = Access::writable;
  if (nb::ndarray<> writable; nb::try_cast(source, writable, /*convert=*/false)) {
    a = nb::ndarray<nb::ro>(writable);
  } else if (nb::try_cast(source, a, /*convert=*/false)) {
    source_access = Access::read_only;
  } else {
    // nanobind swallows the producer's own refusal (e.g. torch's "Can't export tensors that require
    // gradient", numpy's BufferError for object or byte-swapped arrays): ask again so that its
    // reason, which says what to do, reaches the caller, as the TypeError every bad argument raises.
    if (nb::hasattr(source, "__dlpack__")) {
      try {
        source.attr("__dlpack__")();
      } catch (nb::python_error& refusal) {
        throw nb::type_error((std::string(what) + ": this " + nb::type_name(obj.type()).c_str() +
                              " cannot be exported (" + nb::type_name(refusal.type()).c_str() + ": " +
                              nb::str(refusal.value()).c_str() + ")").c_str());
      }
    }
    throw nb::type_error((std::string(what) + ": expected an array exporting __dlpack__ or the buffer protocol "
                          "(numpy, torch, jax, cupy) or a list of numbers, got " + nb::type_name(obj.type()).c_str()).c_str());
  }
  const std::optional<DType> known = bfloat16_bits ? DType::bfloat16 : dtype_from_dlpack(a.dtype());
  if (!known)
    raise(ErrorCode::DTypeMismatch, std::string(what) + ": dtype " + dtype_name(a.dtype()) +
                                        " is not supported: tapewise takes float32, float64, bfloat16 or "
                                        "float16");
  const DType dtype = *known;
  std::vector<std::int64_t> dims(a.ndim());
  for (std::size_t d = 0; d < a.ndim(); ++d) dims[d] = static_cast<std::int64_t>(a.shape(d));
  const Shape shape(std::move(dims));

  const bool in_place = usable_in_place(be, a.device_type(), a.device_id());
  const bool contiguous = c_contiguous(a);
  if (in_place && contiguous) {
    Buffer view = unwrap(be.backend->wrap(const_cast<void*>(a.data()), shape, dtype, keep_alive(a)));
    if (copy == Copy::always) return Imported{copy_on_backend(be, view), Access::writable, true};
    return Imported{std::move(view), source_access, false};
  }
  if (copy != Copy::never && host_accessible(a.device_type()))  // host data into a CUDA backend, or strided host data
    return Imported{unwrap(be.backend->upload(gather_host(a, dtype, shape))), Access::writable, true};
  if (!in_place)
    raise(ErrorCode::BackendMismatch,
          std::string(what) + ": the array is on " + device_name(a.device_type(), a.device_id()) +
              ", this backend is " + be.backend->describe() +
              (host_accessible(a.device_type()) ? " (pass copy=True to copy it to the device)"
                                                : " (move it to the backend's device first)"));
  raise(ErrorCode::InvalidArgument,
        std::string(what) + ": the array of shape " + shape.str() + " is not C-contiguous" +
            (host_accessible(a.device_type()) ? " (pass copy=True, or make it contiguous first)"
                                              : " (make it contiguous first, e.g. .contiguous())"));
}

nb::object export_array(const Buffer& buffer, nb::handle owner, Access access) {
  std::vector<std::size_t> shape(buffer.shape().dims.begin(), buffer.shape().dims.end());
  const nb::dlpack::dtype dtype = dlpack_dtype(buffer.dtype());
  const Backend* be = buffer.backend();
  if (be->dlpack_device_type() == kDLCPU) {
    // Host memory goes out as a numpy array (a view: numpy prints it, and every library reads it).
    // numpy has no bfloat16 of its own: its bits go out as uint16, which tapewise._arrays views as
    // ml_dtypes.bfloat16. A read-only or bfloat16 array is a tapewise._arrays.HostView, whose DLPack
    // export does what numpy's cannot (read-only memory to a consumer before DLPack 1.0, bfloat16).
    const bool bfloat16_bits = buffer.dtype() == DType::bfloat16;
    const nb::dlpack::dtype numpy_dtype = bfloat16_bits ? nb::dtype<std::uint16_t>() : dtype;
    nb::object array =
        access == Access::read_only
            ? nb::cast(nb::ndarray<nb::numpy, nb::ro>(buffer.data(), shape.size(), shape.data(), owner, nullptr,
                                                      numpy_dtype, kDLCPU, 0))
            : nb::cast(nb::ndarray<nb::numpy>(const_cast<void*>(buffer.data()), shape.size(), shape.data(), owner,
                                              nullptr, numpy_dtype, kDLCPU, 0));
    if (!bfloat16_bits && access == Access::writable) return array;
    return nb::module_::import_("tapewise._arrays").attr("host_view")(array, bfloat16_bits);
  }
  // Device memory goes out as a DLPack object for the consumer's framework to import.
  if (access == Access::read_only)
    return nb::cast(nb::ndarray<nb::array_api, nb::ro>(buffer.data(), shape.size(), shape.data(), owner, nullptr, dtype,
                                                       be->dlpack_device_type(), be->device_id()));
  return nb::cast(nb::ndarray<nb::array_api>(const_cast<void*>(buffer.data()), shape.size(), shape.data(), owner,
                                             nullptr, dtype, be->dlpack_device_type(), be->device_id()));
}

nb::object bfloat16_dlpack(nb::handle bits_array, bool read_only) {
  nb::ndarray<std::uint16_t, nb::ro, nb::device::cpu> bits;
  if (!nb::try_cast(bits_array, bits, /*convert=*/false))
    throw nb::type_error("_bfloat16_dlpack: expected a uint16 numpy array of bfloat16 bit patterns");
  std::vector<std::size_t> shape(bits.ndim());
  std::vector<std::int64_t> strides(bits.ndim());
  for (std::size_t d = 0; d < bits.ndim(); ++d) {
    shape[d] = bits.shape(d);
    strides[d] = bits.stride(d);
  }
  const nb::dlpack::dtype dtype = dlpack_dtype(DType::bfloat16);
  nb::handle owner = bits_array;  // the uint16 array, which holds the memory's owner
  if (read_only)
    return nb::cast(nb::ndarray<nb::array_api, nb::ro>(bits.data(), shape.size(), shape.data(), owner,
                                                       strides.data(), dtype, kDLCPU, 0));
  return nb::cast(nb::ndarray<nb::array_api>(const_cast<std::uint16_t*>(bits.data()), shape.size(), shape.data(),
                                             owner, strides.data(), dtype, kDLCPU, 0));
}

nb::object export_buffer(const PyBuffer& holder, const std::string& what) {
  const Buffer& buffer = holder.get(what);
  // The capsule holds a share of the memory: a release() while the array lives leaves it valid.
  auto* share = new std::shared_ptr<Buffer>(holder.memory);
  nb::capsule owner(share, [](void* p) noexcept { delete static_cast<std::shared_ptr<Buffer>*>(p); });
  return export_array(buffer, owner, holder.access);
}

const Buffer& PyBuffer::get(const std::string& what) const {
  if (!live()) raise(ErrorCode::InvalidArgument, what + ": the buffer was released");
  return *memory;
}

Buffer& PyBuffer::output(const std::string& what) {
  get(what);
  if (access == Access::read_only)
    raise(ErrorCode::InvalidArgument, what + ": the buffer views read-only memory; it cannot be an output");
  return *memory;
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (std::size_t d = 0; d < shape.dims.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape.dims[d]);
  return text + (shape.dims.size() == 1 ? ",)" : ")");  // Python's tuple spelling
}

std::string device_text(const Backend& backend) {
  return device_name(backend.dlpack_device_type(), backend.device_id());
}

std::string buffer_summary(const PyBuffer& holder) {
  if (!holder.live()) return "released";
  const Buffer& b = *holder.memory;
  return shape_text(b.shape()) + " " + tapewise::dtype_name(b.dtype()) + " on " + device_text(*b.backend()) + ", " +
         (b.borrowed() ? "borrowed" : "owned") + ", " + (holder.access == Access::read_only ? "read-only" : "writable");
}

std::vector<NodeId> node_ids(const std::vector<NodeIdArg>& ids) {
  std::vector<NodeId> out;
  out.reserve(ids.size());
  for (const NodeIdArg& id : ids) out.push_back(id.value);
  return out;
}

void check_numpy_dtype(DType dtype, const char* what) {
  if (dtype == DType::bfloat16) nb::module_::import_("tapewise._arrays").attr("require_ml_dtypes")(what);
}

nb::object host_numpy(HostArray host, const char* what) {
  check_numpy_dtype(host.dtype, what);
  auto* bytes = new std::vector<std::byte>(std::move(host.bytes));
  nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
  std::vector<std::size_t> shape(host.shape.dims.begin(), host.shape.dims.end());
  const bool bfloat16_bits = host.dtype == DType::bfloat16;  // viewed as ml_dtypes.bfloat16 by host_copy
  const nb::dlpack::dtype dtype = bfloat16_bits ? nb::dtype<std::uint16_t>() : dlpack_dtype(host.dtype);
  nb::object array = nb::cast(
      nb::ndarray<nb::numpy>(bytes->data(), shape.size(), shape.data(), owner, nullptr, dtype, kDLCPU, 0));
  return nb::module_::import_("tapewise._arrays").attr("host_copy")(array, bfloat16_bits, what);
}

Op op_from_python(const std::string& name) {
  if (auto op = tapewise::op_from_name(name)) return *op;
  std::string names;
  for (const OpInfo& info : kOps) names += std::string(names.empty() ? "" : ", ") + info.name;
  raise(ErrorCode::InvalidArgument, "unknown op '" + name + "' (the nodes are " + names + ")");
}

std::optional<DType> dtype_named(const std::string& name) {
  for (DType d : kDTypes)
    if (name == tapewise::dtype_name(d)) return d;
  return std::nullopt;
}

std::optional<std::string> dtype_name_from_python(nb::handle dtype, const char* what) {
  if (dtype.is_none()) return std::nullopt;
  const std::string text = nb::str(dtype).c_str();
  if (nb::isinstance<nb::str>(dtype) && dtype_named(text)) return text;
  // numpy's spellings ("f8", "<f4", "double", np.float64, np.dtype("f2")) and ml_dtypes.bfloat16 (which
  // registers itself with numpy) are named as numpy names them.
  try {
    const nb::object numpy = nb::module_::import_("numpy");
    return std::string(nb::str(numpy.attr("dtype")(dtype).attr("name")).c_str());
  } catch (const nb::python_error&) {
  }
  // torch.float32, torch.half, torch.bfloat16: "torch.<name>" (torch.half prints as torch.float16).
  if (text.starts_with("torch.")) return text.substr(6);
  if (nb::isinstance<nb::str>(dtype)) return text;  // an unknown name: refused below, by name
  throw nb::type_error((std::string(what) + ": dtype= takes a dtype's name (\"float32\"), a numpy or torch dtype, "
                        "or ml_dtypes.bfloat16, not " + text)
                           .c_str());
}

std::optional<std::int64_t> int64_from_python(nb::handle value, const std::string& type_error_prefix) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))
    throw nb::type_error((type_error_prefix + nb::type_name(value.type()).c_str()).c_str());
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) return std::nullopt;
  return number;
}

DType dtype_from_python(const std::string& name) {
  if (auto d = dtype_named(name)) return *d;
  raise(ErrorCode::DTypeMismatch, "dtype '" + name + "' is not float32, float64, bfloat16 or float16");
}

DType numbers_dtype_from_python(const std::optional<std::string>& name, const char* what) {
  if (!name) return DType::float32;  // as torch.tensor and jax.numpy.asarray make a list of floats
  if (auto d = dtype_named(*name)) return *d;
  raise(ErrorCode::DTypeMismatch, std::string(what) + ": dtype='" + *name +
                                      "' is not a dtype tapewise takes: \"float32\" (the default), \"float64\", "
                                      "\"bfloat16\" or \"float16\"");
}

void check_requested_dtype(const std::optional<std::string>& name, DType imported, bool from_numbers, const char* what) {
  if (!name || from_numbers || tapewise::dtype_name(imported) == *name) return;
  raise(ErrorCode::DTypeMismatch, std::string(what) + ": dtype='" + *name + "' was given for a " +
                                      tapewise::dtype_name(imported) +
                                      " array; dtype= chooses the dtype of a Python list's copy, an array keeps "
                                      "its own (convert it first, e.g. " +
                                      (*name == "bfloat16" ? std::string("x.astype(ml_dtypes.bfloat16), or torch's x.to(torch.bfloat16)")
                                                           : "x.astype(numpy." + *name + ")") + ")");
}

VjpPath path_from_python(const std::string& name) {
  if (name == "fused") return VjpPath::fused;
  if (name == "staged") return VjpPath::staged;
  raise(ErrorCode::InvalidArgument, "path '" + name + "' is not \"fused\" or \"staged\"");
}

}  // namespace tapewise::py
