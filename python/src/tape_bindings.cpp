// python/src/tape_bindings.cpp — tapewise.Tape, tapewise.Node and tapewise.Gradients: recording the 23
// nodes (one method each, generated from the op table) as Nodes that carry their tape, reading values,
// and backward passes whose gradients are exported without a copy.
#include <deque>
#include <string>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"

namespace tapewise::py {
namespace {

using namespace nb::literals;

struct PyTape {
  PyBackend be;
  Tape tape;
  // Leaves that view writable caller memory: the only values exported writable (the caller may
  // write that memory anyway). Every other value is read-only: a write would corrupt the backward.
  std::vector<bool> writable_leaf;
  explicit PyTape(const PyBackend& b) : be(b), tape(b.backend) {}
  // Leaves may view framework memory that is freed right after the tape: let queued reads finish.
  ~PyTape() {
    if (be.is_cuda()) [[maybe_unused]] Result<void> waited = be.backend->synchronize();  // no one to tell
  }
  PyTape(const PyTape&) = delete;
  PyTape& operator=(const PyTape&) = delete;

  const Node& node_checked(NodeId id) const { return *unwrap(tape.node(id)); }
  // For an id node_checked accepted.
  Access access_of(NodeId id) const {
    const std::size_t i = node_position(id);
    return i < writable_leaf.size() && writable_leaf[i] ? Access::writable : Access::read_only;
  }
};

using TapeArg = nb::pointer_and_handle<PyTape>;  // a method's self: the tape and its Python object

// tapewise.torch's regions (python/tapewise/torch/_region.py): one region call, and the values its ops record.
// Made here so that recording a node in a region is one call from Python that builds no Python object
// in Python: the region's cost per node is then the tape's, not the interpreter's.
struct PyRegion {
  nb::object tape;         // the tapewise.Tape while the region's function runs; None once it has returned
  PyTape* open = nullptr;  // tape's PyTape; nullptr once it has returned
  std::string name;
};

struct PyRegionValue {
  nb::object region;  // its PyRegion
  NodeId id = -1;
  PyRegion& owner() const { return *nb::inst_ptr<PyRegion>(region); }
};

void set_region_tape(PyRegion& r, nb::object tape) {
  if (tape.is_none()) {
    r.open = nullptr;
  } else if (nb::isinstance<PyTape>(tape)) {
    r.open = nb::inst_ptr<PyTape>(tape);
  } else {
    throw nb::type_error("a region's tape is a tapewise.Tape or None");
  }
  r.tape = std::move(tape);
}

// A new value of x's class (tapewise.torch's subclass) for node `id` of x's region.
nb::object value_like(nb::handle x, const PyRegionValue& of, NodeId id) {
  nb::object value = nb::inst_alloc(x.type());
  new (nb::inst_ptr<PyRegionValue>(value)) PyRegionValue{of.region, id};
  nb::inst_mark_ready(value);
  return value;
}

// Records node op_index of x (scalars s0, s1) on x's region's tape: the new value, or None where the
// region has returned (tapewise.torch then raises the error, naming its op).
nb::object region_unary(int op_index, nb::pointer_and_handle<PyRegionValue> x, double s0, double s1) {
  PyRegion& r = x.p->owner();
  if (!r.open) return nb::none();
  const NodeId id = unwrap(r.open->tape.apply(static_cast<Op>(op_index), {&x.p->id, 1}, {s0, s1}));
  return value_like(x.h, *x.p, id);
}

// The same for a node of two inputs: None also where a and b belong to different regions.
nb::object region_binary(int op_index, nb::pointer_and_handle<PyRegionValue> a, const PyRegionValue& b) {
  PyRegion& r = a.p->owner();
  if (!r.open || !a.p->region.is(b.region)) return nb::none();
  const NodeId ids[2] = {a.p->id, b.id};
  const NodeId id = unwrap(r.open->tape.apply(static_cast<Op>(op_index), ids, {}));
  return value_like(a.h, *a.p, id);
}

void bind_region(nb::module_& m) {
  nb::class_<PyRegion>(m, "_Region", "One call of a tapewise.torch region: the tape its ops record onto (None once\n"
                                      "the function has returned) and the region's name.")
      .def("__init__", [](PyRegion* r, nb::object tape, std::string name) {
             new (r) PyRegion{};
             r->name = std::move(name);
             set_region_tape(*r, std::move(tape));
           }, "tape"_a.none(), "name"_a)
      .def_prop_rw("tape", [](const PyRegion& r) { return r.tape; }, &set_region_tape, nb::for_setter("tape"_a.none()))
      .def_prop_ro("name", [](const PyRegion& r) { return r.name; });
  nb::class_<PyRegionValue>(m, "_RegionValue", "A node of a region's tape (tapewise.torch derives the class its ops take).")
      .def("__init__", [](PyRegionValue* v, nb::handle region, NodeIdArg id) {
             if (!nb::isinstance<PyRegion>(region)) throw nb::type_error("a region value's region is a tapewise._tapewise._Region");
             new (v) PyRegionValue{nb::borrow(region), id.value};
           }, "region"_a, "id"_a)
      .def_prop_ro("_region", [](const PyRegionValue& v) { return v.region; })
      .def_prop_ro("_id", [](const PyRegionValue& v) { return v.id; })
      .def_prop_ro("_index", [](const PyRegionValue& v) { return node_position(v.id); });
  m.def("_region_unary", &region_unary, "op_index"_a, "x"_a, "s0"_a, "s1"_a,
        "Records a node of one input on x's region's tape: its value, or None where the region has returned.");
  m.def("_region_binary", &region_binary, "op_index"_a, "a"_a, "b"_a,
        "Records a node of two inputs on their region's tape: its value, or None where the region has returned\n"
        "or a and b belong to different regions.");
}

// Gradients as Python sees them. A gradient handed out is moved into a Buffer holder first, so the
// array owns it (no copy) and later reads of the same id return views of the same memory. A holder
// released by the caller (grads.buffer(id).release()) takes its gradient out of this object.
struct PyGradients {
  Gradients grads;
  nb::object tape;                // the tapewise.Tape of the backward (ids() hands out its Nodes)
  std::vector<nb::object> taken;  // by position: the holder (a tapewise.Buffer) of each gradient handed out

