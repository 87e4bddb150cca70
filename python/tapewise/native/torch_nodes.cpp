// tapewise/native/torch_nodes.cpp — tapewise.torch's per-node path in C++: each node's forward
// records a C++ autograd node, as PyTorch's own ops do, so that a node costs PyTorch what one of its
// ops does: no Python autograd.Function, no Python in the backward. tapewise.torch builds this file
// against the installed PyTorch on first use (torch.utils.cpp_extension, cached; tapewise/torch/_native.py,
// _load_native) and calls unary/binary below; the kernels are tapewise's, reached through the table of
// node_kernels.h. Forward and backward keep the Python path's rules (tapewise/torch/_nodes.py, _UnaryNode and
// _BinaryNode).
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/core/stack.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include "node_kernels.h"

namespace {

namespace py = pybind11;
using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

const tapewise_node_kernels* kernels = nullptr;
// tapewise.torch's _refuse(op_index, *inputs): raises the Python path's error for inputs this path
// does not take (its messages are the module's). Never released: it outlives the interpreter's exit.
PyObject* refuse = nullptr;
std::array<std::int64_t, 2> tie_ops{-1, -1};  // max and min: max(a, a) passes g once, as the tape does

int dtype_code(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return kernels->dtype_float32;
    case at::kDouble: return kernels->dtype_float64;
    case at::kBFloat16: return kernels->dtype_bfloat16;
    case at::kHalf: return kernels->dtype_float16;
    default: return -1;
  }
}

bool supported(const at::Tensor& t) {
  return t.defined() && dtype_code(t.scalar_type()) >= 0 && (t.is_cpu() || t.is_cuda());
}

[[noreturn]] void refuse_inputs(std::int64_t op, const at::Tensor& a, const at::Tensor* b) {
  py::gil_scoped_acquire gil;
  py::handle{refuse}(op, a, b ? py::cast(*b) : py::none());
  throw std::logic_error("tapewise.torch: the native node refused inputs that the Python path takes");
}

tapewise_node_place place_of(const at::Tensor& t) {
  if (!t.is_cuda()) return {0, 0, nullptr};
  // PyTorch's current stream on the tensor's device: the stream a native op would run on, and the one
  // the autograd engine makes current again for this node's backward.
  const c10::Stream stream = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(t.device());
  return {1, t.get_device(), stream.native_handle()};
}

void check(int status, const char* error) {
  if (status != 0) throw std::runtime_error(std::string("tapewise.torch: ") + error);
}

void require_init() {
  if (kernels == nullptr) throw std::runtime_error("tapewise.torch: the native nodes were not initialised (init)");
}

void forward_kernel(std::int64_t op, double s0, double s1, const at::Tensor& a, const at::Tensor* b,
                    const at::Tensor& out) {
  if (a.numel() == 0) return;  // nothing to compute (and an empty tensor may have no address)
  char error[512] = "";
  check(kernels->forward(place_of(a), static_cast<int>(op), s0, s1, a.const_data_ptr(),
                         b ? b->const_data_ptr() : nullptr, out.mutable_data_ptr(), a.numel(),
                         dtype_code(a.scalar_type()), error, sizeof error),
        error);
}

void vjp_kernel(std::int64_t op, double s0, double s1, const at::Tensor& a, const at::Tensor* b, const at::Tensor& g,
                const at::Tensor& da, const at::Tensor* db) {
  if (a.numel() == 0) return;
  char error[512] = "";
  check(kernels->vjp(place_of(a), static_cast<int>(op), s0, s1, a.const_data_ptr(), b ? b->const_data_ptr() : nullptr,
                     g.const_data_ptr(), da.mutable_data_ptr(), db ? db->mutable_data_ptr() : nullptr, a.numel(),
                     dtype_code(a.scalar_type()), error, sizeof error),
        error);
}

// The upstream gradient as contiguous memory of the node's dtype (sum()'s backward hands an expanded,
// stride-0 one); no work when it already is.
at::Tensor upstream(const at::Tensor& g, const at::Tensor& like) {
  return (g.scalar_type() == like.scalar_type() ? g : g.to(like.scalar_type())).contiguous();
}

