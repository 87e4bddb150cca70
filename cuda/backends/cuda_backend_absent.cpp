// cuda/backends/cuda_backend_absent.cpp — the CUDA entry points of a build configured with TAPEWISE_CUDA=OFF:
// no device can be opened, and every answer says that the build, not the machine, is the reason.
#include <tapewise/backend.hpp>

namespace tapewise {

namespace {
constexpr const char* kNoCuda = "this build of tapewise has no CUDA backend (configured with TAPEWISE_CUDA=OFF)";
}

bool cuda_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}

Result<std::shared_ptr<Backend>> make_cuda_backend(const CudaOptions&) {
  return fail(ErrorCode::DeviceUnavailable, kNoCuda);
}

void* cuda_stream(const Backend&) { return nullptr; }

}  // namespace tapewise
