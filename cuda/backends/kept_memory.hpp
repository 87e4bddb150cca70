// cuda/backends/kept_memory.hpp — the backends' raw allocation: small buffers carved from slabs
// (slab.hpp), large ones from blocks kept by size (block_cache.hpp), so that a tape recorded again
// makes no allocation call underneath. Both keep what is released; when the memory underneath runs
// out, everything kept is given back and the allocation tried once more. The CPU backend keeps no
// large blocks: under Linux's overcommit, host memory does not run out with an error the cache could
// answer, the OOM killer comes first, and blocks of many sizes would only accumulate.
#pragma once

#include <cstddef>

#include <tapewise/core.hpp>

#include "backends/block_cache.hpp"
#include "backends/slab.hpp"

namespace tapewise::detail {

class KeptMemory {
 public:
  // host_memory: the memory is the host's, which AddressSanitizer builds poison while kept.
  // keep_large_blocks: large buffers are kept by size when released; else given back at once.
  KeptMemory(bool host_memory, bool keep_large_blocks)
      : slabs_(host_memory), blocks_(host_memory), keep_large_blocks_(keep_large_blocks) {}

  // `bytes` (> 0) from a slab or a kept block, else raw_allocate (Result<void*>); when that fails and
  // memory is kept, it is given back (raw_release) and the allocation tried once more.
  template <class RawAllocate, class RawRelease>
  [[nodiscard]] Result<void*> allocate(std::size_t bytes, RawAllocate&& raw_allocate, RawRelease&& raw_release) {
    Result<void*> got = allocate_kept_or_new(bytes, raw_allocate);
    if (got) return got;
    const bool gave_slabs = slabs_.release_empty(raw_release);
    const bool gave_blocks = blocks_.release_kept(raw_release);
    if (!gave_slabs && !gave_blocks) return got;
    return allocate_kept_or_new(bytes, raw_allocate);
  }

  // Keeps p when a slab or the block cache handed it out; anything else goes to raw_release.
  template <class RawRelease>
  void release(void* p, RawRelease&& raw_release) {
    if (!slabs_.release(p) && !blocks_.release(p)) raw_release(p);
  }

  // Gives back all memory (the backend's destructor: no buffer of it is alive any more).
  template <class RawRelease>
  void release_all(RawRelease&& raw_release) {
    slabs_.release_all(raw_release);
    blocks_.release_kept(raw_release);
  }

  const SlabAllocator& slabs() const { return slabs_; }
  const BlockCache& blocks() const { return blocks_; }

 private:
  template <class RawAllocate>
  [[nodiscard]] Result<void*> allocate_kept_or_new(std::size_t bytes, RawAllocate& raw_allocate) {
    if (SlabAllocator::carves(bytes)) return slabs_.allocate(bytes, raw_allocate);
    if (keep_large_blocks_) return blocks_.allocate(bytes, raw_allocate);
    return raw_allocate(bytes);
  }

  SlabAllocator slabs_;
  BlockCache blocks_;
  bool keep_large_blocks_;
};

}  // namespace tapewise::detail
