// proptest/memory_stats_test.cpp — the memory a CPU backend holds for its buffers, through the C++
// door: kept gradients do not pin their tapes' slabs (the bytes reserved stay proportional to the
// bytes live), what is kept for the next tape stays within the kept memory limit (its default, the
// setter, TAPEWISE_KEPT_MEMORY_LIMIT), trim() gives back all of it and nothing live, and the
// statistics say so, also while other threads allocate. (The C ABI's door is in c_api_test.cpp,
// Python's in test_stats.py; the allocator itself in kept_memory_test.cpp.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <tapewise/tapewise.hpp>

#include "test_support.hpp"

namespace tapewise::testing {
namespace {

constexpr std::int64_t kSlabElements = std::int64_t{1} << 16;  // float32: the largest buffer a slab carves
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

std::shared_ptr<Backend> cpu() {
  unsetenv("TAPEWISE_KEPT_MEMORY_LIMIT");
  return must(make_cpu_backend(CpuOptions{1}));
}

// Records a chain of `nodes` values of 2^16 float32 elements (256 KiB each) node by node, as a
// tape that fills slabs does, and returns the tape.
Tape chain(const std::shared_ptr<Backend>& backend, int nodes) {
  Tape tape(backend);
  must(tape.set_options(TapeOptions{.program_threshold = 0}));
  NodeId x = must(tape.leaf(host(std::vector<float>(static_cast<std::size_t>(kSlabElements), 0.5f))));
  for (int i = 0; i < nodes; ++i) x = must(tape.neg(x));
  return tape;
}

// The case: every tape fills more than a 4 MiB slab and one 1-element gradient of it is kept.
// Carved from a 4 MiB slab each, 300 of them held 300 slabs (1.2 GB); carved from slabs of their own
// size they hold a few KiB, beside the two slabs the next tape finds again.
TEST(MemoryStats, KeptOneElementGradientsDoNotPinTheirTapesSlabs) {
  const auto backend = cpu();
  std::vector<std::pair<NodeId, Gradients>> kept;
  for (int i = 0; i < 300; ++i) {
    Tape tape = chain(backend, 20);
    const NodeId x = must(tape.leaf(host(std::vector<float>{0.25f})));
    const NodeId y = must(tape.sin(x));
    kept.emplace_back(x, must(tape.backward(y, host(std::vector<float>{1.0f}), std::vector<NodeId>{x})));
  }
  const MemoryStats stats = backend->stats();
  EXPECT_EQ(stats.count(AllocTag::gradient), 300);
  EXPECT_EQ(stats.count(AllocTag::value), 0);
  EXPECT_LE(stats.reserved_bytes, 8 * kMiB + kMiB / 4)
      << "the 21 values' two 4 MiB slabs, kept for the next tape, and a few KiB for 300 gradients of 4 bytes";
  EXPECT_GE(stats.kept_bytes, 8 * kMiB);
  EXPECT_EQ(backend->trim(), static_cast<std::size_t>(stats.kept_bytes));
  EXPECT_LE(backend->stats().reserved_bytes, 128 * 1024) << "what is left holds the gradients, 16 to a 4 KiB slab";
  for (const auto& [x, g] : kept) ASSERT_EQ(must(g.host(x)).to_vector<float>().size(), 1u);
}

TEST(MemoryStats, ReservedSlabAndKeptBytesFollowTheBuffers) {
  const auto backend = cpu();
  const MemoryStats empty = backend->stats();
  EXPECT_EQ(empty.reserved_bytes, 0);
  EXPECT_EQ(empty.slab_bytes, 0);
  EXPECT_EQ(empty.kept_bytes, 0);
  Buffer small = must(backend->allocate(Shape{3}, DType::float32, AllocTag::value));   // a 256-byte slot
  Buffer large = must(backend->allocate(Shape{kMiB}, DType::float32, AllocTag::value));  // 4 MiB, no slab
  MemoryStats stats = backend->stats();
  EXPECT_EQ(stats.total_live_bytes(), 12 + 4 * kMiB);
  EXPECT_EQ(stats.slab_bytes, 16 * 256) << "one slab of sixteen 256-byte slots";
  EXPECT_EQ(stats.reserved_bytes, stats.slab_bytes + 4 * kMiB);
  EXPECT_EQ(stats.kept_bytes, 0);
  large.reset();  // kept, for the next buffer of its size
  small.reset();  // its slab is kept, empty
  stats = backend->stats();
  EXPECT_EQ(stats.reserved_bytes, 16 * 256 + 4 * kMiB);
  EXPECT_EQ(stats.kept_bytes, 16 * 256 + 4 * kMiB);
  EXPECT_EQ(stats, empty) << "equality compares the live allocations only";
  Buffer again = must(backend->allocate(Shape{kMiB}, DType::float32, AllocTag::value));
  EXPECT_EQ(backend->stats().kept_bytes, 16 * 256) << "the kept block is handed out again";
  EXPECT_EQ(backend->stats().reserved_bytes, 16 * 256 + 4 * kMiB) << "and nothing new is held";
}

TEST(MemoryStats, KeptLargeBlocksStayWithinTheLimitAndTrimGivesThemBack) {
  const auto backend = cpu();
  backend->set_kept_memory_limit(static_cast<std::size_t>(10 * kMiB));
  {
    std::vector<Buffer> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(must(backend->allocate(Shape{kMiB}, DType::float32, AllocTag::value)));
    EXPECT_EQ(backend->stats().reserved_bytes, 16 * kMiB);
  }
  MemoryStats stats = backend->stats();
  EXPECT_EQ(stats.kept_bytes, 8 * kMiB) << "two 4 MiB blocks fit the 10 MiB limit; the other two went back";
  EXPECT_EQ(stats.reserved_bytes, 8 * kMiB);
  EXPECT_EQ(backend->trim(), static_cast<std::size_t>(8 * kMiB));
  EXPECT_EQ(backend->stats().reserved_bytes, 0);
}

TEST(MemoryStats, TrimGivesBackEveryKeptSlabAndNoLiveBuffer) {
  const auto backend = cpu();
  Buffer live = must(backend->upload(host(std::vector<float>{1.0f, 2.0f, 3.0f})));
  { Tape tape = chain(backend, 40); }
  const MemoryStats before = backend->stats();
  EXPECT_EQ(before.kept_bytes, 12 * kMiB) << "41 values of 256 KiB: three 4 MiB slabs, empty";
  const std::size_t given = backend->trim();
  EXPECT_EQ(given, static_cast<std::size_t>(before.kept_bytes));
  const MemoryStats after = backend->stats();
  EXPECT_EQ(after.kept_bytes, 0);
  EXPECT_EQ(after.reserved_bytes, before.reserved_bytes - before.kept_bytes);
  EXPECT_EQ(after.reserved_bytes, 16 * 256) << "the live buffer's slab";
  EXPECT_EQ(must(backend->download(live)).to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(backend->trim(), 0u) << "nothing is left to give back";
  { Tape again = chain(backend, 40); }  // the allocator works on after a trim
  EXPECT_EQ(backend->stats().kept_bytes, before.kept_bytes);
}

TEST(MemoryStats, WhatIsKeptStaysWithinTheKeptMemoryLimit) {
  const auto backend = cpu();
  EXPECT_EQ(backend->kept_memory_limit(), static_cast<std::size_t>(256 * kMiB)) << "the CPU backend's default";
  backend->set_kept_memory_limit(static_cast<std::size_t>(8 * kMiB));
  { Tape tape = chain(backend, 100); }  // 101 values: seven 4 MiB slabs
  MemoryStats stats = backend->stats();
  EXPECT_EQ(stats.kept_bytes, 8 * kMiB);
  EXPECT_EQ(stats.reserved_bytes, 8 * kMiB);
  backend->set_kept_memory_limit(kMiB);  // a lower limit gives back what is above it now
  stats = backend->stats();
  EXPECT_EQ(stats.kept_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, 0);
  backend->set_kept_memory_limit(SIZE_MAX);
  EXPECT_EQ(backend->kept_memory_limit(), SIZE_MAX);
  { Tape tape = chain(backend, 100); }
  EXPECT_EQ(backend->stats().kept_bytes, 28 * kMiB);
}

// TAPEWISE_KEPT_MEMORY_LIMIT sets the default; an invalid value is refused by name, or, where no error
// can be returned (make_cpu_backend()), gives the default and says why. (Each test is a process of
// its own under ctest, so the variable changes nothing else.)
TEST(MemoryStats, TheEnvironmentVariableSetsTheKeptMemoryLimit) {
  const std::pair<const char*, std::size_t> good[] = {
      {"0", 0}, {"12345", 12345}, {"64K", 64 << 10}, {"64M", std::size_t{64} << 20}, {"3G", std::size_t{3} << 30}};
  for (const auto& [text, bytes] : good) {
    ASSERT_EQ(setenv("TAPEWISE_KEPT_MEMORY_LIMIT", text, 1), 0);
    EXPECT_EQ(must(make_cpu_backend(CpuOptions{1}))->kept_memory_limit(), bytes) << text;
    EXPECT_EQ(make_cpu_backend()->kept_memory_limit(), bytes) << text;
  }
  for (const char* bad : {"abc", "-1", "12X", "12k", " 4", "4 ", "M", "9999999999999999999", "4611686018427387905"}) {
    ASSERT_EQ(setenv("TAPEWISE_KEPT_MEMORY_LIMIT", bad, 1), 0);
    const auto be = make_cpu_backend(CpuOptions{1});
    ASSERT_FALSE(be) << bad;
    EXPECT_EQ(be.error().code, ErrorCode::InvalidArgument);
    EXPECT_NE(be.error().message.find(std::string("TAPEWISE_KEPT_MEMORY_LIMIT='") + bad + "' is not a byte count"),
              std::string::npos)
        << be.error().message;
    const std::shared_ptr<Backend> fallback = make_cpu_backend();
    EXPECT_EQ(fallback->kept_memory_limit(), static_cast<std::size_t>(256 * kMiB));
    EXPECT_NE(fallback->describe().find("TAPEWISE_KEPT_MEMORY_LIMIT"), std::string::npos) << fallback->describe();
  }
  unsetenv("TAPEWISE_KEPT_MEMORY_LIMIT");
}

// Threads recording tapes while another trims, changes the limit and reads the statistics: every
// buffer is accounted for at the end (and ThreadSanitizer builds see the allocator's locking).
TEST(MemoryStats, TrimAndTheLimitAreSafeWhileOtherThreadsAllocate) {
  const auto backend = cpu();
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&backend, t] {
      for (int i = 0; i < 20; ++i) {
        Tape tape = chain(backend, 4 + t);
        const NodeId first = tape.id_at(0);
        const NodeId y = must(tape.sin(first));
        const Gradients g = must(tape.backward(y, host(std::vector<float>(static_cast<std::size_t>(kSlabElements), 1.0f))));
        ASSERT_TRUE(g.has(first));
      }
    });
  for (int i = 0; i < 50; ++i) {
    backend->trim();
    backend->set_kept_memory_limit(static_cast<std::size_t>((i % 3) * 4 * kMiB));
    const MemoryStats stats = backend->stats();
    EXPECT_GE(stats.reserved_bytes, stats.kept_bytes);
    std::this_thread::yield();
  }
  for (std::thread& t : threads) t.join();
  const MemoryStats stats = backend->stats();
  EXPECT_EQ(stats.total_live_bytes(), 0);
  EXPECT_EQ(stats.reserved_bytes, stats.kept_bytes);
  backend->trim();
  EXPECT_EQ(backend->stats().reserved_bytes, 0);
}

}  // namespace
}  // namespace tapewise::testing
