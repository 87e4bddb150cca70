// cuda/backends/kernel_image.hpp — the check that this build's kernels run on a device (kernel_image.cu).
#pragma once

#include <tapewise/core.hpp>

namespace tapewise {

// DeviceUnavailable naming the device's compute capability and the build's architectures when the
// build holds no kernel image for `device`; leaves the caller's current device as it was.
[[nodiscard]] Result<void> check_kernel_image(int device);

}  // namespace tapewise
