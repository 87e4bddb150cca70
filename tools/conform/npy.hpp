// tools/conform/npy.hpp — a small, strict reader and writer of NumPy .npy files: how numpy, PyTorch
// or another implementation exchanges arrays with tapewise. Only what tapewise holds: '<f4' / '<f8',
// C order, format 1.0 or 2.0. Anything else is rejected with a message, never guessed at.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <tapewise/core.hpp>

namespace tapewise::conform {

// Parses the bytes of a .npy file. `what` names the source (a path) in error messages. Rejects:
// bad magic, an unsupported version, a malformed header dict, a dtype other than '<f4'/'<f8',
// fortran_order True, a negative or overflowing shape, and data that is short (truncated) or long.
// Errors are ErrorCode::InvalidArgument with a message that starts with `what`.
Result<HostArray> parse_npy(std::span<const std::byte> file, const std::string& what);
Result<HostArray> read_npy(const std::string& path);

// The bytes of a .npy file holding `array`: version 1.0 (2.0 when the header needs it), header
// padded to a multiple of 64 bytes as numpy writes it.
std::vector<std::byte> encode_npy(const HostArray& array);
Result<void> write_npy(const std::string& path, const HostArray& array);

}  // namespace tapewise::conform
