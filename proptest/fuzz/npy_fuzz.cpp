// proptest/fuzz/npy_fuzz.cpp — libFuzzer harness of the .npy reader (conform/library/npy.cpp) on any
// bytes: it must give an array or an error, never a crash, a leak or UB; an accepted array holds
// exactly its shape's bytes, stays within the reader's limits and survives a write/read round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "npy.hpp"

namespace tc = tapewise::conform;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  auto parsed = tc::parse_npy(file, "fuzz.npy");
  if (!parsed) {
    if (parsed.error().message.rfind("fuzz.npy: ", 0) != 0) std::abort();  // messages name their source
    for (char c : parsed.error().message)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) std::abort();
    return 0;
  }
  const tapewise::HostArray& a = *parsed;
  if (a.shape.dims.size() > tc::kMaxNpyDims || a.shape.numel() < 0 || a.shape.numel() > tc::kMaxNpyElements) std::abort();
  if (a.bytes.size() != static_cast<std::size_t>(a.shape.numel()) * tapewise::dtype_size(a.dtype)) std::abort();
  auto again = tc::parse_npy(tc::encode_npy(a), "round trip");
  if (!again || again->shape != a.shape || again->dtype != a.dtype || again->bytes != a.bytes) std::abort();
  return 0;
}