// What autograd's edges point with: std::shared_ptr<Node> in the torch of 2025 (2.11 among them),
// c10::intrusive_ptr<Node> later (2.15). A shared_ptr node is deleted by deleteNode, as PyTorch's own
// are, so that freeing a long chain of nodes does not recurse once per node (found by argument-dependent
// lookup, so that a torch without it never names it).
using NodePointer = decltype(std::declval<torch::autograd::Edge>().function);

template <class NodeType, class... Args>
auto new_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePointer, std::shared_ptr<torch::autograd::Node>>)
    return std::shared_ptr<NodeType>(new NodeType(std::forward<Args>(args)...),
                                     [](NodeType* node) { deleteNode(node); });
  else
    return c10::make_intrusive<NodeType>(std::forward<Args>(args)...);
}

// Under create_graph, the gradients are outputs of an Error node (tapewise.torch._nodes'
// SECOND_DERIVATIVE_ERROR's words) whose edges are the backward node's own (to its inputs) and the
// upstream gradient's: differentiating them with respect to anything they depend on raises. tapewise
// defines first derivatives only. (once_differentiable's edges go to fresh leaves, and only when the
// upstream gradient requires grad: a Hessian, whose seed does not, reads zeros through it.)
variable_list differentiable_once(const torch::autograd::Node& backward, variable_list grads, const at::Tensor& g) {
  if (!at::GradMode::is_enabled()) return grads;
  torch::autograd::edge_list edges = backward.next_edges();
  if (g.requires_grad()) edges.push_back(torch::autograd::impl::gradient_edge(g));
  const auto error = new_node<torch::autograd::Error>(
      "tapewise.torch: trying to differentiate twice a tapewise node: its gradient is differentiable once "
      "(once_differentiable's rule, stricter), since tapewise defines first derivatives only: no second "
      "derivative, Hessian or double backward goes through tapewise.torch",
      std::move(edges));
  for (const at::Tensor& v : grads)
    if (v.defined()) torch::autograd::set_history(v, error);
  return grads;
}

// Whether a tensor is plain memory these nodes can run on: a CPU or CUDA tensor with storage, no
// torch.func wrapper, no fake or Python-dispatched tensor, no dispatch mode (fake tensors, tracing) or
// torch.func transform active, no forward-mode tangent. Anything else goes through tapewise.torch's
// custom ops (the ops fall back to them when unary/binary return None), which the dispatcher routes.
bool plain(const at::Tensor& t) {
  static const c10::DispatchKeySet routed{c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                                          c10::DispatchKey::FuncTorchGradWrapper,
                                          c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::Functionalize};
  if (!t.defined() || !(t.is_cpu() || t.is_cuda()) || !t.has_storage() || t.key_set().has_any(routed)) return false;
  if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::Python) ||
      c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode))
    return false;
  // A dual tensor has autograd metadata; most tensors without requires_grad have none, and skip the
  // forward-gradient lookup (a virtual call and a lock).
  return t.unsafeGetTensorImpl()->autograd_meta() == nullptr || !t._fw_grad(/*level=*/0).defined();
}

// The backward nodes, written as PyTorch's own generated ones are (a Node holding SavedVariables, its
// edges set by the forward), not as a torch::autograd::Function, whose generic context costs each
// call a hash map of saved fields and a wrapping of every argument.
struct UnaryNodeBackward : torch::autograd::Node {
  SavedVariable x;
  std::int64_t op = 0;
  double s0 = 0, s1 = 0;

  std::string name() const override { return "tapewise::UnaryNodeBackward"; }
  void release_variables() override { x.reset_data(); }

  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    const at::Tensor input = x.unpack();  // raises PyTorch's in-place error if x changed since
    variable_list result(1);
    {
      const at::AutoGradMode no_grad(false);
      const at::Tensor g = upstream(grads[0], input);
      result[0] = at::empty_like(input);
      vjp_kernel(op, s0, s1, input, nullptr, g, result[0], nullptr);
    }
    return differentiable_once(*this, std::move(result), grads[0]);
  }
};

struct BinaryNodeBackward : torch::autograd::Node {
  SavedVariable a, b;
  std::int64_t op = 0;
  bool same_input = false;