  PyGradients(Gradients g, nb::object of, std::size_t slots) : grads(std::move(g)), tape(std::move(of)), taken(slots) {}
  // Move-only, said explicitly: std::vector<std::optional<Buffer>> claims to be copyable.
  PyGradients(const PyGradients&) = delete;
  PyGradients& operator=(const PyGradients&) = delete;
  PyGradients(PyGradients&&) = default;
  PyGradients& operator=(PyGradients&&) = default;

  // Whether id is a node of the backward's tape (recorded before it): another tape's is not.
  bool in_range(NodeId id) const { return grads.check_id(id).has_value(); }
  NodeId id_at(std::size_t position) const {
    return (static_cast<NodeId>(grads.tape_serial()) << 32) + static_cast<NodeId>(position);
  }
  bool released(NodeId id) const {
    if (!in_range(id)) return false;
    const nb::object& slot = taken[node_position(id)];
    return slot.is_valid() && !nb::cast<const PyBuffer&>(slot).live();
  }
  bool has(NodeId id) const {
    if (!in_range(id)) return false;
    const nb::object& slot = taken[node_position(id)];
    return slot.is_valid() ? nb::cast<const PyBuffer&>(slot).live() : grads.has(id);
  }
  // The holder of a gradient that is there; InvalidNodeIdError for another tape's node, KeyError
  // otherwise, saying whether it was released.
  nb::object holder(NodeId id) {
    unwrap(grads.check_id(id));
    if (!has(id))
      throw nb::key_error(("node #" + std::to_string(node_position(id)) +
                           (released(id) ? "'s gradient was released" : " received no gradient")).c_str());
    nb::object& slot = taken[node_position(id)];
    if (!slot.is_valid()) slot = nb::cast(PyBuffer{grads.take(id), Access::writable});
    return slot;
  }
  nb::object array(NodeId id) { return export_buffer(nb::cast<const PyBuffer&>(holder(id)), "gradient"); }
};

std::deque<std::string>& docs() {  // stable storage for generated docstrings
  static std::deque<std::string> d;
  return d;
}

const char* node_doc(const OpInfo& info) {
  std::string args = info.arity == 2 ? "a, b" : "x";
  for (const char* s : info.scalar_names)
    if (s[0]) args += std::string(", ") + s;
  std::string doc = std::string(info.name) + "(" + args + ") -> Node: records the node " + info.name + "(" + args +
                    ") and returns it (scalars are rounded once to the dtype).\n"
                    "Inputs: nodes of one shape and dtype on this tape. VJP (the spec's staging, fused into one "
                    "kernel): " + info.staged;
  docs().push_back(std::move(doc));
  return docs().back().c_str();
}

nb::object record(TapeArg t, Op op, std::initializer_list<NodeIdArg> parents, Scalars s) {
  NodeId ids[2] = {-1, -1};
  std::size_t count = 0;
  for (const NodeIdArg& p : parents) ids[count++] = p.value;
  return make_node(t.h, unwrap(t.p->tape.apply(op, {ids, count}, s)));
}

void bind_nodes(nb::class_<PyTape>& cls) {
  for (const OpInfo& info : kOps) {
    const Op op = info.op;
    const char* doc = node_doc(info);
    if (info.arity == 2) {
      cls.def(info.name, [op](TapeArg t, NodeIdArg a, NodeIdArg b) { return record(t, op, {a, b}, {}); }, "a"_a, "b"_a, doc);
    } else if (info.scalar_count() == 0) {
      cls.def(info.name, [op](TapeArg t, NodeIdArg x) { return record(t, op, {x}, {}); }, "x"_a, doc);
    } else if (info.scalar_count() == 1) {
      cls.def(info.name, [op](TapeArg t, NodeIdArg x, double s0) { return record(t, op, {x}, {s0, 0.0}); }, "x"_a,
              nb::arg(info.scalar_names[0]), doc);
    } else {
      cls.def(info.name, [op](TapeArg t, NodeIdArg x, double s0, double s1) { return record(t, op, {x}, {s0, s1}); },
              "x"_a, nb::arg(info.scalar_names[0]), nb::arg(info.scalar_names[1]), doc);
    }
  }
  cls.def("safe_log", [](TapeArg t, NodeIdArg x, double eps) { return record(t, Op::safeLog, {x}, {eps, 0.0}); },
          "x"_a, "eps"_a, "Alias of safeLog.");
}

nb::object apply(TapeArg self, const std::string& op_name_, const std::vector<NodeIdArg>& parents,
                 const std::vector<double>& scalars) {
  PyTape& t = *self.p;
  const Op op = op_from_python(op_name_);
  const OpInfo& info = op_info(op);
  if (static_cast<int>(scalars.size()) != info.scalar_count())
    raise(ErrorCode::InvalidArgument, std::string("apply: ") + info.name + " takes " +
                                          std::to_string(info.scalar_count()) + " scalar(s), got " +
                                          std::to_string(scalars.size()));
  const Scalars s{scalars.size() > 0 ? scalars[0] : 0.0, scalars.size() > 1 ? scalars[1] : 0.0};
  return make_node(self.h, unwrap(t.tape.apply(op, node_ids(parents), s)));
}

nb::object leaf(TapeArg self, nb::handle array, bool requires_grad, bool copy, nb::handle dtype_arg) {
  PyTape& t = *self.p;
  const std::optional<std::string> dtype = dtype_name_from_python(dtype_arg, "leaf");
  const bool numbers = is_python_numbers(array);
  Imported in = import_array(t.be, array, copy ? Copy::always : Copy::never, "leaf",
                             numbers_dtype_from_python(dtype, "leaf"));
  check_requested_dtype(dtype, in.buffer.dtype(), numbers, "leaf");
  const bool writable = !in.copied && in.access == Access::writable;
  t.writable_leaf.reserve(t.tape.size() + 1);  // so that recording the id below cannot fail
  const NodeId id = unwrap(t.tape.leaf(std::move(in.buffer), requires_grad));
  t.writable_leaf.resize(node_position(id) + 1, false);
  t.writable_leaf[node_position(id)] = writable;
  return make_node(self.h, id);
}

nb::object value(nb::handle self, NodeIdArg id) {
  PyTape& t = nb::cast<PyTape&>(self);
  t.node_checked(id.value);
  const Buffer* b = unwrap(t.tape.value_buffer(id.value));
  t.be.settle();
  return export_array(*b, self, t.access_of(id.value));
}

// A host array of 1.0 in `v`'s shape and dtype: the default seed. Each element is the dtype's bits of
// 1.0, written through its type (a 16-bit dtype's 1.0 is not float32's high half for float16).
HostArray ones_like(const Buffer& v) {
  HostArray ones;
  ones.shape = v.shape();
  ones.dtype = v.dtype();
  ones.bytes.resize(v.bytes());
  auto fill = [&](auto one) {
    auto* out = reinterpret_cast<decltype(one)*>(ones.bytes.data());
    for (std::int64_t i = 0; i < v.numel(); ++i) out[i] = one;
  };
  switch (v.dtype()) {
    case DType::float32: fill(1.0f); break;
    case DType::float64: fill(1.0); break;
    case DType::bfloat16: fill(bfloat16(1.0f).bits); break;
    case DType::float16: fill(float16(1.0f).bits); break;
  }
  return ones;
}

// One backward entry point for both conventions; seed None means ones of the output's shape, wanted
// None every node's gradient.
PyGradients run_backward(TapeArg self, NodeId out, nb::handle seed, const std::string& path_name, bool dense,
                         const std::optional<std::vector<NodeIdArg>>& wanted) {
  PyTape& t = *self.p;
  const VjpPath path = path_from_python(path_name);
  const std::vector<NodeId> ids = wanted ? node_ids(*wanted) : std::vector<NodeId>{};
  auto run = [&](const auto& s) {
    if (!wanted) return dense ? t.tape.backward_dense(out, s, path) : t.tape.backward(out, s, path);
    const std::span<const NodeId> only(ids);
    return dense ? t.tape.backward_dense(out, s, only, path) : t.tape.backward(out, s, only, path);
  };
  Result<Gradients> grads;
  if (seed.is_none()) {
    const Buffer& v = t.node_checked(out).value;
    grads = run(ones_like(v));
  } else {
    // A seed given as a list takes the output's dtype, as ones would.
    const DType out_dtype = t.node_checked(out).value.dtype();
    Buffer s = import_array(t.be, seed, Copy::if_needed, "seed", out_dtype).buffer;
    grads = run(s);
    // The seed's memory may be released once we return: let the backward finish reading it.
    t.be.settle();
  }
  Gradients g = unwrap(std::move(grads));
  const std::size_t slots = g.size();
  t.be.settle();
  return PyGradients(std::move(g), nb::borrow(self.h), slots);
}

nb::tuple shape_of(const Buffer& b) {
  nb::list dims;
  for (std::int64_t d : b.shape().dims) dims.append(d);
  return nb::tuple(dims);
}

nb::list ids_of(const PyGradients& g) {
  nb::list ids;
  for (std::size_t i = 0; i < g.taken.size(); ++i)
    if (g.has(g.id_at(i))) ids.append(make_node(g.tape, g.id_at(i)));
  return ids;
}

constexpr const char* kBackwardDoc =
    "Reverse pass from node `out` with upstream gradient `seed` (an array of the output's shape and dtype,\n"
    "used in place like a leaf, or copied when it is not on the backend's device or not contiguous;\n"
    "a list of numbers is copied in the output's dtype; None: ones). path: \"fused\" (one kernel per\n"
    "node, the default) or \"staged\" (the spec's stages); both give results\n"
    "identical up to NaN: equal bits, or both NaN (a NaN's sign and payload may differ between the paths).\n"
    "wanted: None (every node's gradient) or the nodes whose gradients to return: a node's VJP then runs\n"
    "only when it leads to one of them, and a tape program keeps the others in registers; the gradients\n"
    "returned are the full backward's, identical up to NaN; a node not on this tape raises InvalidNodeIdError.\n"
    "Returns a Gradients object; its arrays are ready to read (see Backend for the stream rule). On error the nodes, ids and values are as before; only\n"
    "`pending` may change: a backward whose arguments were valid but that failed later (e.g.\n"
    "OutOfMemoryError) on path \"staged\", or with an output of more than program_threshold elements,\n"
    "had already run the pending forwards, so `pending` is then 0.";

constexpr const char* kTapeDoc =
    "A reverse-mode tape on one backend. Nodes are recorded by method (tape.sin(x), tape.max(a, b),\n"
    "tape.clamp(x, lo, hi), ...), each returning a tapewise.Node of this tape; every method taking a node\n"
    "also takes its id, int(node) (a bool is not an id: TypeError). A node of another tape is refused\n"
    "with InvalidNodeIdError naming both tapes' serials, the tape left as it was. Every method\n"
    "either succeeds or raises (a TapewiseError, or TypeError for an argument of the wrong type) and\n"
    "leaves the tape's nodes, ids, values and requires_grad as they were. The one state a failing call\n"
    "can change is `pending`: a call that flushes before it fails (a backward, see there; a value or\n"
    "host read; recording a node of more than program_threshold elements) has still run the pending\n"
    "forwards. Not thread-safe.";

std::string plural(std::size_t n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

std::string tape_repr(const PyTape& t) {
  return "<tapewise.Tape " + std::to_string(t.tape.serial()) + " on " + device_text(*t.be.backend) + ": " +
         plural(t.tape.size(), "node") + ", " + std::to_string(t.tape.pending()) + " pending>";
}

// The gradient of a node that has one, wherever it is now (still in grads, or in its holder).
const Buffer& gradient_buffer(const PyGradients& g, NodeId id) {
  const nb::object& slot = g.taken[node_position(id)];
  return slot.is_valid() ? *nb::cast<const PyBuffer&>(slot).memory : *g.grads.get(id);
}

// e.g. "<tapewise.Gradients of tape 4, 2 of 5 nodes: #0, #2, float64 (3,)>" (nodes by position); past 8
// nodes the list shows the first and last 3, and dtype and shape are named only when every gradient has
// the same ones.
std::string gradients_repr(const PyGradients& g) {
  std::vector<NodeId> ids;
  for (std::size_t i = 0; i < g.taken.size(); ++i)
    if (g.has(g.id_at(i))) ids.push_back(g.id_at(i));
  std::string text = "<tapewise.Gradients of tape " + std::to_string(g.grads.tape_serial()) + ", " +
                     std::to_string(ids.size()) + " of " + plural(g.taken.size(), "node");
  if (ids.empty()) return text + ">";
  constexpr std::size_t kShown = 8, kEnds = 3;
  text += ": [";
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids.size() > kShown && k == kEnds) {
      text += ", ...";
      k = ids.size() - kEnds - 1;
      continue;
    }
    text += (k ? ", #" : "#") + std::to_string(node_position(ids[k]));
  }
  text += "]";
  const Buffer& first = gradient_buffer(g, ids[0]);
  bool uniform = true;
  for (NodeId id : ids) {
    const Buffer& b = gradient_buffer(g, id);
    uniform = uniform && b.dtype() == first.dtype() && b.shape() == first.shape();
  }
  if (uniform) text += std::string(", ") + dtype_name(first.dtype()) + " " + shape_text(first.shape());
  return text + ">";
}

nb::object gradient_host(PyGradients& g, NodeIdArg id) {
  nb::object holder = g.holder(id.value);
  const Buffer& b = nb::cast<const PyBuffer&>(holder).get("gradient");
  check_numpy_dtype(b.dtype(), "Gradients.host");
  return host_numpy(unwrap(const_cast<Backend*>(b.backend())->download(b)), "Gradients.host");
}

// e.g. "<tapewise.Node #3 of tape 7: float32 (2, 3)>".
std::string node_repr(const PyNode& n) {
  const PyTape& t = nb::cast<const PyTape&>(n.tape);
  std::string text = "<tapewise.Node #" + std::to_string(node_position(n.id)) + " of tape " + std::to_string(node_tape(n.id));
  if (auto node = t.tape.node(n.id)) text += std::string(": ") + dtype_name((*node)->value.dtype()) + " " + shape_text((*node)->value.shape());
  return text + ">";
}

constexpr const char* kNodeDoc =
    "A node of one tape, as Tape's methods return it (tape.leaf, tape.sin, ...): pass it to that tape's\n"
    "methods and to its Gradients. It holds its tape (node.tape), so it keeps the tape alive; any other\n"
    "tape refuses it with InvalidNodeIdError naming both tapes. A Node is not a number: node + node and\n"
    "the other operators raise TypeError (record tape.add(a, b)). int(node) and node.id give its id\n"
    "(serial * 2**32 + position), which every method also takes; node.index its position on the tape.\n"
    "Nodes are equal when their ids are (a Node also equals its id), and hash as their id.";

void bind_node(nb::module_& m) {
  nb::class_<PyNode>(m, "Node", kNodeDoc)
      .def_prop_ro("tape", [](const PyNode& n) { return n.tape; }, "The tape the node is on.")
      .def_prop_ro("id", [](const PyNode& n) { return n.id; }, "The node's id: its tape's serial * 2**32 + its position.")
      .def_prop_ro("index", [](const PyNode& n) { return node_position(n.id); },
                   "The node's position on its tape: 0 for the first node recorded.")
      .def_prop_ro("shape", [](const PyNode& n) { return shape_of(nb::cast<const PyTape&>(n.tape).node_checked(n.id).value); },
                   "The node's shape.")
      .def_prop_ro("dtype", [](const PyNode& n) {
             return std::string(dtype_name(nb::cast<const PyTape&>(n.tape).node_checked(n.id).value.dtype())); },
           "The node's dtype.")
      .def("__int__", [](const PyNode& n) { return n.id; })
      .def("__hash__", [](const PyNode& n) { return nb::hash(nb::int_(n.id)); })
      .def("__eq__", [](const PyNode& n, nb::handle other) -> nb::object {
             if (nb::isinstance<PyNode>(other)) return nb::bool_(nb::inst_ptr<PyNode>(other)->id == n.id);
             if (PyLong_Check(other.ptr()) && !PyBool_Check(other.ptr())) return nb::bool_(nb::int_(n.id).equal(other));
             return nb::borrow(Py_NotImplemented); })
      .def("__repr__", &node_repr);
}

void bind_gradients(nb::module_& m) {
  nb::class_<PyGradients>(m, "Gradients",
      "The gradients of one backward pass, by node: grads[x], grads.get(x), x in grads (a Node of the tape,\n"
      "or its id; a node of another tape raises InvalidNodeIdError naming both tapes, and is never in them). Each array\n"
      "(a numpy array on the CPU backend, a DLPack object on CUDA) is exported without a copy, is\n"
      "writable, and shares its memory with the gradient's Buffer (grads.buffer(id)):\n"
      "the memory lives while either does, so it outlives this object. Releasing\n"
      "that Buffer takes the gradient out of this object (grads[id] then raises KeyError); arrays read\n"
      "before the release stay valid.")
      .def("__repr__", &gradients_repr)
      .def("__getitem__", [](PyGradients& g, NodeIdArg id) { return g.array(id.value); }, "id"_a)
      .def("get", [](PyGradients& g, NodeIdArg id, nb::object fallback) -> nb::object {
             unwrap(g.grads.check_id(id.value));
             return g.has(id.value) ? g.array(id.value) : fallback; },
           "id"_a, "default"_a = nb::none(),
           "The gradient of node `id`, or `default` when it has none (a node of another tape raises).")
      .def("buffer", [](PyGradients& g, NodeIdArg id) { return g.holder(id.value); }, "id"_a,
           "The gradient as a tapewise.Buffer (no copy).")
      .def("host", &gradient_host, "id"_a,
           "A host copy of the gradient as a new numpy array (from any backend); for bfloat16 an ml_dtypes.bfloat16\n"
           "array, TypeError without ml_dtypes (torch.from_dlpack(grads[id]) reads it then).")
      .def("__contains__", [](const PyGradients& g, NodeIdArg id) { return g.has(id.value); }, "id"_a,
           "Whether node `id` received a gradient (False for a node of another tape).")
      .def("__len__", [](const PyGradients& g) { return nb::len(ids_of(g)); }, "How many nodes have a gradient.")
      .def("__iter__", [](const PyGradients& g) { return nb::iter(ids_of(g)); }, "The Nodes with a gradient, in recording order.")
      .def("ids", &ids_of, "The Nodes with a gradient, in recording order.")
      .def_prop_ro("tape", [](const PyGradients& g) { return g.tape; }, "The tape of the backward pass.")
      .def_prop_ro("slots", [](const PyGradients& g) { return g.taken.size(); },
                   "The tape's node count at the backward pass (positions 0 .. slots-1).");
}

}  // namespace

