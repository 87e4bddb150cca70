// conform/library/npy.hpp — a small, strict reader and writer of NumPy .npy files: how numpy, PyTorch
// or another implementation exchanges arrays with tapewise. Only what tapewise holds: '<f4' (float32),
// '<f8' (float64), '<f2' (float16), C order, format 1.0 or 2.0; and bfloat16, which numpy lacks, as
// its 16 bits in a '<u2' array (numpy: a.view(np.uint16); PyTorch: t.view(torch.uint16) or
// t.view(torch.int16).numpy().view(np.uint16)). A '<u2' file is bfloat16 only where the caller
// expects bfloat16 (a suite of that dtype, eval --dtype bfloat16); anywhere else it is rejected.
// Anything else is rejected with a message, never guessed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tapewise/core.hpp>

namespace tapewise::conform {

// Limits of the reader, checked from the header before any data is read (a hostile or mistaken
// file costs at most a header read): at most 2^28 elements (1 GiB of float32, 2 GiB of float64) —
// every dimension and the product of the dimensions —, at most 32 dimensions (numpy allows 64; no
// elementwise suite needs more), a header of at most 64 KiB of printable ASCII ending in '\n'.
inline constexpr std::int64_t kMaxNpyElements = std::int64_t{1} << 28;
inline constexpr std::size_t kMaxNpyDims = 32;
inline constexpr std::size_t kMaxNpyHeaderBytes = 65536;

// Parses the bytes of a .npy file. `what` names the source (a path) in error messages. Rejects:
// bad magic, an unsupported version, a malformed header dict, a dtype other than '<f4'/'<f8'/'<f2'
// (or '<u2' when u2_is_bfloat16: the file holds bfloat16 bits),
// fortran_order True, a negative or overflowing shape, a shape beyond the limits above, and data
// that is short (truncated) or long. Errors are ErrorCode::InvalidArgument with a message that
// starts with `what`; bytes from the file appear in messages escaped (files.hpp: escaped).
[[nodiscard]] Result<HostArray> parse_npy(std::span<const std::byte> file, const std::string& what,
                                          bool u2_is_bfloat16 = false);
// Reads a regular file (a directory, device or FIFO is refused): the header first, then the file's
// size is checked against the header's shape, and only then the data is read.
[[nodiscard]] Result<HostArray> read_npy(const std::string& path, bool u2_is_bfloat16 = false);

// The descr a file of that dtype has: '<f4', '<f8', '<f2', and '<u2' for bfloat16's bits.
const char* descr_of(DType dtype);
// The bytes of a .npy file holding `array`: version 1.0 (2.0 when the header needs it), header
// padded to a multiple of 64 bytes as numpy writes it.
std::vector<std::byte> encode_npy(const HostArray& array);
// Writes the file through files.hpp's writer: whole or not at all, never through a symbolic link.
[[nodiscard]] Result<void> write_npy(const std::string& path, const HostArray& array);

}  // namespace tapewise::conform
