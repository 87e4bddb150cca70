// proptest/kept_memory_test.cpp — the backends' raw allocation (backends/kept_memory.hpp, slab.hpp)
// on a counting host allocator: small buffers share slabs of their size class and reuse released
// slots, so a buffer kept alone pins a slab of its own size only; a tape recorded again reaches a
// steady state with no allocation call however many slabs it fills; what is kept stays within the
// limit; and running out of memory or release_kept (trim) gives back every empty slab and kept block,
// never a live one.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "backends/kept_memory.hpp"
#include "counting_allocator.hpp"

namespace tapewise::testing {
namespace {

using detail::SlabAllocator;

struct Fixture {
  CountingAllocator raw;
  detail::KeptMemory memory{/*host_memory=*/true};
  std::size_t release_kept(std::size_t keep_bytes) {
    return memory.release_kept(keep_bytes, [&](void* p) { raw.release(p); });
  }
  Result<void*> allocate(std::size_t bytes) {
    return memory.allocate(bytes, [&](std::size_t b) { return raw.allocate(b); }, [&](void* p) { raw.release(p); });
  }
  void release(void* p) {
    memory.release(p, [&](void* q) { raw.release(q); });
  }
  ~Fixture() { memory.release_all([&](void* p) { raw.release(p); }); }
};

TEST(KeptMemory, SmallBuffersShareASlabAlignedAndApart) {
  Fixture f;
  std::vector<std::byte*> buffers;
  for (int i = 0; i < 10; ++i) {
    auto p = f.allocate(100 + i);
    ASSERT_TRUE(p) << p.error().str();
    buffers.push_back(static_cast<std::byte*>(*p));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*p) % SlabAllocator::kAlign, 0u);
    std::memset(*p, i, 100 + i);  // writable over its whole size (ASan would see a poisoned byte)
  }
  EXPECT_EQ(f.raw.calls, 1) << "ten small buffers, one slab";
  EXPECT_EQ(std::set<std::byte*>(buffers.begin(), buffers.end()).size(), buffers.size());
  for (std::byte* p : buffers) f.release(p);
}

TEST(KeptMemory, AChainFillingManySlabsRecordsAgainWithoutAllocationCalls) {
  // As the 1,000-node chain at 2^16 float32 elements: 256 KiB per value, 16 per slab, 63 slabs.
  Fixture f;
  constexpr std::size_t kValueBytes = SlabAllocator::kMaxCarveBytes;
  for (int run = 0; run < 4; ++run) {
    std::vector<void*> values;
    for (int node = 0; node < 1000; ++node) {
      auto p = f.allocate(kValueBytes);
      ASSERT_TRUE(p) << p.error().str();
      values.push_back(*p);
    }
    for (void* p : values) f.release(p);
  }
  const int slabs = (1000 + 15) / 16;
  EXPECT_EQ(f.raw.calls, slabs) << "every run after the first reuses the kept slabs";
  EXPECT_EQ(f.memory.slabs().slab_count(), static_cast<std::size_t>(slabs));
}

TEST(KeptMemory, OutOfMemoryGivesBackEmptySlabsAndKeptBlocksButNoLiveBuffer) {
  Fixture f;
  f.raw.budget = 3;
  void* live_small = *f.allocate(1000);  // opens a slab of 1 KiB slots and stays live
  std::vector<void*> fill;               // sixteen fill a slab of 256 KiB slots
  for (int i = 0; i < 16; ++i) fill.push_back(*f.allocate(SlabAllocator::kMaxCarveBytes));
  void* large = *f.allocate(SlabAllocator::kMaxCarveBytes + 1);  // a block: the budget is spent
  for (void* p : fill) f.release(p);
  f.release(large);
  EXPECT_EQ(f.memory.blocks().kept_bytes(), SlabAllocator::kMaxCarveBytes + 1);
  ASSERT_EQ(f.raw.budget, 0);

  auto other = f.allocate(2 * SlabAllocator::kMaxCarveBytes);  // a size never kept
  ASSERT_TRUE(other) << other.error().str();
  EXPECT_EQ(f.memory.blocks().kept_bytes(), 0u);
  EXPECT_EQ(f.raw.outstanding.size(), 2u) << "the live small buffer's slab and the new block";
  EXPECT_EQ(f.memory.slabs().slab_count(), 1u);
  std::memset(live_small, 1, 1000);  // still the caller's

  f.raw.budget = 0;
  auto none = f.allocate(3 * SlabAllocator::kMaxCarveBytes);  // nothing kept to give back: the raw error
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::OutOfMemory);
  f.release(*other);
  f.release(live_small);
}

