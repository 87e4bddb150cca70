// cuda/backends/block_cache.hpp — the backends' raw allocation of buffers too large for a slab
// (slab.hpp): a released block is kept, by its exact size, for the next allocation of that size, so a
// tape of large nodes records and releases with no device allocation call (on the H200, the chain at
// 2^18 elements spent 1.5 us per node recording and 0.9 releasing in cudaMallocFromPoolAsync and
// cudaFreeAsync, more than the device's 1.76). When the memory underneath runs out, every kept block
// is given back (kept_memory.hpp). Reuse is in the order of the backend's one stream, as the slabs'
// is. Statistics and injected failures are Backend's, above this layer. On the CPU backend, keeping
// a block spares the next tape's kernel zeroing fresh pages for it: half of a float32 exp at 2^22 went
// there (perf, 2026-12-05) when each released block went back to the system.
#pragma once

#include <cstddef>
#include <iterator>
#include <unordered_map>
#include <vector>

#include <tapewise/core.hpp>

#include "backends/slab.hpp"  // poison_held, unpoison_held

namespace tapewise::detail {

class BlockCache {
 public:
  // host_memory: the blocks are host memory, which AddressSanitizer builds poison while kept.
  explicit BlockCache(bool host_memory) : host_memory_(host_memory) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A block of `bytes`: a kept one of that size, else raw_allocate(bytes) (Result<void*>), whose
  // error is returned as is.
  template <class RawAllocate>
  [[nodiscard]] Result<void*> allocate(std::size_t bytes, RawAllocate&& raw_allocate) {
    auto kept = kept_.find(bytes);
    if (kept != kept_.end() && !kept->second.empty()) {
      void* p = kept->second.back();
      kept->second.pop_back();
      kept_bytes_ -= bytes;
      unpoison(p, bytes);
      live_.emplace(p, bytes);
      live_bytes_ += bytes;
      return p;
    }
    Result<void*> got = raw_allocate(bytes);
    if (got) {
      live_.emplace(*got, bytes);
      live_bytes_ += bytes;
    }
    return got;
  }

  // Keeps p when this cache handed it out (true); false for memory it did not.
  bool release(void* p) {
    auto live = live_.find(p);
    if (live == live_.end()) return false;
    const std::size_t bytes = live->second;
    live_.erase(live);
    live_bytes_ -= bytes;
    poison(p, bytes);
    kept_[bytes].push_back(p);
    kept_bytes_ += bytes;
    return true;
  }

  // Gives back kept blocks until at most keep_bytes are kept: all of them by default (a failed
  // allocation, trim, the backend's destructor). Returns the bytes given back.
  template <class RawRelease>
  std::size_t release_kept(RawRelease&& raw_release, std::size_t keep_bytes = 0) {
    std::size_t given = 0;
    for (auto it = kept_.begin(); it != kept_.end() && kept_bytes_ > keep_bytes;) {
      const std::size_t bytes = it->first;
      std::vector<void*>& blocks = it->second;
      while (!blocks.empty() && kept_bytes_ > keep_bytes) {
        unpoison(blocks.back(), bytes);
        raw_release(blocks.back());
        blocks.pop_back();
        kept_bytes_ -= bytes;
        given += bytes;
      }
      it = blocks.empty() ? kept_.erase(it) : std::next(it);
    }
    return given;
  }

  std::size_t kept_bytes() const { return kept_bytes_; }  // released blocks kept for reuse
  std::size_t live_bytes() const { return live_bytes_; }  // blocks handed out

 private:
  void poison(const void* p, std::size_t bytes) const { poison_held(host_memory_, p, bytes); }
  void unpoison(const void* p, std::size_t bytes) const { unpoison_held(host_memory_, p, bytes); }

  bool host_memory_;
  std::unordered_map<std::size_t, std::vector<void*>> kept_;  // released blocks, by size
  std::unordered_map<void*, std::size_t> live_;              // handed out, with their sizes
  std::size_t kept_bytes_ = 0;
  std::size_t live_bytes_ = 0;
};

}  // namespace tapewise::detail
