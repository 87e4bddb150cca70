// cuda/backends/thread_pool.hpp — the CPU backend's threads: a fixed set of workers that, with the
// calling thread, run the chunks of one elementwise call. Each element is computed by the same code
// whichever thread runs it, so results never depend on the thread count. One call at a time: a call
// made while another thread's runs takes its chunks alone, which gives the same bits and cannot
// deadlock.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tapewise::detail {

// A callable by reference, without std::function's allocation: the chunk body lives on the caller's
// stack for the whole call.
class ChunkBody {
 public:
  template <class F>
  explicit ChunkBody(F& f) : object_(&f), call_([](void* o, std::int64_t chunk) { (*static_cast<F*>(o))(chunk); }) {}
  void operator()(std::int64_t chunk) const { call_(object_, chunk); }

 private:
  void* object_;
  void (*call_)(void*, std::int64_t);
};

class ThreadPool {
 public:
  // `threads` counts the calling thread: threads - 1 workers are started (none for 1).
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~ThreadPool() {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Runs body(chunk) for every chunk in [0, chunks) and returns once all have run.
  void run(std::int64_t chunks, const ChunkBody& body) {
    std::unique_lock one_call(call_mutex_, std::try_to_lock);
    if (workers_.empty() || chunks < 2 || !one_call.owns_lock()) {
      for (std::int64_t c = 0; c < chunks; ++c) body(c);
      return;
    }
    Job job{body, chunks};
    {
      const std::lock_guard lock(mutex_);
      job_ = &job;
      ++generation_;
    }
    wake_.notify_all();
    const std::int64_t mine = job.take_chunks();
    std::unique_lock lock(mutex_);
    job.done += mine;
    // Every chunk has run and no worker still holds the job (it lives on this stack).
    finished_.wait(lock, [&] { return job.done == job.chunks && job.users == 0; });
    job_ = nullptr;
  }

 private:
  struct Job {
    const ChunkBody& body;
    std::int64_t chunks;
    std::atomic<std::int64_t> next{0};
    std::int64_t done = 0;  // chunks run (mutex_)
    int users = 0;          // workers inside the job (mutex_)
    std::int64_t take_chunks() {
      std::int64_t count = 0;
      for (std::int64_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks; ++count) body(c);
      return count;
    }
  };

  void work() {
    std::uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return stop_ || (job_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      Job& job = *job_;
      ++job.users;
      lock.unlock();
      const std::int64_t mine = job.take_chunks();
      lock.lock();
      job.done += mine;
      --job.users;
      if (job.done == job.chunks && job.users == 0) finished_.notify_all();
    }
  }

  std::mutex call_mutex_;  // one call at a time
  std::mutex mutex_;       // job_, generation_, stop_ and the job's counts
  std::condition_variable wake_, finished_;
  Job* job_ = nullptr;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

// The elements of one call in chunks of kChunkElements (a multiple of the program runner's four
// lanes): small tensors, under two chunks, run on the calling thread alone and pay for no thread.
inline constexpr std::int64_t kChunkElements = std::int64_t{1} << 15;

// range(lo, hi) over [0, n) in chunks, on `pool` (null: the calling thread).
template <class Range>
void for_each_chunk(ThreadPool* pool, std::int64_t n, Range&& range) {
  const std::int64_t chunks = (n + kChunkElements - 1) / kChunkElements;
  if (!pool || chunks < 2) {
    if (n > 0) range(std::int64_t{0}, n);
    return;
  }
  auto chunk = [&](std::int64_t c) { range(c * kChunkElements, std::min(n, (c + 1) * kChunkElements)); };
  pool->run(chunks, ChunkBody(chunk));
}

}  // namespace tapewise::detail