TEST(KeptMemory, SizeClassesArePowersOfTwoFrom256BytesTo256KiB) {
  EXPECT_EQ(SlabAllocator::size_class(1), 0);
  EXPECT_EQ(SlabAllocator::size_class(256), 0);
  EXPECT_EQ(SlabAllocator::size_class(257), 1);
  EXPECT_EQ(SlabAllocator::size_class(4096), 4);
  EXPECT_EQ(SlabAllocator::size_class(4097), 5);
  EXPECT_EQ(SlabAllocator::size_class(SlabAllocator::kMaxCarveBytes), SlabAllocator::kClasses - 1);
  EXPECT_EQ(SlabAllocator::slab_bytes(0), 4096u);
  EXPECT_EQ(SlabAllocator::slab_bytes(SlabAllocator::kClasses - 1), SlabAllocator::kLargestSlabBytes);
  EXPECT_FALSE(SlabAllocator::carves(0));
  EXPECT_FALSE(SlabAllocator::carves(SlabAllocator::kMaxCarveBytes + 1));
}

TEST(KeptMemory, AReleasedSlotServesTheNextBufferOfItsClass) {
  Fixture f;
  std::vector<void*> slots;
  for (int i = 0; i < 16; ++i) slots.push_back(*f.allocate(4096));
  EXPECT_EQ(f.raw.calls, 1) << "sixteen 4 KiB buffers, one slab";
  f.release(slots[5]);
  void* again = *f.allocate(4000);  // the same class: the free slot, no allocation call
  EXPECT_EQ(again, slots[5]);
  void* other = *f.allocate(100);  // another class: a slab of its own
  EXPECT_EQ(f.raw.calls, 2);
  EXPECT_EQ(f.memory.slabs().carved_bytes(), 16 * 4096u + 256u);
  f.release(other);
  for (void* p : slots) f.release(p);
  EXPECT_EQ(f.memory.slabs().carved_bytes(), 0u);
  EXPECT_EQ(f.memory.kept_bytes(), 16 * 4096u + 16 * 256u) << "both slabs empty, kept";
}

// Each tape fills more than a 4 MiB slab, and one small buffer of it outlives it: the kept buffers
// share the free slots of slabs of their own class, and the tapes' slabs are reused, empty.
TEST(KeptMemory, SmallBuffersThatOutliveTheirTapesPinOnlySlabsOfTheirSize) {
  Fixture f;
  std::vector<void*> kept;
  for (int tape = 0; tape < 300; ++tape) {
    std::vector<void*> values;
    for (int node = 0; node < 20; ++node) values.push_back(*f.allocate(SlabAllocator::kMaxCarveBytes));
    void* transient = *f.allocate(4);
    kept.push_back(*f.allocate(4));
    values.push_back(transient);
    for (void* p : values) f.release(p);
  }
  const std::size_t value_slabs = 2 * SlabAllocator::kLargestSlabBytes;
  const std::size_t kept_slabs = (300 + 15) / 16 * SlabAllocator::slab_bytes(0);
  EXPECT_EQ(f.raw.outstanding_bytes, value_slabs + kept_slabs) << "was 300 slabs of 4 MiB";
  EXPECT_EQ(f.memory.reserved_bytes(), f.raw.outstanding_bytes);
  EXPECT_EQ(f.memory.kept_bytes(), value_slabs);
  EXPECT_EQ(f.release_kept(0), value_slabs);
  EXPECT_EQ(f.memory.reserved_bytes(), kept_slabs);
  EXPECT_EQ(f.raw.outstanding_bytes, kept_slabs);
  for (void* p : kept) f.release(p);
}

TEST(KeptMemory, WhatIsKeptStaysWithinTheLimit) {
  Fixture f;
  f.memory.set_kept_limit(2 * SlabAllocator::kLargestSlabBytes + (1 << 20));
  std::vector<void*> values;
  for (int node = 0; node < 100; ++node) values.push_back(*f.allocate(SlabAllocator::kMaxCarveBytes));
  void* block = *f.allocate(1 << 20);
  for (void* p : values) f.release(p);
  f.release(block);
  EXPECT_EQ(f.memory.kept_bytes(), 2 * SlabAllocator::kLargestSlabBytes + (1 << 20));
  EXPECT_EQ(f.raw.outstanding.size(), 3u) << "two empty slabs and the block; the other five slabs went back";
  f.memory.set_kept_limit(0);  // the caller gives back what is above a lowered limit
  EXPECT_EQ(f.release_kept(f.memory.kept_limit()), 2 * SlabAllocator::kLargestSlabBytes + (1 << 20));
  EXPECT_TRUE(f.raw.outstanding.empty());
  void* lone = *f.allocate(100);  // with no room kept, an emptied slab goes back at once
  f.release(lone);
  EXPECT_TRUE(f.raw.outstanding.empty());
  EXPECT_EQ(f.memory.reserved_bytes(), 0u);
}

