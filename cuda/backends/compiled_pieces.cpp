// cuda/backends/compiled_pieces.cpp — NVRTC, loaded at run time, and the process's cache of compiled
// pieces (compiled_pieces.hpp): each distinct piece compiled once, by a worker thread while the
// interpreter runs it, loaded as a CUDA library and kept for the process, as PyTorch's runtime-compiled
// kernels are. A failure is remembered too: a piece that cannot compile costs one attempt.
#include "backends/compiled_pieces.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include <cuda.h>  // the driver's types only: its entry points come through the runtime
#include <cuda_runtime.h>
#include <nvrtc.h>

#include "backends/rtc_headers.hpp"
#include "core/log.hpp"

namespace tapewise::detail {
namespace {

// The NVRTC entry points used, from the library dlopen found (null members: not found).
struct Nvrtc {
  std::string error;  // why NVRTC is unusable, "" when it is usable
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error_string = nullptr;
};

template <class F>
bool bind(void* library, const char* name, F& to) {
  to = reinterpret_cast<F>(dlsym(library, name));
  return to != nullptr;
}

Nvrtc load_nvrtc() {
  Nvrtc n;
  std::vector<std::string> candidates;
  if (const char* path = std::getenv("TAPEWISE_NVRTC"); path && *path) {
    candidates.push_back(path);
  } else {
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                  "/usr/local/cuda/lib64/libnvrtc.so.12"};
  }
  void* library = nullptr;
  std::string tried;
  for (const std::string& candidate : candidates) {
    library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library) break;
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  if (!library) {
    n.error = "NVRTC not found (tried " + tried + "; TAPEWISE_NVRTC names the library)";
    return n;
  }
  const bool all = bind(library, "nvrtcCreateProgram", n.create) && bind(library, "nvrtcCompileProgram", n.compile) &&
                   bind(library, "nvrtcGetProgramLogSize", n.log_size) && bind(library, "nvrtcGetProgramLog", n.log) &&
                   bind(library, "nvrtcGetCUBINSize", n.cubin_size) && bind(library, "nvrtcGetCUBIN", n.cubin) &&
                   bind(library, "nvrtcDestroyProgram", n.destroy) && bind(library, "nvrtcGetErrorString", n.error_string);
  if (!all) n.error = "the NVRTC library found lacks an entry point tapewise uses (nvrtcGetCUBIN needs CUDA 11.1+)";
  return n;
}

const Nvrtc& nvrtc() {
  static const Nvrtc loaded = [] {
    Nvrtc n = load_nvrtc();
    if (n.error.empty())
      TAPEWISE_LOG(info, std::string("compiled pieces: NVRTC loaded"));
    else
      TAPEWISE_LOG(warn, "compiled pieces: " + n.error + "; every piece runs in the interpreter, with the same bits");
    return n;
  }();
  return loaded;
}

// The headers NVRTC resolves #include against: the kernels' own, and rtc_std.hpp for every standard
// header they name.
struct HeaderSet {
  std::vector<const char*> names, texts;
  HeaderSet() {
    for (int i = 0; i < kRtcHeaderCount; ++i) {
      names.push_back(kRtcHeaders[i].name);
      texts.push_back(kRtcHeaders[i].text);
    }
    for (const char* standard : {"algorithm", "cmath", "cstddef", "cstdint", "cstring", "initializer_list", "type_traits"}) {
      names.push_back(standard);
      texts.push_back("#include \"rtc_std.hpp\"\n");
    }
  }
};

// nvcc's floating-point flags for the library's kernels (CMakeLists.txt: tapewise_fp_flags): the same
// roundings, so a compiled piece gives the interpreter's bits. -default-device stands for nvcc's
// --expt-relaxed-constexpr (the op table's constexpr helpers, used in device code).
constexpr const char* kCompileOptions[] = {"--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false",
                                           "-std=c++20", "-default-device", "-DTAPEWISE_HAS_CUDA=1"};

// The driver's launch of a library kernel's function in the current context (cuKernelGetFunction once
// per device), its entry points reached through the runtime, so the library links no libcuda. Where
// they are unavailable, cudaLaunchKernel takes the cudaKernel_t itself.
struct Driver {
  decltype(&cuKernelGetFunction) get_function = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
};
const Driver& driver() {
  static const Driver d = [] {
    Driver found;
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuKernelGetFunction", &p, 12000, cudaEnableDefault, &status) == cudaSuccess &&
        status == cudaDriverEntryPointSuccess)
      found.get_function = reinterpret_cast<decltype(&cuKernelGetFunction)>(p);
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &p, 12000, cudaEnableDefault, &status) == cudaSuccess &&
        status == cudaDriverEntryPointSuccess)
      found.launch = reinterpret_cast<decltype(&cuLaunchKernel)>(p);
    cudaGetLastError();
    return found;
  }();
  return d;
}

