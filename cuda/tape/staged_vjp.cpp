// cuda/tape/staged_vjp.cpp — the staged path: every node's forward and VJP run from spec/stagings.def
// (tape/staging.hpp), one primitive buffer op per stage with one rounding per element. Workspace
// buffers are allocated by their stage and released (RAII) before the call returns; the returned
// buffers are never workspace. Backend-agnostic: runs on CPU, CUDA and the prover's symbolic backend.
#include <vector>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"
#include "tape/staging.hpp"

namespace tapewise {
namespace {

// Runs the staging's stages in order on buffers shaped like `like`. `inputs` and `outputs` are its
// input and output slots (staging.hpp).
[[nodiscard]] Result<void> run_staging(Backend& be, const staging::Staging& st, const Scalars& s,
                                       std::span<const Buffer* const> inputs, std::span<Buffer* const> outputs,
                                       const Buffer& like) {
  detail::Engine& engine = detail::engine_of(be);
  std::vector<Buffer> workspace;  // released on every return
  workspace.reserve(static_cast<std::size_t>(st.workspace));
  auto buffer_at = [&](int slot) -> Buffer* {
    if (slot < st.inputs) return const_cast<Buffer*>(inputs[static_cast<std::size_t>(slot)]);
    if (slot < st.inputs + st.outputs) return outputs[static_cast<std::size_t>(slot - st.inputs)];
    return &workspace[static_cast<std::size_t>(slot - st.inputs - st.outputs)];
  };
  for (const staging::Stage& stage : st.stages) {
    if (stage.result >= st.inputs + st.outputs) {
      TAPEWISE_TRY(b, engine.allocate(like.shape(), like.dtype(), AllocTag::workspace));
      workspace.push_back(std::move(b));
    }
    const Buffer* operands[3] = {};
    const int n = prim_arity(stage.prim);
    for (int k = 0; k < n; ++k) operands[k] = buffer_at(stage.operands[static_cast<std::size_t>(k)]);
    const double c = stage.constant.value_in(like.dtype(), s);
    if (auto ok = engine.prim(stage.prim, c, std::span<const Buffer* const>(operands, static_cast<std::size_t>(n)),
                              *buffer_at(stage.result));
        !ok)
      return fail(ok.error().code, std::string(op_name(st.op)) + " staged, stage '" + stage.text + "': " + ok.error().message);
  }
  return {};
}

}  // namespace

[[nodiscard]] Result<void> staged_forward(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                          Buffer& out) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + " staged forward: wrong number of inputs");
  TAPEWISE_TRY(st, staging::staging_of(op, staging::Pass::forward));
  Buffer* outs[1] = {&out};
  return run_staging(be, *st, s, inputs, outs, out);
}

[[nodiscard]] Result<void> staged_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                      const Buffer& g, std::span<Buffer* const> grads) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity || static_cast<int>(grads.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + " staged vjp: wrong number of operands");
  TAPEWISE_TRY(st, staging::staging_of(op, staging::Pass::vjp));
  const Buffer* in[3] = {};
  for (std::size_t k = 0; k < inputs.size(); ++k) in[k] = inputs[k];
  in[inputs.size()] = &g;
  return run_staging(be, *st, s, std::span<const Buffer* const>(in, inputs.size() + 1), grads, g);
}

}  // namespace tapewise
