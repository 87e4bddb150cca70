// tapewise/native/torch_nodes.cpp — tapewise.torch's per-node path as C++ autograd functions
// (torch::autograd::Function), so that a node costs PyTorch what one of its own ops does: no Python
// autograd.Function, no Python in the backward. tapewise.torch builds this file against the installed
// PyTorch on first use (torch.utils.cpp_extension, cached; tapewise/torch.py, _load_native) and calls
// unary/binary below; the kernels are tapewise's, reached through the table of node_kernels.h.
// Forward and backward keep the Python path's rules (tapewise/torch.py, _UnaryNode and _BinaryNode).
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/utils/pybind.h>

#include "node_kernels.h"

namespace {

namespace py = pybind11;
using torch::autograd::AutogradContext;
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
  return g.to(like.scalar_type()).contiguous();
}

// once_differentiable's rule (torch.autograd.function): under create_graph, a gradient computed from
// an upstream gradient that requires grad is handed on through a node that raises if differentiated.
variable_list once_differentiable(variable_list grads, const at::Tensor& g) {
  if (!at::GradMode::is_enabled() || !g.requires_grad()) return grads;
  for (at::Tensor& v : grads) {
    if (!v.defined()) continue;
    v = v.detach();
    v.set_requires_grad(true);
  }
  const auto error = std::make_shared<torch::autograd::DelayedError>(
      "trying to differentiate twice a function that was marked with @once_differentiable "
      "(tapewise.torch's nodes are differentiable once)",
      static_cast<std::int64_t>(grads.size()));
  return error->apply(std::move(grads));
}

struct UnaryNode : torch::autograd::Function<UnaryNode> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, std::int64_t op, double s0, double s1) {
    if (!supported(input)) refuse_inputs(op, input, nullptr);
    const at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x);
    forward_kernel(op, s0, s1, x, nullptr, y);
    ctx->save_for_backward({x});
    ctx->saved_data["op"] = op;
    ctx->saved_data["s0"] = s0;
    ctx->saved_data["s1"] = s1;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    variable_list result(4);
    {
      const at::AutoGradMode no_grad(false);
      const at::Tensor g = upstream(grads[0], x);
      result[0] = at::empty_like(x);
      vjp_kernel(ctx->saved_data["op"].toInt(), ctx->saved_data["s0"].toDouble(), ctx->saved_data["s1"].toDouble(), x,
                 nullptr, g, result[0], nullptr);
    }
    return once_differentiable(std::move(result), grads[0]);
  }
};

struct BinaryNode : torch::autograd::Function<BinaryNode> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a_in, const at::Tensor& b_in, std::int64_t op) {
    if (!supported(a_in) || !supported(b_in) || a_in.sizes() != b_in.sizes() ||
        a_in.scalar_type() != b_in.scalar_type() || a_in.device() != b_in.device())
      refuse_inputs(op, a_in, &b_in);
    ctx->saved_data["same_input"] = a_in.is_same(b_in);
    const at::Tensor a = a_in.contiguous(), b = b_in.contiguous();
    at::Tensor y = at::empty_like(a);
    forward_kernel(op, 0.0, 0.0, a, &b, y);
    ctx->save_for_backward({a, b});
    ctx->saved_data["op"] = op;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const std::int64_t op = ctx->saved_data["op"].toInt();
    variable_list result(3);
    {
      const at::AutoGradMode no_grad(false);
      const at::Tensor g = upstream(grads[0], a);
      if (ctx->saved_data["same_input"].toBool() && (op == tie_ops[0] || op == tie_ops[1])) {
        // The tape's rule for max(a, a)/min(a, a): the upstream gradient once, not g*0.5 + g*0.5
        // (which differs from g where g*0.5 underflows).
        result[0] = g.clone();
      } else {
        result[0] = at::empty_like(a);
        result[1] = at::empty_like(b);
        vjp_kernel(op, 0.0, 0.0, a, &b, g, result[0], &result[1]);
      }
    }
    return once_differentiable(std::move(result), grads[0]);
  }
};

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

void require_init() {
  if (kernels == nullptr) throw std::runtime_error("tapewise.torch: the native nodes were not initialised (init)");
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "tapewise.torch's nodes as C++ autograd functions (built by tapewise.torch; use tapewise.torch).";
  m.def("init", &init, "Binds the kernel table capsule, the refusal callback and the max/min op indices.");
  m.def("unary", [](const at::Tensor& x, std::int64_t op, double s0, double s1) {
          require_init();
          return UnaryNode::apply(x, op, s0, s1);
        }, "y = op(x, s0, s1), one C++ autograd node whose backward is tapewise's fused VJP.");
  m.def("binary", [](const at::Tensor& a, const at::Tensor& b, std::int64_t op) {
          require_init();
          return BinaryNode::apply(a, b, op);
        }, "y = op(a, b), one C++ autograd node whose backward is tapewise's fused VJP (both gradients).");
}
