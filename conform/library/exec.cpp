// conform/library/exec.cpp — one node on a backend, through the public API (Backend::forward,
// Backend::vjp_fused, Tape) and the engine's staged_vjp (backends/engine.hpp), the one internal it uses.
#include "exec.hpp"

#include "backends/engine.hpp"
#include "cases.hpp"  // host_array

#include <algorithm>
#include <chrono>


namespace tapewise::conform {

namespace {

HostArray scalar_array(DType dtype, double v) { return host_array(dtype, {round_to(dtype, v)}); }

[[nodiscard]] Result<std::vector<Buffer>> upload_all(Backend& backend, std::span<const HostArray> inputs) {
  std::vector<Buffer> in;
  for (const HostArray& h : inputs) {
    TAPEWISE_TRY(buffer, backend.upload(h));
    in.push_back(std::move(buffer));
  }
  return in;
}

}  // namespace

Result<NodeOutputs> run_node(Backend& backend, Op op, const Scalars& s,
                             std::span<const HostArray> inputs, const HostArray* g, VjpPath path,
                             WorkspaceLeaks* leaks) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + " takes " + std::to_string(info.arity) + " input(s)");
  TAPEWISE_TRY(in, upload_all(backend, inputs));
  const Buffer* in_ptrs[2] = {&in[0], &in[in.size() - 1]};
  const std::span<const Buffer* const> in_span(in_ptrs, in.size());

  NodeOutputs out;
  TAPEWISE_TRY(y, backend.allocate(in[0].shape(), in[0].dtype(), AllocTag::value));
  TAPEWISE_CHECK(backend.forward(op, s, in_span, y));
  TAPEWISE_TRY(y_host, backend.download(y));
  out.y = std::move(y_host);
  if (!g) return out;

  TAPEWISE_TRY(g_buffer, backend.upload(*g));
  std::vector<Buffer> grads;
  for (int i = 0; i < info.arity; ++i) {
    TAPEWISE_TRY(grad, backend.allocate(in[0].shape(), in[0].dtype(), AllocTag::gradient));
    grads.push_back(std::move(grad));
  }
  Buffer* grad_ptrs[2] = {&grads[0], &grads[grads.size() - 1]};
  const std::span<Buffer* const> grad_span(grad_ptrs, grads.size());
  if (path == VjpPath::fused) {
    TAPEWISE_CHECK(backend.vjp_fused(op, s, in_span, g_buffer, grad_span));
  } else {
    const MemoryStats before = backend.stats();
    TAPEWISE_CHECK(staged_vjp(backend, op, s, in_span, g_buffer, grad_span));
    const MemoryStats after = backend.stats();
    if (leaks) {
      ++leaks->staged_calls;
      if (after.count(AllocTag::workspace) != before.count(AllocTag::workspace) ||
          after.bytes(AllocTag::workspace) != before.bytes(AllocTag::workspace))
        ++leaks->leaking_calls;
    }
  }
  for (const Buffer& grad : grads) {
    TAPEWISE_TRY(grad_host, backend.download(grad));
    out.grads.push_back(std::move(grad_host));
  }
  return out;
}

Result<NodeOutputs> run_on_tape(const std::shared_ptr<Backend>& backend, Op op, const Scalars& s,
                                std::span<const HostArray> leaf_values, bool same, const HostArray& g,
                                VjpPath path) {
  Tape tape(backend);
  std::vector<NodeId> leaves;
  for (const HostArray& v : leaf_values) {
    TAPEWISE_TRY(id, tape.leaf(v));
    leaves.push_back(id);
  }
  std::vector<NodeId> parents = leaves;
  if (same && !leaves.empty()) parents.push_back(leaves[0]);
  TAPEWISE_TRY(node, tape.apply(op, parents, s));
  TAPEWISE_TRY(grads, tape.backward(node, g, path));
  NodeOutputs out;
  TAPEWISE_TRY(y, tape.value(node));
  out.y = std::move(y);
  for (NodeId leaf : leaves) {
    if (!grads.has(leaf))
      return fail(ErrorCode::InvalidArgument, std::string(op_name(op)) + ": backward gave input " +
                                                  std::to_string(leaf) + " no gradient");
    TAPEWISE_TRY(grad, grads.host(leaf));
    out.grads.push_back(std::move(grad));
  }
  return out;
}

