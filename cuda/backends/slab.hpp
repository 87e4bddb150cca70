// cuda/backends/slab.hpp — small allocations carved from large slabs: the backends' raw allocation
// for buffers of at most kMaxCarveBytes, so that recording a small node costs a pointer bump
// instead of a device allocation and releasing it a count instead of a device free. A slab is
// reused once all its buffers are released, and every empty slab is kept for the next tape until the
// backend, out of memory, asks for them back (release_empty): on the H200 a 1,000-node chain at 2^16
// elements fills 63 slabs, and keeping only 16 sent the other 47 through cudaFreeAsync and
// cudaMallocFromPoolAsync on every run.
// Buffers, their statistics and injected allocation failures are Backend's, above this layer:
// each carved buffer is still one counted allocation there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include <tapewise/core.hpp>

// GCC says it builds with AddressSanitizer by __SANITIZE_ADDRESS__; clang before 16 only by
// __has_feature (the fuzzers' build), so both are asked.
#if defined(__SANITIZE_ADDRESS__)
#define TAPEWISE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TAPEWISE_ASAN 1
#endif
#endif
#if defined(TAPEWISE_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace tapewise::detail {

// Host memory an allocator holds but has not handed out is poisoned for AddressSanitizer while held,
// so a use after release is reported; nothing is done for device memory, or without ASan.
inline void poison_held([[maybe_unused]] bool host_memory, [[maybe_unused]] const void* p,
                        [[maybe_unused]] std::size_t bytes) {
#if defined(TAPEWISE_ASAN)
  if (host_memory) ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
}
inline void unpoison_held([[maybe_unused]] bool host_memory, [[maybe_unused]] const void* p,
                          [[maybe_unused]] std::size_t bytes) {
#if defined(TAPEWISE_ASAN)
  if (host_memory) ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
}

class SlabAllocator {
 public:
  static constexpr std::size_t kSlabBytes = std::size_t{4} << 20;
  static constexpr std::size_t kMaxCarveBytes = kSlabBytes / 16;  // 256 KiB: 2^16 float32 elements
  static constexpr std::size_t kAlign = 256;                      // as cudaMalloc's

  // host_memory: the slabs are host memory, which AddressSanitizer builds poison between buffers.
  explicit SlabAllocator(bool host_memory) : host_memory_(host_memory) {}
  SlabAllocator(const SlabAllocator&) = delete;
  SlabAllocator& operator=(const SlabAllocator&) = delete;

  static bool carves(std::size_t bytes) { return bytes > 0 && bytes <= kMaxCarveBytes; }

  // `bytes` (carves(bytes)) from the current slab, or from a new one that raw_allocate(kSlabBytes)
  // returns (Result<void*>); its error is returned as is.
  template <class RawAllocate>
  [[nodiscard]] Result<void*> allocate(std::size_t bytes, RawAllocate&& raw_allocate) {
    const std::size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
    // A current slab without live buffers has used == 0 (release resets it), so it never lands here.
    if (!current_ || current_->used + size > kSlabBytes) {
      auto slab = next_slab(raw_allocate);
      if (!slab) return tl::unexpected(slab.error());
      current_ = *slab;
    }
    std::byte* p = current_->base + current_->used;
    current_->used += size;
    current_->live += 1;
    unpoison(p, bytes);
    return static_cast<void*>(p);
  }

  // Releases p when a slab holds it (true); false for memory this allocator did not carve. A slab
  // left empty is kept: carved again from its start if current, else for the next new slab.
  bool release(void* p) {
    Slab* slab = find(p);
    if (!slab) return false;
    if (--slab->live > 0) return true;
    slab->used = 0;
    poison(slab->base, kSlabBytes);
    if (slab != current_) empty_.push_back(slab);
    return true;
  }

  // Gives back every kept empty slab (raw_release), the current one too when it is empty: the
  // backend's memory ran out. Returns whether any was given back.
  template <class RawRelease>
  bool release_empty(RawRelease&& raw_release) {
    if (current_ && current_->live == 0) {
      empty_.push_back(current_);
      current_ = nullptr;
    }
    const bool any = !empty_.empty();
    for (Slab* slab : empty_) drop(slab, raw_release);
    empty_.clear();
    return any;
  }

  std::size_t slab_count() const { return slabs_.size(); }

  // Frees every slab (the backend's destructor: no buffer of it is alive any more).
  template <class RawRelease>
  void release_all(RawRelease&& raw_release) {
    for (const std::unique_ptr<Slab>& slab : slabs_) {
      unpoison(slab->base, kSlabBytes);
      raw_release(static_cast<void*>(slab->base));
    }
    slabs_.clear();
    empty_.clear();
    current_ = nullptr;
  }

 private:
  struct Slab {
    std::byte* base;
    std::size_t used;
    std::int64_t live;
  };

  template <class RawAllocate>
  [[nodiscard]] Result<Slab*> next_slab(RawAllocate& raw_allocate) {
    if (!empty_.empty()) {
      Slab* slab = empty_.back();
      empty_.pop_back();
      return slab;
    }
    Result<void*> got = raw_allocate(kSlabBytes);
    if (!got) return tl::unexpected(got.error());
    auto slab = std::make_unique<Slab>(Slab{static_cast<std::byte*>(*got), 0, 0});
    poison(slab->base, kSlabBytes);
    Slab* raw = slab.get();
    slabs_.insert(std::upper_bound(slabs_.begin(), slabs_.end(), raw->base, by_base), std::move(slab));
    return raw;
  }

  template <class RawRelease>
  void drop(Slab* slab, RawRelease& raw_release) {
    unpoison(slab->base, kSlabBytes);
    raw_release(static_cast<void*>(slab->base));
    slabs_.erase(std::find_if(slabs_.begin(), slabs_.end(), [&](const auto& s) { return s.get() == slab; }));
  }

  // The slab whose range holds p, or nullptr.
  Slab* find(const void* p) const {
    const auto* at = static_cast<const std::byte*>(p);
    auto it = std::upper_bound(slabs_.begin(), slabs_.end(), at, by_base);
    if (it == slabs_.begin()) return nullptr;
    Slab* slab = std::prev(it)->get();
    return at < slab->base + kSlabBytes ? slab : nullptr;
  }
  static bool by_base(const std::byte* at, const std::unique_ptr<Slab>& slab) { return at < slab->base; }

  void poison(const void* p, std::size_t bytes) const { poison_held(host_memory_, p, bytes); }
  void unpoison(const void* p, std::size_t bytes) const { unpoison_held(host_memory_, p, bytes); }

  bool host_memory_;
  std::vector<std::unique_ptr<Slab>> slabs_;  // sorted by base
  std::vector<Slab*> empty_;                  // empty slabs kept for reuse, not current
  Slab* current_ = nullptr;                   // the slab carving goes on in
};

}  // namespace tapewise::detail