nb::object make_node(nb::handle tape, NodeId id) { return nb::cast(PyNode{nb::borrow(tape), id}); }

// One field of the tape's options as a read-write property (Tape::set_options checks what is set). An
// int, never a bool: True is no element count.
void bind_tape_option(nb::class_<PyTape>& cls, const char* name, std::int64_t TapeOptions::*field, const char* doc) {
  cls.def_prop_rw(
      name, [field](const PyTape& t) { return t.tape.options().*field; },
      [field, name](PyTape& t, nb::handle value) {
        const auto number = int64_from_python(value, std::string(name) + " takes an int, not ");
        if (!number)
          raise(ErrorCode::InvalidArgument, std::string(name) + " " + nb::str(value).c_str() + " does not fit in 64 bits");
        TapeOptions options = t.tape.options();
        options.*field = *number;
        unwrap(t.tape.set_options(options));
      },
      doc);
}

void bind_tape(nb::module_& m) {
  nb::class_<PyTape> tape(m, "Tape", kTapeDoc);
  tape.def(nb::init<const PyBackend&>(), "backend"_a, "An empty tape on `backend` (tapewise.cpu() or tapewise.cuda()).")
      .def("__repr__", &tape_repr)
      .def_prop_ro("backend", [](const PyTape& t) { return t.be; }, "The tape's backend.")
      .def("__len__", [](const PyTape& t) { return t.tape.size(); }, "The number of nodes (leaves included).")
      .def_prop_ro("serial", [](const PyTape& t) { return t.tape.serial(); },
                   "The tape's serial: a number no other tape of the process has, carried by its nodes' ids and\n"
                   "named in errors (an id is serial * 2**32 + position).")
      .def("nodes", [](TapeArg t) {
             nb::list nodes;
             for (std::size_t i = 0; i < t.p->tape.size(); ++i) nodes.append(make_node(t.h, t.p->tape.id_at(i)));
             return nodes; },
           "Every node of the tape, in recording order (nodes()[i].index == i).")
      .def_prop_ro("pending", [](const PyTape& t) { return t.tape.pending(); },
                   "Small nodes whose forward is deferred into the next tape program (run by flush(), value(),\n"
                   "backward(), or recording a larger node).")
      .def("flush", [](const PyTape& t) { unwrap(t.tape.flush()); }, "Runs the pending nodes now (one program).")
      .def("leaf", &leaf, "array"_a, "requires_grad"_a = true, "copy"_a = false, "dtype"_a = nb::none(),
           "Records `array` as a leaf and returns its Node. Any object exporting __dlpack__ or the buffer\n"
           "protocol (numpy, torch, jax, cupy), float32, float64, bfloat16 or float16, C-contiguous, on the\n"
           "backend's device (host memory for the CPU backend) is used in place, without a copy: it must\n"
           "stay unchanged while the tape lives (the tape keeps the object alive), and value(id) is\n"
           "writable only when the array is. copy=True copies it instead (value(id) is then read-only),\n"
           "also from host memory into a CUDA backend, and from a non-contiguous host array. Anything else\n"
           "raises a TapewiseError naming what is wrong (DTypeMismatchError, BackendMismatchError,\n"
           "InvalidArgumentError, OutOfMemoryError); an object that is not an array raises TypeError.\n"
           "A Python float or (nested) list of numbers is always copied (whatever `copy` says: a list has no\n"
           "memory to view), as dtype: \"float32\" (the default, as torch.tensor makes), \"float64\",\n"
           "\"bfloat16\" or \"float16\" (each number rounded to float32, then to 16 bits); its value is\n"
           "read-only; strings or ragged lists raise TypeError, another dtype DTypeMismatchError.\n"
           "An array keeps its own dtype: a dtype= that differs from it raises DTypeMismatchError.")
      .def("apply", &apply, "op"_a, "parents"_a, "scalars"_a = std::vector<double>{},
           "Records node `op` (its name, e.g. \"clamp\") of `parents` (nodes of this tape) with `scalars` (floats)\n"
           "and returns its Node.")
      .def("value", &value, "id"_a,
           "The node's value, no copy: on the CPU backend a numpy array (a view of the tape's memory), on\n"
           "CUDA an object exporting __dlpack__ and __dlpack_device__; either way numpy.asarray(v) (host),\n"
           "torch.from_dlpack(v), jax.dlpack.from_dlpack(v) read it. bfloat16 on the CPU is an ml_dtypes.bfloat16 array, or without ml_dtypes a\n"
           "DLPack-only object (torch.from_dlpack(v) reads it, numpy.asarray raises).\n"
           "It keeps the tape alive. Read-only (the buffer protocol refuses writes, versioned DLPack\n"
           "capsules carry the read-only flag), except for a leaf that views writable caller memory.\n"
           "Flushes pending nodes first.")
      .def("host", [](const PyTape& t, NodeIdArg id) {
             check_numpy_dtype(t.node_checked(id.value).value.dtype(), "Tape.host");
             return host_numpy(unwrap(t.tape.value(id.value)), "Tape.host"); }, "id"_a,
           "A host copy of the node's value as a new numpy array (from any backend); bfloat16 as ml_dtypes.bfloat16,\n"
           "and TypeError without ml_dtypes (read it with torch.from_dlpack(tape.value(id)) instead).")
      .def("shape", [](const PyTape& t, NodeIdArg id) { return shape_of(t.node_checked(id.value).value); }, "id"_a,
           "The node's shape.")
      .def("dtype", [](const PyTape& t, NodeIdArg id) {
             return std::string(dtype_name(t.node_checked(id.value).value.dtype())); },
           "id"_a, "The node's dtype: \"float32\", \"float64\", \"bfloat16\" or \"float16\".")
      .def("backward", [](TapeArg t, NodeIdArg out, nb::handle seed, const std::string& path,
                          const std::optional<std::vector<NodeIdArg>>& wanted) {
             return run_backward(t, out.value, seed, path, false, wanted); },
           "out"_a, "seed"_a = nb::none(), "path"_a = "fused", "wanted"_a = nb::none(),
           (std::string(kBackwardDoc) + "\nSparse (training) convention: only nodes reachable from `out` that "
            "require grad get a gradient; the first contribution is kept bit-exact, later ones add.").c_str())
      .def("backward_dense", [](TapeArg t, NodeIdArg out, nb::handle seed, const std::string& path,
                                const std::optional<std::vector<NodeIdArg>>& wanted) {
             return run_backward(t, out.value, seed, path, true, wanted); },
           "out"_a, "seed"_a = nb::none(), "path"_a = "fused", "wanted"_a = nb::none(),
           (std::string(kBackwardDoc) + "\nDense convention: every node that requires grad gets a gradient, "
            "starting from +0.").c_str());
  bind_tape_option(tape, "program_threshold", &TapeOptions::program_threshold,
                   "Nodes of at most this many elements are recorded as a tape program (deferred, batched into one\n"
                   "kernel); 0 turns programs off. Default 2**26 on CUDA, 16 on the CPU backend (where a node's own loop wins\n"
                   "from about 32 elements up). A negative count raises InvalidArgumentError.");
  bind_tape_option(tape, "max_pending_nodes", &TapeOptions::max_pending_nodes,
                   "At most this many nodes wait for their forward; recording one more flushes first (1 .. 65536,\n"
                   "default 4096, so a backward finds a tape of that many nodes pending and stores only the values it\n"
                   "reads). Out of range: InvalidArgumentError.");
  bind_nodes(tape);
  bind_node(m);
  bind_gradients(m);
  bind_region(m);
}

}  // namespace tapewise::py
