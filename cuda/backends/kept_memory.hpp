// cuda/backends/kept_memory.hpp — the backends' raw allocation: small buffers carved from slabs
// (slab.hpp), large ones from blocks kept by size (block_cache.hpp), so that a tape recorded again
// makes no allocation call underneath. Both keep what is released, up to a limit in bytes (the kept
// memory limit: empty slabs and released blocks together), and give back what exceeds it; when the
// memory underneath runs out, everything kept is given back and the allocation tried once more, and
// trim gives everything kept back on request. On the CPU backend the limit is what bounds it: under
// Linux's overcommit, host memory does not run out with an error the cache could answer.
#pragma once

#include <cstddef>
#include <cstdint>

#include <tapewise/core.hpp>

#include "backends/block_cache.hpp"
#include "backends/slab.hpp"

namespace tapewise::detail {

class KeptMemory {
 public:
  static constexpr std::size_t kNoLimit = SIZE_MAX;

  // host_memory: the memory is the host's, which AddressSanitizer builds poison while kept.
  // kept_limit: the most bytes kept with no buffer in them (empty slabs and released blocks).
  explicit KeptMemory(bool host_memory, std::size_t kept_limit = kNoLimit)
      : slabs_(host_memory), blocks_(host_memory), kept_limit_(kept_limit) {}

  // `bytes` (> 0) from a slab or a kept block, else raw_allocate (Result<void*>); when that fails and
  // memory is kept, it is given back (raw_release) and the allocation tried once more.
  template <class RawAllocate, class RawRelease>
  [[nodiscard]] Result<void*> allocate(std::size_t bytes, RawAllocate&& raw_allocate, RawRelease&& raw_release) {
    Result<void*> got = allocate_kept_or_new(bytes, raw_allocate);
    if (got) return got;
    if (release_kept(0, raw_release) == 0) return got;
    return allocate_kept_or_new(bytes, raw_allocate);
  }

  // Keeps p when a slab or the block cache handed it out, within the kept limit; anything else goes
  // to raw_release.
  template <class RawRelease>
  void release(void* p, RawRelease&& raw_release) {
    switch (slabs_.release(p)) {
      case SlabAllocator::Released::slot: return;
      case SlabAllocator::Released::slab_emptied: keep_within_limit(raw_release); return;
      case SlabAllocator::Released::not_carved: break;
    }
    if (blocks_.release(p)) keep_within_limit(raw_release);
    else raw_release(p);
  }

  // Gives back kept memory (empty slabs, the largest first, then released blocks) until at most
  // keep_bytes are kept. Returns the bytes given back.
  template <class RawRelease>
  std::size_t release_kept(std::size_t keep_bytes, RawRelease&& raw_release) {
    std::size_t given = slabs_.release_kept(less_or_zero(keep_bytes, blocks_.kept_bytes()), raw_release);
    given += blocks_.release_kept(raw_release, less_or_zero(keep_bytes, slabs_.kept_bytes()));
    return given;
  }

  // A new kept limit for the releases to come; the caller gives back what is kept beyond it now
  // (release_kept).
  void set_kept_limit(std::size_t bytes) { kept_limit_ = bytes; }
  std::size_t kept_limit() const { return kept_limit_; }

  // Gives back all memory (the backend's destructor: no buffer of it is alive any more).
  template <class RawRelease>
  void release_all(RawRelease&& raw_release) {
    slabs_.release_all(raw_release);
    blocks_.release_kept(raw_release);
  }

  // Everything held from the memory underneath: every slab, every block handed out or kept.
  std::size_t reserved_bytes() const { return slabs_.slab_bytes() + blocks_.live_bytes() + blocks_.kept_bytes(); }
  // Held with no buffer in it: the kept empty slabs and released blocks.
  std::size_t kept_bytes() const { return slabs_.kept_bytes() + blocks_.kept_bytes(); }

  const SlabAllocator& slabs() const { return slabs_; }
  const BlockCache& blocks() const { return blocks_; }

 private:
  template <class RawAllocate>
  [[nodiscard]] Result<void*> allocate_kept_or_new(std::size_t bytes, RawAllocate& raw_allocate) {
    if (SlabAllocator::carves(bytes)) return slabs_.allocate(bytes, raw_allocate);
    return blocks_.allocate(bytes, raw_allocate);
  }
  template <class RawRelease>
  void keep_within_limit(RawRelease& raw_release) {
    if (kept_bytes() > kept_limit_) release_kept(kept_limit_, raw_release);
  }
  static std::size_t less_or_zero(std::size_t a, std::size_t b) { return a > b ? a - b : 0; }

  SlabAllocator slabs_;
  BlockCache blocks_;
  std::size_t kept_limit_;
};

}  // namespace tapewise::detail
