// proptest/counting_allocator.hpp — host memory with a budget of allocations, counting calls and what
// is outstanding: the raw allocator beneath the backends' kept memory in its tests.
#pragma once

#include <cstddef>
#include <map>
#include <new>
#include <set>

#include <gtest/gtest.h>

#include <tapewise/core.hpp>

namespace tapewise::testing {

struct CountingAllocator {
  int budget = 1000;  // allocations left before it reports out of memory
  std::set<void*> outstanding;
  std::map<void*, std::size_t> sizes;  // of the outstanding allocations
  std::size_t outstanding_bytes = 0;
  int calls = 0;
  Result<void*> allocate(std::size_t bytes) {
    ++calls;
    if (budget == 0) return fail(ErrorCode::OutOfMemory, "budget spent");
    --budget;
    void* p = ::operator new(bytes, std::align_val_t{256});
    outstanding.insert(p);
    sizes[p] = bytes;
    outstanding_bytes += bytes;
    return p;
  }
  void release(void* p) {
    ASSERT_EQ(outstanding.erase(p), 1u) << "released twice or never allocated";
    outstanding_bytes -= sizes[p];
    sizes.erase(p);
    ::operator delete(p, std::align_val_t{256});
    ++budget;
  }
};

}  // namespace tapewise::testing