// A piece seen before: compiling (in the background; the interpreter runs it meanwhile), compiled (its
// CUBIN, loaded by the next launch, in the launching thread: the worker makes no CUDA call), ready (its
// kernel, kept for the process, and the kernel's function in each device's context that launched it),
// irregular (piece_source gave no source) or failed (NVRTC or the loader refused it).
enum class State { compiling, compiled, ready, irregular, failed };
struct Entry {
  State state = State::compiling;
  std::vector<char> cubin;  // compiled, until loaded
  cudaKernel_t kernel = nullptr;
  std::vector<std::pair<int, CUfunction>> functions;  // by device
};
struct Job {
  std::string key, source, arch;
};

struct Cache {
  std::mutex mutex;
  std::condition_variable work, idle;
  std::unordered_map<std::string, Entry> entries;  // by piece_key
  std::deque<Job> queue;
  int unfinished = 0;  // jobs queued or compiling
  bool worker_started = false;
  bool exiting = false;  // the process is ending: nothing more is queued
  CompiledPieceStats stats;  // the distinct pieces' counts (under the mutex)
  std::atomic<std::int64_t> launch_host_ns{0}, driver_launch_ns{0};
  std::atomic<std::int64_t> launches{0}, interpreted_short{0}, interpreted_uneven{0}, interpreted_compiling{0},
      interpreted_irregular{0}, interpreted_failed{0};
};
// The process's cache, never destroyed: its kernels may be launched, and its worker run, until the
// process ends. A forked child gets a cache of its own, empty: fork copies only the forking thread, so
// the parent's worker, and any compilation the copy counts in flight, are not in the child (whose exit
// would wait for it 30 s), and CUDA's state is not inherited either. The fork holds the mutex, so the
// copy is taken between two changes, and the child leaves it locked and unused.
Cache* current_cache = nullptr;
void hold_cache_for_fork() { current_cache->mutex.lock(); }
void release_cache_after_fork() { current_cache->mutex.unlock(); }
void fresh_cache_in_child() { current_cache = new Cache; }
Cache& cache() {
  static const bool made = [] {
    current_cache = new Cache;
    return pthread_atfork(hold_cache_for_fork, release_cache_after_fork, fresh_cache_in_child) == 0;
  }();
  (void)made;
  return *current_cache;
}

// A piece's cache key: what its source is generated from (the math mode, the launch, each step's code,
// sources and slot writes), a few bytes a step, so a launch that finds its kernel builds no source.
std::string piece_key(std::span<const Step> steps, const PieceLaunch& launch, const CompiledPieceTarget& target) {
  std::string key = target.arch;
  key += target.exact_math ? 'e' : 'a';
  key += static_cast<char>(launch.dtype);
  key += static_cast<char>(launch.lanes);
  key += static_cast<char>(launch.steps_in_shared);
  key += static_cast<char>(launch.prefetch);
  key.append(reinterpret_cast<const char*>(&launch.capacity), sizeof launch.capacity);
  for (const Step& step : steps) {
    const StepKey k = key_of(step);
    key += static_cast<char>(k.code);
    key.append(reinterpret_cast<const char*>(&k.sources), sizeof k.sources);
    key += static_cast<char>(k.writes);
  }
  return key;
}

// Loads a compiled piece: the kernel, or an error saying why not.
Result<cudaKernel_t> load_kernel(const std::vector<char>& cubin) {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  cudaError_t err = cudaLibraryLoadData(&library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err == cudaSuccess) err = cudaLibraryGetKernel(&kernel, library, kPieceKernelName);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not sticky: the interpreter runs the piece
    return fail(ErrorCode::CudaFailure, std::string("loading a compiled tape program's piece: ") + cudaGetErrorName(err));
  }
  return kernel;
}