  std::string name() const override { return "tapewise::BinaryNodeBackward"; }
  void release_variables() override {
    a.reset_data();
    b.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    const at::Tensor left = a.unpack(), right = b.unpack();
    variable_list result(2);
    {
      const at::AutoGradMode no_grad(false);
      const at::Tensor g = upstream(grads[0], left);
      if (same_input && (op == tie_ops[0] || op == tie_ops[1])) {
        // The tape's rule for max(a, a)/min(a, a): the upstream gradient once, not g*0.5 + g*0.5
        // (which differs from g where g*0.5 underflows).
        result[0] = g.clone();
      } else {
        result[0] = at::empty_like(left);
        result[1] = at::empty_like(right);
        vjp_kernel(op, 0.0, 0.0, left, &right, g, result[0], &result[1]);
      }
    }
    return differentiable_once(*this, std::move(result), grads[0]);
  }
};

// y = op(x, s0, s1); y's grad_fn (when x needs a gradient) runs the fused VJP. None where x is not
// plain(): the caller runs the node's custom op instead.
std::optional<at::Tensor> unary(const at::Tensor& input, std::int64_t op, double s0, double s1) {
  require_init();
  if (!plain(input)) return std::nullopt;
  if (!supported(input)) refuse_inputs(op, input, nullptr);
  at::Tensor x, y;
  {
    const at::AutoGradMode no_grad(false);
    x = input.contiguous();
    y = at::empty_like(x);
    forward_kernel(op, s0, s1, x, nullptr, y);
  }
  if (torch::autograd::compute_requires_grad(input)) {
    const auto node = new_node<UnaryNodeBackward>();
    node->set_next_edges(torch::autograd::collect_next_edges(input));
    node->x = SavedVariable(x, false);
    node->op = op;
    node->s0 = s0;
    node->s1 = s1;
    torch::autograd::set_history(y, node);
  }
  return y;
}

// y = op(a, b); y's grad_fn (when a or b needs a gradient) runs the fused VJP for both. None where a
// or b is not plain(): the caller runs the node's custom op instead.
std::optional<at::Tensor> binary(const at::Tensor& a_in, const at::Tensor& b_in, std::int64_t op) {
  require_init();
  if (!plain(a_in) || !plain(b_in)) return std::nullopt;
  if (!supported(a_in) || !supported(b_in) || a_in.sizes() != b_in.sizes() ||
      a_in.scalar_type() != b_in.scalar_type() || a_in.device() != b_in.device())
    refuse_inputs(op, a_in, &b_in);
  at::Tensor a, b, y;
  {
    const at::AutoGradMode no_grad(false);
    a = a_in.contiguous();
    b = b_in.contiguous();
    y = at::empty_like(a);
    forward_kernel(op, 0.0, 0.0, a, &b, y);
  }
  if (torch::autograd::compute_requires_grad(a_in, b_in)) {
    const auto node = new_node<BinaryNodeBackward>();
    node->set_next_edges(torch::autograd::collect_next_edges(a_in, b_in));
    node->a = SavedVariable(a, false);
    node->b = SavedVariable(b, false);
    node->op = op;
    node->same_input = a_in.is_same(b_in);
    torch::autograd::set_history(y, node);
  }
  return y;
}

// The custom ops' CPU and CUDA kernels (torch.ops.tapewise.<node> and <node>_vjp, defined with their
// Python kernels by tapewise.torch._custom_ops): the same work as those, with no Python, so that code
// compiled by torch.compile calls C++ per node. Registered for the CPU and CUDA dispatch keys, which
// come before the Python kernels' CompositeExplicitAutograd; the arguments are the ops' schemas:
// (inputs..., [g,] scalars...).
struct NodeOpKernel final : c10::OperatorKernel {
  std::int64_t op;
  int arity, scalar_count;
  bool vjp;

