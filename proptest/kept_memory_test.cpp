// proptest/kept_memory_test.cpp — the backends' raw allocation (backends/kept_memory.hpp, slab.hpp)
// on a counting host allocator: small buffers share slabs, a tape recorded again reaches a steady
// state with no allocation call however many slabs it fills, and running out of memory gives back
// every empty slab and kept block, never a live one, before the allocation is tried again.
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
  detail::KeptMemory memory{/*host_memory=*/true, /*keep_large_blocks=*/true};
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
  void* live_small = *f.allocate(1000);  // opens slab 1 and stays live
  std::vector<void*> fill;               // 15 more fill slab 1, the 16th opens slab 2
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

TEST(KeptMemory, MemoryItDidNotHandOutGoesStraightBack) {
  Fixture f;
  void* foreign = *f.raw.allocate(64);
  f.release(foreign);  // neither a slab's nor a kept block: given to the raw allocator
  EXPECT_TRUE(f.raw.outstanding.empty());
}

TEST(KeptMemory, WithoutKeptBlocksLargeBuffersGoStraightBack) {
  CountingAllocator raw;
  detail::KeptMemory memory{/*host_memory=*/true, /*keep_large_blocks=*/false};
  auto allocate = [&](std::size_t b) { return raw.allocate(b); };
  auto release = [&](void* p) { raw.release(p); };
  for (int i = 0; i < 3; ++i) {
    auto p = memory.allocate(SlabAllocator::kMaxCarveBytes + 1, allocate, release);
    ASSERT_TRUE(p) << p.error().str();
    memory.release(*p, release);
    EXPECT_TRUE(raw.outstanding.empty());
  }
  EXPECT_EQ(raw.calls, 3);
  memory.release_all(release);
}

}  // namespace
}  // namespace tapewise::testing