// At exit: drops what is queued and waits for the piece being compiled, so that the worker does not run
// into NVRTC's teardown. A piece takes well under a second (about 3 s under a profiler); the wait is
// bounded all the same, so an exit never hangs on a compilation.
void wait_for_the_worker_at_exit() {
  Cache& c = cache();
  std::unique_lock lock(c.mutex);
  c.exiting = true;
  c.unfinished -= static_cast<int>(c.queue.size());
  c.queue.clear();
  c.idle.wait_for(lock, std::chrono::seconds(30), [&] { return c.unfinished == 0; });
}

// The worker: compiles the queued pieces one after another, for the life of the process.
void compile_queued(Cache& c) {
  std::unique_lock lock(c.mutex);
  for (bool first = true;; first = false) {
    c.work.wait(lock, [&] { return !c.queue.empty(); });
    const Job job = std::move(c.queue.front());
    c.queue.pop_front();
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    Result<std::vector<char>> cubin = compile_piece_source(job.source, job.arch);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (cubin)
      TAPEWISE_LOG(info, "compiled pieces: NVRTC compiled a piece for " + job.arch + " in " + std::to_string(ms) + " ms");
    else
      TAPEWISE_LOG(warn, "compiled pieces: " + cubin.error().message + "; the interpreter runs that piece, with the same bits");
    lock.lock();
    Entry& entry = c.entries.at(job.key);
    c.stats.compile_ms += ms;
    if (cubin) {
      entry.cubin = std::move(*cubin);
      entry.state = State::compiled;
    } else {
      entry.state = State::failed;
      ++c.stats.failed;
      c.stats.last_error = cubin.error().message;
    }
    if (--c.unfinished == 0) c.idle.notify_all();
    if (first) std::atexit(wait_for_the_worker_at_exit);  // start_worker says why again
  }
}

// Exit runs its handlers in the reverse order of their registration, static destructors among them, and
// NVRTC registers some of its own during its first compilation. A wait registered before that ran after
// them: a compilation in flight at exit ran on NVRTC's destroyed state, and the exit crashed or hung
// (compute-sanitizer's exit status 11 and 60-s hangs, 2026-12-06/07, after every test had passed; the
// test CompiledPieces.AnExitWhileCompilingIsClean shows it without a GPU). So the worker's first
// compilation is a small program, compiled here in the starting thread with the pieces' headers and
// options, before the wait is registered; the worker registers it again after its first piece, for
// anything a larger program makes NVRTC make.
constexpr const char* kWarmUpSource =
    "#include \"op_math.cuh\"\n"
    "extern \"C\" __global__ void tapewise_warm_up(float* x) { x[threadIdx.x] = sinf(x[threadIdx.x]) + expf(x[0]); }\n";

void start_worker(Cache& c, const std::string& arch) {
  if (Result<std::vector<char>> warm = compile_piece_source(kWarmUpSource, arch); !warm && nvrtc().error.empty())
    TAPEWISE_LOG(warn, "compiled pieces: NVRTC's warm-up compilation: " + warm.error().message);
  std::atexit(wait_for_the_worker_at_exit);
  std::thread(compile_queued, std::ref(c)).detach();
  c.worker_started = true;
}

// A job for the worker (mutex held; its entry made by the caller), which starts on the first.
void queue_job(Cache& c, Job job) {
  if (!c.worker_started) start_worker(c, job.arch);
  c.queue.push_back(std::move(job));
  ++c.unfinished;
  c.work.notify_one();
}

// A piece seen for the first time (mutex held): queued for the worker, or irregular.
Entry first_sight(Cache& c, const std::string& key, std::span<const Step> steps, std::int64_t numel,
                  std::int64_t covered, const PieceLaunch& launch, const std::string& arch, bool exact_math) {
  Entry entry;
  std::optional<std::string> source = piece_source(steps, numel, covered, launch);
  // Exact mode's pieces define it ahead of the kernels' headers: another source, so another cache entry.
  if (source && exact_math) source->insert(0, "#define TAPEWISE_MATH_EXACT 1\n");
  if (!source) {
    TAPEWISE_LOG(debug, "compiled pieces: a piece of " + std::to_string(steps.size()) +
                            " steps has no compiled form: the interpreter runs it");
    entry.state = State::irregular;
    return entry;
  }
  TAPEWISE_LOG(debug, "compiled pieces: a piece of " + std::to_string(steps.size()) + " steps, " + std::to_string(numel) +
                          " elements, queued for NVRTC (" + arch + "); the interpreter runs it meanwhile");
  if (c.exiting) {
    entry.state = State::failed;
    return entry;
  }
  queue_job(c, Job{key, std::move(*source), arch});
  return entry;
}