  NodeOpKernel(std::int64_t op_, int arity_, int scalar_count_, bool vjp_)
      : op(op_), arity(arity_), scalar_count(scalar_count_), vjp(vjp_) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) const {
    const std::size_t count = static_cast<std::size_t>(arity + (vjp ? 1 : 0) + scalar_count);
    const auto args = torch::jit::last(*stack, count);
    const at::Tensor a = args[0].toTensor();
    const at::Tensor b = arity == 2 ? args[1].toTensor() : at::Tensor();
    const at::Tensor g = vjp ? args[arity].toTensor() : at::Tensor();
    double s[2] = {0.0, 0.0};
    for (int k = 0; k < scalar_count && k < 2; ++k) s[k] = args[arity + (vjp ? 1 : 0) + k].toDouble();
    torch::jit::drop(*stack, count);
    if (!supported(a) || (b.defined() && (!supported(b) || a.sizes() != b.sizes() ||
                                          a.scalar_type() != b.scalar_type() || a.device() != b.device())))
      refuse_inputs(op, a, b.defined() ? &b : nullptr);
    const at::Tensor left = a.contiguous(), right = b.defined() ? b.contiguous() : at::Tensor();
    const at::Tensor* second = right.defined() ? &right : nullptr;
    if (!vjp) {
      at::Tensor y = at::empty_like(left);
      forward_kernel(op, s[0], s[1], left, second, y);
      torch::jit::push(*stack, std::move(y));
      return;
    }
    const at::Tensor upstream_g = upstream(g, left);
    at::Tensor da = at::empty_like(left), db = second ? at::empty_like(left) : at::Tensor();
    vjp_kernel(op, s[0], s[1], left, second, upstream_g, da, second ? &db : nullptr);
    torch::jit::push(*stack, std::move(da));
    if (second) torch::jit::push(*stack, std::move(db));
  }
};

// nodes: (name, op index, arity, scalar count) per node. Once per process; the libraries are never
// destroyed (deregistering at exit could run after the Python side that defined the ops has gone).
void register_op_kernels(const std::vector<std::tuple<std::string, std::int64_t, int, int>>& nodes) {
  static bool registered = false;
  if (registered) return;
  for (const c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CUDA}) {
    auto* library = new torch::Library(torch::Library::IMPL, "tapewise", key, __FILE__, __LINE__);
    for (const auto& [name, op, arity, scalar_count] : nodes) {
      library->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                      std::make_unique<NodeOpKernel>(op, arity, scalar_count, false)));
      library->impl((name + "_vjp").c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                                 std::make_unique<NodeOpKernel>(op, arity, scalar_count, true)));
    }
  }
  registered = true;
}

void init(const py::capsule& table, const py::object& refuse_inputs_fn, std::int64_t max_op, std::int64_t min_op) {
  if (std::string(table.name() ? table.name() : "") != TAPEWISE_NODE_KERNELS_CAPSULE)
    throw py::value_error("tapewise.torch: the kernel table's capsule is not " TAPEWISE_NODE_KERNELS_CAPSULE);
  const auto* candidate = table.get_pointer<const tapewise_node_kernels>();
  if (candidate->version != TAPEWISE_NODE_KERNELS_VERSION || candidate->size < sizeof(tapewise_node_kernels))
    throw py::value_error("tapewise.torch: the kernel table is version " + std::to_string(candidate->version) +
                          "; these nodes were built for version " + std::to_string(TAPEWISE_NODE_KERNELS_VERSION));
  kernels = candidate;
  refuse = refuse_inputs_fn.inc_ref().ptr();
  tie_ops = {max_op, min_op};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tapewise.torch's nodes as C++ autograd nodes (built by tapewise.torch; use tapewise.torch).";
  m.def("init", &init, "Binds the kernel table capsule, the refusal callback and the max/min op indices.");
  m.def("register_op_kernels", &register_op_kernels,
        "Registers the CPU and CUDA kernels of the custom ops torch.ops.tapewise.<node> and <node>_vjp: "
        "[(name, op index, arity, scalar count)].");
  m.def("unary", &unary,
        "y = op(x, s0, s1), with a C++ grad_fn whose backward is tapewise's fused VJP; None for a tensor that is "
        "not plain memory (a torch.func wrapper, a fake tensor, a dispatch mode): the op's custom op runs it.");
  m.def("binary", &binary,
        "y = op(a, b), with a C++ grad_fn whose backward is tapewise's fused VJP (both gradients); None as unary.");
}