TEST(KeptMemory, ReleaseKeptGivesBackEmptySlabsAndBlocksButNoLiveBuffer) {
  Fixture f;
  void* live_small = *f.allocate(300);
  void* live_large = *f.allocate(3 << 20);
  void* empty_small = *f.allocate(SlabAllocator::kMaxCarveBytes);
  void* kept_large = *f.allocate(1 << 20);
  f.release(empty_small);
  f.release(kept_large);
  EXPECT_EQ(f.memory.reserved_bytes(), SlabAllocator::slab_bytes(1) + SlabAllocator::kLargestSlabBytes + (4u << 20));
  EXPECT_EQ(f.release_kept(0), SlabAllocator::kLargestSlabBytes + (1u << 20));
  EXPECT_EQ(f.memory.reserved_bytes(), SlabAllocator::slab_bytes(1) + (3u << 20));
  EXPECT_EQ(f.raw.outstanding.size(), 2u);
  std::memset(live_small, 1, 300);  // still the caller's
  std::memset(live_large, 1, 3 << 20);
  EXPECT_EQ(f.release_kept(0), 0u);
  f.release(live_small);
  f.release(live_large);
}

TEST(KeptMemory, MemoryItDidNotHandOutGoesStraightBack) {
  Fixture f;
  void* foreign = *f.raw.allocate(64);
  f.release(foreign);  // neither a slab's nor a kept block: given to the raw allocator
  EXPECT_TRUE(f.raw.outstanding.empty());
}

TEST(KeptMemory, UnderAKeptLimitOfZeroLargeBuffersGoStraightBack) {
  CountingAllocator raw;
  detail::KeptMemory memory{/*host_memory=*/true, /*kept_limit=*/0};
  auto allocate = [&](std::size_t b) { return raw.allocate(b); };
  auto release = [&](void* p) { raw.release(p); };
  for (int i = 0; i < 3; ++i) {
    auto p = memory.allocate(SlabAllocator::kMaxCarveBytes + 1, allocate, release);
    ASSERT_TRUE(p) << p.error().str();
    EXPECT_EQ(memory.reserved_bytes(), SlabAllocator::kMaxCarveBytes + 1) << "counted while live";
    memory.release(*p, release);
    EXPECT_TRUE(raw.outstanding.empty());
    EXPECT_EQ(memory.reserved_bytes(), 0u);
  }
  EXPECT_EQ(raw.calls, 3);
  memory.release_all(release);
}

// Release looks for a pointer's slab among slabs side by side, asking the last slab it found first. Two
// slabs adjacent in one arena, then a slab of another class on the address of one given back (memory
// underneath may hand out the same bytes again): each release must land in the slab holding it, never
// in its neighbour or in the slab given back.
TEST(KeptMemory, ReleasesFindTheirSlabBesideANeighbourAndOnAReusedAddress) {
  constexpr std::size_t kSmall = SlabAllocator::kAlign;      // class 0: a 4 KiB slab of 16 x 256 B
  constexpr std::size_t kMiddle = 2 * SlabAllocator::kAlign;  // class 1: an 8 KiB slab of 16 x 512 B
  alignas(SlabAllocator::kAlign) static std::byte arena[SlabAllocator::kSlots * (kSmall + kMiddle)];
  std::vector<std::size_t> script = {0, SlabAllocator::kSlots * kSmall, 0};  // each new slab's offset
  std::size_t made = 0;
  auto raw_allocate = [&](std::size_t) -> Result<void*> { return static_cast<void*>(arena + script.at(made++)); };
  auto raw_release = [](void*) {};
  SlabAllocator slabs(/*host_memory=*/false);
  using Released = SlabAllocator::Released;

  void* small = *slabs.allocate(kSmall, raw_allocate);    // slab A: arena[0, 4 KiB)
  void* middle = *slabs.allocate(kMiddle, raw_allocate);  // slab B: arena[4 KiB, 12 KiB)
  ASSERT_EQ(middle, arena + SlabAllocator::kSlots * kSmall);
  EXPECT_EQ(slabs.release(small), Released::slab_emptied);   // A, found last
  EXPECT_EQ(slabs.release(middle), Released::slab_emptied);  // B's first byte, just past A
  EXPECT_EQ(slabs.carved_bytes(), 0u);
  EXPECT_EQ(slabs.release_kept(0, raw_release), SlabAllocator::kSlots * (kSmall + kMiddle));
  EXPECT_EQ(slabs.slab_count(), 0u);

  std::vector<void*> middles;  // slab C, of class 1, on A's old address: arena[0, 8 KiB)
  for (std::size_t i = 0; i < SlabAllocator::kSlots; ++i) middles.push_back(*slabs.allocate(kMiddle, raw_allocate));
  ASSERT_EQ(middles.front(), static_cast<void*>(arena));
  EXPECT_EQ(made, 3u) << "one slab for all sixteen";
  EXPECT_EQ(slabs.release(middles[9]), Released::slot);  // past A's old end, inside C
  EXPECT_EQ(slabs.carved_bytes(), (SlabAllocator::kSlots - 1) * kMiddle);
  for (std::size_t i = 0; i + 1 < SlabAllocator::kSlots; ++i) {
    if (i != 9) {
      EXPECT_EQ(slabs.release(middles[i]), Released::slot) << i;
    }
  }
  EXPECT_EQ(slabs.release(middles.back()), Released::slab_emptied);
  EXPECT_EQ(slabs.release(arena + sizeof arena - 1), Released::not_carved) << "B's bytes belong to no slab now";
  slabs.release_all(raw_release);
}

}  // namespace
}  // namespace tapewise::testing
