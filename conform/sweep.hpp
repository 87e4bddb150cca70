// conform/sweep.hpp — what the `tapewise-conform sweep` command's host side (sweep_engine.cpp, its
// chunk driver; sweep_recheck.cpp) and sweep_cuda.cu share: the ChunkEngine that generates inputs and
// grades outputs where the buffers live (host loops for the CPU backend, kernels for CUDA). Includes
// nothing of reference/ or cuda/: the device side sees only sweep_reference.hpp and the public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <tapewise/backend.hpp>

#include "sweep_reference.hpp"

namespace tapewise::conform {

namespace sweep {

// One graded output: which (y, da/dx, db), at which g, against which bound (spec/bounds.def).
struct OutputRequest {
  int output = kY;
  double g = 1;  // unused for y
  Bound bound;
};

// Generates inputs and grades outputs where the backend's buffers live; tallies one slot per
// OutputRequest. Calls are queued in order with the backend's own kernels.
class ChunkEngine {
 public:
  virtual ~ChunkEngine() = default;
  // [[nodiscard]] with gnu::warn_unused_result: GCC 12 does not apply [[nodiscard]] to a virtual call.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> generate(const Job& job, std::uint64_t base, Buffer& a, Buffer* b) = 0;
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> fill(Buffer& g, double value) = 0;
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<void> grade(const Job& job, int slot, const OutputRequest& request, std::uint64_t base,
                             const Buffer& a, const Buffer* b, const Buffer& produced) = 0;
  // Waits for the queued work and returns the tallies (one per slot), zeroing them for the next job.
  [[nodiscard, gnu::warn_unused_result]]
  virtual Result<std::vector<OutputTally>> finish() = 0;
};

std::unique_ptr<ChunkEngine> make_host_engine(int slots);
#ifdef TAPEWISE_HAS_CUDA
// The backend must be a CUDA backend; kernels go to its stream on its device.
[[nodiscard]] Result<std::unique_ptr<ChunkEngine>> make_cuda_engine(Backend& backend, int slots);
// The reference evaluated by the device at given inputs (the validation of the GPU's copy).
[[nodiscard]] Result<std::vector<DD>> device_reference_values(int device, const Job& job, int output, double g,
                                                              const std::vector<Inputs>& inputs);
#endif

}  // namespace sweep
}  // namespace tapewise::conform
