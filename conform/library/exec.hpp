// conform/library/exec.hpp — runs one node on a backend: upload, forward, the VJP by the fused kernel
// or by the spec's stages, download; and backend selection (CUDA where a device is present, else
// CPU, with the reason). No grading here: that is grade.hpp.
#pragma once

#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <tapewise/tapewise.hpp>

#include "special_points.hpp"

namespace tapewise::conform {

struct NodeOutputs {
  HostArray y;
  std::vector<HostArray> grads;  // dx | da, db (empty when no g was given)
};

// Workspace accounting of staged VJPs: a call leaks when the backend's live workspace count or
// bytes differ after it from before it.
struct WorkspaceLeaks {
  std::int64_t staged_calls = 0;
  std::int64_t leaking_calls = 0;
};

// y = op(inputs) and, when g is given, the VJP on the chosen path. `leaks` (optional) receives
// the workspace accounting of a staged VJP.
[[nodiscard]] Result<NodeOutputs> run_node(Backend& backend, Op op, const Scalars& s, std::span<const HostArray> inputs,
                                           const HostArray* g, VjpPath path, WorkspaceLeaks* leaks = nullptr);

// Through the production API: one leaf per input, the node (op(a, a) from the single leaf when
// `same`), Tape::backward with g as the seed; the gradients are the leaves' (the total, when same).
[[nodiscard]] Result<NodeOutputs> run_on_tape(const std::shared_ptr<Backend>& backend, Op op, const Scalars& s,
                                              std::span<const HostArray> leaves, bool same, const HostArray& g,
                                              VjpPath path);
// A special point (one element) through run_on_tape.
[[nodiscard]] Result<NodeOutputs> run_special_point(const std::shared_ptr<Backend>& backend, const SpecialPoint& point,
                                                    VjpPath path);

enum class BackendChoice { automatic, cpu, cuda };

struct ChosenBackend {
  std::shared_ptr<Backend> backend;
  std::string name;  // "cuda" | "cpu"
  std::string why;   // one line: why this backend
  // "aten" | "exact": the backend's math mode (the CPU backend's is exact whatever was asked).
  std::string math() const { return math_mode_name(math_mode(*backend)); }
};

// automatic: CUDA where a device opens, else CPU saying why CUDA was not used. cuda: fails with
// DeviceUnavailable where it cannot open. `math`: the mode asked for (none: the backend's default);
// aten where only the CPU backend can run is InvalidArgument (the CPU backend is exact only).
[[nodiscard]] Result<ChosenBackend> choose_backend(BackendChoice choice, std::optional<MathMode> math = std::nullopt);

// Seconds per call of forward and of the fused VJP on `inputs`/`g` (best of a few repetitions).
struct Timing {
  std::int64_t elements = 0;
  double forward_s = 0.0;
  double vjp_s = 0.0;
};
[[nodiscard]] Result<Timing> time_node(Backend& backend, Op op, const Scalars& s, std::span<const HostArray> inputs,
                                       const HostArray& g);

}  // namespace tapewise::conform
