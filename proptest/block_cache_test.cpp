// proptest/block_cache_test.cpp — the large-buffer cache under the CUDA backend's allocations
// (backends/block_cache.hpp), on a counting host allocator: a released block serves the next
// allocation of its size and no other, nothing is lost, and the kept blocks can be given back.
#include <cstddef>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "backends/block_cache.hpp"
#include "counting_allocator.hpp"

namespace tapewise::testing {
namespace {

struct Fixture {
  CountingAllocator raw;
  detail::BlockCache cache{true};
  Result<void*> allocate(std::size_t bytes) {
    return cache.allocate(bytes, [&](std::size_t b) { return raw.allocate(b); });
  }
  ~Fixture() { cache.release_kept([&](void* p) { raw.release(p); }); }
};

TEST(BlockCache, AReleasedBlockServesTheNextAllocationOfItsSizeOnly) {
  Fixture f;
  void* a = *f.allocate(1 << 20);
  ASSERT_TRUE(f.cache.release(a));
  EXPECT_EQ(f.cache.kept_bytes(), std::size_t{1} << 20);
  void* other = *f.allocate(2 << 20);  // another size: a new block
  EXPECT_NE(other, a);
  void* again = *f.allocate(1 << 20);  // the same size: the kept block, no allocation call
  EXPECT_EQ(again, a);
  EXPECT_EQ(f.raw.calls, 2);
  EXPECT_EQ(f.cache.kept_bytes(), 0u);
  ASSERT_TRUE(f.cache.release(again));
  ASSERT_TRUE(f.cache.release(other));
  EXPECT_EQ(f.raw.outstanding.size(), 2u);  // kept, not freed
}

TEST(BlockCache, MemoryItDidNotHandOutIsNotItsToKeep) {
  Fixture f;
  int local = 0;
  EXPECT_FALSE(f.cache.release(&local));
  void* a = *f.allocate(4096);
  ASSERT_TRUE(f.cache.release(a));
  EXPECT_FALSE(f.cache.release(a)) << "a block released twice";
}

TEST(BlockCache, AChainOfLargeNodesReachesASteadyStateWithoutAllocationCalls) {
  Fixture f;
  for (int run = 0; run < 5; ++run) {
    std::vector<void*> blocks;
    for (int node = 0; node < 100; ++node) blocks.push_back(*f.allocate((1 << 20) + 256 * (node % 3)));
    for (void* p : blocks) ASSERT_TRUE(f.cache.release(p));
  }
  EXPECT_EQ(f.raw.calls, 100);  // the first run's
}

TEST(BlockCache, ReleaseKeptGivesBackEveryKeptBlockAndNoLiveOne) {
  Fixture f;
  void* a = *f.allocate(1000);
  void* b = *f.allocate(2000);
  void* live = *f.allocate(3000);
  ASSERT_TRUE(f.cache.release(a));
  ASSERT_TRUE(f.cache.release(b));
  EXPECT_TRUE(f.cache.release_kept([&](void* p) { f.raw.release(p); }));
  EXPECT_EQ(f.cache.kept_bytes(), 0u);
  EXPECT_EQ(f.raw.outstanding, std::set<void*>{live});
  EXPECT_FALSE(f.cache.release_kept([&](void* p) { f.raw.release(p); })) << "nothing was kept";
  ASSERT_TRUE(f.cache.release(live));
}

}  // namespace
}  // namespace tapewise::testing
