// cuda/backends/slab.hpp — small allocations carved from slabs: the backends' raw allocation for
// buffers of at most kMaxCarveBytes, so that recording a small node costs a few instructions instead
// of a device allocation and releasing it a bit set instead of a device free.
//
// Sizes are rounded up to a power of two from 256 bytes to 256 KiB (a size class), and each slab holds
// kSlots buffers of one class: a 4 MiB slab of 256 KiB buffers (2^16 float32 elements), a 4 KiB slab of
// 256-byte ones. A released slot is carved again by the next buffer of its class, so a buffer that
// outlives its neighbours (a gradient kept after its tape) pins at most a slab of its own class, never
// a 4 MiB one, and the slab's other slots stay in use: the bytes held stay proportional to the bytes
// live (at most kSlots times the live buffers' rounded sizes, and only when every slab keeps one
// buffer alone).
//
// An empty slab is kept for the next tape, within the caller's limit (kept_memory.hpp): on the H200 a
// 1,000-node chain at 2^16 elements fills 63 slabs, and keeping only 16 sent the other 47 through
// cudaFreeAsync and cudaMallocFromPoolAsync on every run.
// Buffers, their statistics and injected allocation failures are Backend's, above this layer:
// each carved buffer is still one counted allocation there.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
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
  static constexpr std::size_t kAlign = 256;  // as cudaMalloc's; also the smallest size class
  static constexpr int kAlignLog2 = 8;
  static constexpr std::size_t kSlots = 16;   // buffers per slab
  static constexpr int kClasses = 11;         // 256 B, 512 B, ..., 256 KiB
  static constexpr std::size_t kMaxCarveBytes = kAlign << (kClasses - 1);  // 2^16 float32 elements
  static constexpr std::size_t kLargestSlabBytes = kSlots * kMaxCarveBytes;  // 4 MiB

  // host_memory: the slabs are host memory, which AddressSanitizer builds poison between buffers.
  explicit SlabAllocator(bool host_memory) : host_memory_(host_memory) {}
  SlabAllocator(const SlabAllocator&) = delete;
  SlabAllocator& operator=(const SlabAllocator&) = delete;

  static bool carves(std::size_t bytes) { return bytes > 0 && bytes <= kMaxCarveBytes; }
  // The size class of `bytes` (carves(bytes)): the smallest k with slot_bytes(k) >= bytes.
  static int size_class(std::size_t bytes) {
    return static_cast<int>(std::bit_width((std::max(bytes, kAlign) - 1) / kAlign));
  }
  static std::size_t slot_bytes(int size_class) { return kAlign << size_class; }
  static std::size_t slab_bytes(int size_class) { return kSlots * slot_bytes(size_class); }

  // `bytes` (carves(bytes)) from a free slot of its class: in a slab in use, else in a kept empty
  // slab, else in a new one that raw_allocate(slab_bytes) returns (Result<void*>; its error is
  // returned as is).
  template <class RawAllocate>
  [[nodiscard]] Result<void*> allocate(std::size_t bytes, RawAllocate&& raw_allocate) {
    const int k = size_class(bytes);
    SizeClass& sizes = classes_[k];
    if (sizes.open.empty()) {
      auto slab = take_slab(k, raw_allocate);
      if (!slab) return tl::unexpected(slab.error());
      open(*slab);
    }
    Slab* slab = sizes.open.back();
    const int slot = std::countr_zero(slab->free_slots);
    slab->free_slots &= ~(1u << slot);
    if (slab->free_slots == 0) close(slab);
    std::byte* p = slab->base + static_cast<std::size_t>(slot) * slot_bytes(slab->size_class);
    carved_bytes_ += slot_bytes(slab->size_class);
    unpoison(p, bytes);
    return static_cast<void*>(p);
  }

  // What release did with p.
  enum class Released { not_carved, slot, slab_emptied };

  // Frees p's slot when a slab holds it; not_carved for memory this allocator did not carve. A slab
  // left empty is kept (kept_bytes); the caller gives back what exceeds its limit (release_kept).
  Released release(void* p) {
    Slab* slab = find(p);
    if (!slab) return Released::not_carved;
    const std::size_t size = slot_bytes(slab->size_class);
    const std::size_t offset = static_cast<std::size_t>(static_cast<std::byte*>(p) - slab->base);
    const auto slot = static_cast<unsigned>(offset >> (kAlignLog2 + slab->size_class));  // offset / size
    const bool was_full = slab->free_slots == 0;
    slab->free_slots |= 1u << slot;
    carved_bytes_ -= size;
    poison(slab->base + slot * size, size);
    if (was_full) open(slab);
    if (slab->free_slots != kAllFree) return Released::slot;
    close(slab);  // empty, so open until now: it joins its class's kept empty slabs
    classes_[slab->size_class].empty.push_back(slab);
    kept_bytes_ += slab_bytes(slab->size_class);
    return Released::slab_emptied;
  }

  // Gives back kept empty slabs (raw_release), the largest classes first, until at most keep_bytes
  // are kept. Returns the bytes given back.
  template <class RawRelease>
  std::size_t release_kept(std::size_t keep_bytes, RawRelease&& raw_release) {
    std::size_t given = 0;
    for (int k = kClasses - 1; k >= 0 && kept_bytes_ > keep_bytes; --k) {
      std::vector<Slab*>& empty = classes_[k].empty;
      while (!empty.empty() && kept_bytes_ > keep_bytes) {
        Slab* slab = empty.back();
        empty.pop_back();
        kept_bytes_ -= slab_bytes(k);
        given += slab_bytes(k);
        drop(slab, raw_release);
      }
    }
    return given;
  }

  std::size_t slab_count() const { return slabs_.size(); }
  std::size_t slab_bytes() const { return slab_bytes_; }      // every slab's, in use or kept
  std::size_t kept_bytes() const { return kept_bytes_; }      // the kept empty slabs'
  std::size_t carved_bytes() const { return carved_bytes_; }  // the slots handed out

  // Frees every slab (the backend's destructor: no buffer of it is alive any more).
  template <class RawRelease>
  void release_all(RawRelease&& raw_release) {
    for (const std::unique_ptr<Slab>& slab : slabs_) {
      unpoison(slab->base, slab_bytes(slab->size_class));
      raw_release(static_cast<void*>(slab->base));
    }
    slabs_.clear();
    bases_.clear();
    last_found_ = nullptr;
    classes_ = {};
    slab_bytes_ = kept_bytes_ = carved_bytes_ = 0;
  }

 private:
  static constexpr std::uint32_t kAllFree = (std::uint32_t{1} << kSlots) - 1;
  static_assert(kSlots <= 32, "a slab's free slots are the bits of a 32-bit word");
  static_assert(std::size_t{1} << kAlignLog2 == kAlign);

  struct Slab {
    std::byte* base;
    int size_class;
    std::uint32_t free_slots;  // bit i: slot i is free
    std::size_t open_index;    // its place in its class's `open` while it has a free slot
  };
  struct SizeClass {
    std::vector<Slab*> open;   // slabs with a free slot and a live one
    std::vector<Slab*> empty;  // kept empty slabs
  };

  template <class RawAllocate>
  [[nodiscard]] Result<Slab*> take_slab(int k, RawAllocate& raw_allocate) {
    std::vector<Slab*>& empty = classes_[k].empty;
    if (!empty.empty()) {
      Slab* slab = empty.back();
      empty.pop_back();
      kept_bytes_ -= slab_bytes(k);
      return slab;
    }
    Result<void*> got = raw_allocate(slab_bytes(k));
    if (!got) return tl::unexpected(got.error());
    auto slab = std::make_unique<Slab>(Slab{static_cast<std::byte*>(*got), k, kAllFree, 0});
    poison(slab->base, slab_bytes(k));
    slab_bytes_ += slab_bytes(k);
    Slab* raw = slab.get();
    const auto at = std::upper_bound(bases_.begin(), bases_.end(), raw->base) - bases_.begin();
    bases_.insert(bases_.begin() + at, raw->base);
    slabs_.insert(slabs_.begin() + at, std::move(slab));
    return raw;
  }

  void open(Slab* slab) {
    std::vector<Slab*>& open = classes_[slab->size_class].open;
    slab->open_index = open.size();
    open.push_back(slab);
  }
  void close(Slab* slab) {  // swap-remove from its class's open slabs
    std::vector<Slab*>& open = classes_[slab->size_class].open;
    open[slab->open_index] = open.back();
    open[slab->open_index]->open_index = slab->open_index;
    open.pop_back();
  }

  template <class RawRelease>
  void drop(Slab* slab, RawRelease& raw_release) {
    unpoison(slab->base, slab_bytes(slab->size_class));
    raw_release(static_cast<void*>(slab->base));
    slab_bytes_ -= slab_bytes(slab->size_class);
    if (last_found_ == slab) last_found_ = nullptr;
    const auto at = std::upper_bound(bases_.begin(), bases_.end(), slab->base) - bases_.begin() - 1;
    bases_.erase(bases_.begin() + at);
    slabs_.erase(slabs_.begin() + at);
  }

  // The slab whose range holds p, or nullptr. A tape releases its values in the order it made them,
  // mostly a slab's worth in a row, so the last slab found is asked first; else the bases are searched,
  // side by side in one array (a search through the Slab records cost a dependent load a step: an
  // eighth of a tape's recording and release at one element).
  Slab* find(const void* p) {
    const auto* at = static_cast<const std::byte*>(p);
    if (last_found_ && holds(*last_found_, at)) return last_found_;
    auto it = std::upper_bound(bases_.begin(), bases_.end(), at);
    if (it == bases_.begin()) return nullptr;
    Slab* slab = slabs_[static_cast<std::size_t>(it - bases_.begin()) - 1].get();
    if (!holds(*slab, at)) return nullptr;
    last_found_ = slab;
    return slab;
  }
  static bool holds(const Slab& slab, const std::byte* at) {
    return at >= slab.base && at < slab.base + slab_bytes(slab.size_class);
  }

  void poison(const void* p, std::size_t bytes) const { poison_held(host_memory_, p, bytes); }
  void unpoison(const void* p, std::size_t bytes) const { unpoison_held(host_memory_, p, bytes); }

  bool host_memory_;
  std::vector<std::unique_ptr<Slab>> slabs_;  // sorted by base
  std::vector<const std::byte*> bases_;       // slabs_[i]->base at i
  Slab* last_found_ = nullptr;                // find's last answer (null once that slab is dropped)
  std::array<SizeClass, kClasses> classes_{};
  std::size_t slab_bytes_ = 0;
  std::size_t kept_bytes_ = 0;
  std::size_t carved_bytes_ = 0;
};

}  // namespace tapewise::detail