Result<NodeOutputs> run_special_point(const std::shared_ptr<Backend>& backend, const SpecialPoint& point,
                                      VjpPath path) {
  std::vector<HostArray> leaves;
  for (double v : point.inputs) leaves.push_back(scalar_array(point.dtype, v));
  return run_on_tape(backend, point.op, point.scalars, leaves, point.same, scalar_array(point.dtype, point.g), path);
}

Result<ChosenBackend> choose_backend(BackendChoice choice, std::optional<MathMode> math) {
  ChosenBackend chosen;
  auto on_cpu = [&](std::string why) -> Result<ChosenBackend> {
    if (math == MathMode::aten)
      return fail(ErrorCode::InvalidArgument, "--math aten needs a CUDA backend (" + why + "); the CPU backend runs exact mode only");
    chosen.backend = make_cpu_backend();
    chosen.name = "cpu";
    chosen.why = std::move(why);
    return chosen;
  };
  if (choice == BackendChoice::cpu) return on_cpu("chosen with --backend cpu");
  CudaOptions options;
  options.math = math.value_or(MathMode::aten);
  auto cuda = make_cuda_backend(options);
  if (cuda) {
    chosen.backend = *cuda;
    chosen.name = "cuda";
    chosen.why = choice == BackendChoice::cuda ? "chosen with --backend cuda" : "a CUDA device is present";
    return chosen;
  }
  if (choice == BackendChoice::cuda) return tl::unexpected(cuda.error());
  return on_cpu("no CUDA device: " + cuda.error().str());
}

Result<Timing> time_node(Backend& backend, Op op, const Scalars& s, std::span<const HostArray> inputs,
                         const HostArray& g) {
  using Clock = std::chrono::steady_clock;
  TAPEWISE_TRY(in, upload_all(backend, inputs));
  const Buffer* in_ptrs[2] = {&in[0], &in[in.size() - 1]};
  const std::span<const Buffer* const> in_span(in_ptrs, in.size());
  TAPEWISE_TRY(g_buffer, backend.upload(g));
  TAPEWISE_TRY(y, backend.allocate(g_buffer.shape(), g_buffer.dtype(), AllocTag::value));
  std::vector<Buffer> grads;
  for (std::size_t i = 0; i < in.size(); ++i) {
    TAPEWISE_TRY(grad, backend.allocate(g_buffer.shape(), g_buffer.dtype(), AllocTag::gradient));
    grads.push_back(std::move(grad));
  }
  Buffer* grad_ptrs[2] = {&grads[0], &grads[grads.size() - 1]};
  const std::span<Buffer* const> grad_span(grad_ptrs, grads.size());

  // Best of a few repetitions after one warm-up call: the figure is the path's speed, not noise.
  auto best_seconds = [&](auto&& call) -> Result<double> {
    double best = 1e300;
    for (int rep = 0; rep < 4; ++rep) {
      const auto start = Clock::now();
      TAPEWISE_CHECK(call());
      TAPEWISE_CHECK(backend.synchronize());
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (rep > 0) best = std::min(best, seconds);
    }
    return best;
  };
  Timing t;
  t.elements = g.numel();
  TAPEWISE_TRY(forward_s, best_seconds([&] { return backend.forward(op, s, in_span, y); }));
  TAPEWISE_TRY(vjp_s, best_seconds([&] { return backend.vjp_fused(op, s, in_span, g_buffer, grad_span); }));
  t.forward_s = forward_s;
  t.vjp_s = vjp_s;
  return t;
}

}  // namespace tapewise::conform