// A compiled entry loaded, in the launching thread (mutex held): ready, or failed.
void load_compiled(Cache& c, Entry& entry) {
  Result<cudaKernel_t> kernel = load_kernel(entry.cubin);
  entry.cubin = {};
  if (kernel) {
    entry.kernel = *kernel;
    entry.state = State::ready;
    ++c.stats.compiled;
  } else {
    TAPEWISE_LOG(warn, "compiled pieces: " + kernel.error().message + "; the interpreter runs that piece, with the same bits");
    entry.state = State::failed;
    ++c.stats.failed;
    c.stats.last_error = kernel.error().message;
  }
}

// The ready entry's function in the current device's context (mutex held); null where the driver's
// entry points are unavailable (the runtime launches the kernel then).
CUfunction function_in_current_context(Entry& entry) {
  int device = -1;
  if (!driver().get_function || cudaGetDevice(&device) != cudaSuccess) return nullptr;
  for (const auto& [d, f] : entry.functions)
    if (d == device) return f;
  CUfunction f = nullptr;
  if (driver().get_function(&f, reinterpret_cast<CUkernel>(entry.kernel)) != CUDA_SUCCESS) return nullptr;
  entry.functions.emplace_back(device, f);
  return f;
}

}  // namespace

Result<std::vector<char>> compile_piece_source(const std::string& source, const std::string& arch) {
  const Nvrtc& n = nvrtc();
  if (!n.error.empty()) return fail(ErrorCode::CudaFailure, n.error);
  // Never destroyed, like the cache: the worker may be compiling while the process exits, and a
  // function-local static made on its first compilation, after the exit's wait was registered, would be
  // destroyed before that wait (start_worker: NVRTC's own statics did the same).
  static const HeaderSet& headers = *new HeaderSet;
  nvrtcProgram program = nullptr;
  nvrtcResult r = n.create(&program, source.c_str(), "tapewise_piece.cu", static_cast<int>(headers.names.size()),
                           headers.texts.data(), headers.names.data());
  if (r != NVRTC_SUCCESS) return fail(ErrorCode::CudaFailure, std::string("nvrtcCreateProgram: ") + n.error_string(r));
  const std::string arch_option = "--gpu-architecture=" + arch;
  std::vector<const char*> options = {arch_option.c_str()};
  for (const char* o : kCompileOptions) options.push_back(o);
  r = n.compile(program, static_cast<int>(options.size()), options.data());
  Result<std::vector<char>> out = std::vector<char>{};
  if (r != NVRTC_SUCCESS) {
    std::size_t size = 0;
    std::string log;
    if (n.log_size(program, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      n.log(program, log.data());
      log.resize(size - 1);
    }
    out = fail(ErrorCode::CudaFailure, std::string("NVRTC could not compile a tape program's piece for ") + arch + " (" +
                                           n.error_string(r) + "): " + log.substr(0, 2000));
  } else {
    std::size_t size = 0;
    if (n.cubin_size(program, &size) != NVRTC_SUCCESS || size == 0 || (out->resize(size), n.cubin(program, out->data())) != NVRTC_SUCCESS)
      out = fail(ErrorCode::CudaFailure, "NVRTC compiled a tape program's piece but gave no CUBIN for " + arch);
  }
  n.destroy(&program);
  return out;
}

CompiledPieceStats compiled_piece_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  CompiledPieceStats s = c.stats;
  s.launches = c.launches.load();
  s.interpreted_short = c.interpreted_short.load();
  s.interpreted_uneven = c.interpreted_uneven.load();
  s.interpreted_compiling = c.interpreted_compiling.load();
  s.launch_host_us = static_cast<double>(c.launch_host_ns.load()) / 1e3;
  s.driver_launch_us = static_cast<double>(c.driver_launch_ns.load()) / 1e3;
  s.interpreted_irregular = c.interpreted_irregular.load();
  s.interpreted_failed = c.interpreted_failed.load();
  return s;
}

std::string nvrtc_unavailable_reason() { return nvrtc().error; }

void compile_in_background(const std::string& source, const std::string& arch) {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  const std::string key = "source for " + arch + ":" + source;
  if (c.exiting || !c.entries.try_emplace(key).second) return;  // exiting, or queued or compiled before
  queue_job(c, Job{key, source, arch});
}

void wait_for_compiled_pieces() {
  Cache& c = cache();
  std::unique_lock lock(c.mutex);
  c.idle.wait(lock, [&] { return c.unfinished == 0; });
}

Result<PieceCompilation> piece_compilation_from_environment() {
  PieceCompilation p;
  if (const char* v = std::getenv("TAPEWISE_COMPILED_PIECES"); v && *v) {
    const std::string_view s(v);
    if (s == "1" || s == "on") p.enabled = true;
    else if (s == "0" || s == "off") p.enabled = false;
    else return fail(ErrorCode::InvalidArgument, std::string("TAPEWISE_COMPILED_PIECES=") + v + " is not one of 1, on, 0, off");
  }
  if (const char* v = std::getenv("TAPEWISE_PIECE_STEPS"); v && *v) {
    const std::string_view s(v);
    if (s == "parameter") p.steps_in_shared = false;
    else if (s == "shared") p.steps_in_shared = true;
    else return fail(ErrorCode::InvalidArgument, std::string("TAPEWISE_PIECE_STEPS=") + v + " is not one of parameter, shared");
  }
  return p;
}

bool launch_compiled_piece(std::span<const Step> steps, std::int64_t numel, std::int64_t covered,
                           const PieceLaunch& launch, const CompiledPieceTarget& target, unsigned blocks, void** args,
                           cudaStream_t stream, cudaError_t& err) {
  Cache& c = cache();
  auto interpreted = [](std::atomic<std::int64_t>& reason) {
    reason.fetch_add(1, std::memory_order_relaxed);
    return false;
  };
  if (!piece_long_enough(steps.size())) return interpreted(c.interpreted_short);
  if (!piece_even(numel, covered)) return interpreted(c.interpreted_uneven);
  const auto start = std::chrono::steady_clock::now();
  const std::string key = piece_key(steps, launch, target);
  cudaKernel_t kernel = nullptr;
  CUfunction function = nullptr;
  {
    std::lock_guard lock(c.mutex);
    auto it = c.entries.find(key);
    if (it == c.entries.end())
      it = c.entries.emplace(key, first_sight(c, key, steps, numel, covered, launch, target.arch, target.exact_math)).first;
    Entry& entry = it->second;
    if (entry.state == State::compiled) load_compiled(c, entry);
    switch (entry.state) {
      case State::compiling:
      case State::compiled: return interpreted(c.interpreted_compiling);
      case State::irregular: return interpreted(c.interpreted_irregular);
      case State::failed: return interpreted(c.interpreted_failed);
      case State::ready: break;
    }
    kernel = entry.kernel;
    function = function_in_current_context(entry);
  }
  const unsigned threads = kProgramThreads;
  const auto launch_start = std::chrono::steady_clock::now();
  if (function) {
    const CUresult r = driver().launch(function, blocks, 1, 1, threads, 1, 1, 0, reinterpret_cast<CUstream>(stream), args, nullptr);
    err = r == CUDA_SUCCESS                   ? cudaSuccess
          : r == CUDA_ERROR_OUT_OF_MEMORY     ? cudaErrorMemoryAllocation
          : r == CUDA_ERROR_INVALID_VALUE     ? cudaErrorInvalidValue
          : r == CUDA_ERROR_INVALID_HANDLE    ? cudaErrorInvalidResourceHandle
                                              : cudaErrorLaunchFailure;
  } else {
    err = cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(blocks), dim3(threads), args, 0, stream);
  }
  const auto end = std::chrono::steady_clock::now();
  c.launch_host_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(), std::memory_order_relaxed);
  c.driver_launch_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - launch_start).count(),
                               std::memory_order_relaxed);
  c.launches.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace tapewise::detail
