// cuda/backends/cpu_backend.cpp — the CPU backend: the production per-element code (op_math.cuh) compiled
// for the host and run over the elements, on the calling thread and, for large tensors, the backend's
// worker threads (thread_pool.hpp), so machines without a GPU (CI) still run the production math.
// Host memory via operator new; the same tagging and counting as the CUDA backend. Exact mode only
// (kernels/math_mode.hpp): the host's libm differs from CUDA's, tapewise's own math is the same on both.
#define TAPEWISE_MATH_EXACT 1

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include <tapewise/backend.hpp>

#include "backends/engine.hpp"
#include "backends/kept_memory.hpp"
#include "backends/speculative_math.hpp"
#include "backends/thread_pool.hpp"
#include "core/log.hpp"
#include "core/whole_number.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/interpreter.hpp"

// GCC on x86-64 compiles the element loops also for x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512): an
// optimized build's second and third copies. Sanitizer builds and TAPEWISE_NO_ISA_CLONES (prove/mutants.py's
// builds) compile the baseline alone: each copy inlines every node's code once more, which costs minutes
// of compilation there.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__) && !defined(TAPEWISE_NO_ISA_CLONES)
#define TW_CPU_X86_CLONES 1
#else
#define TW_CPU_X86_CLONES 0
#endif

namespace tapewise {
namespace {

// body() in the chosen instruction set. For x86-64-v3 and -v4, flatten inlines everything body calls
// (the element loop, the node's per-element code, tapewise's own math) into a copy compiled for that set.
// The code is the same in each and the build never contracts (-ffp-contract=off), so every operation
// rounds once in each and the bits are the same; the copies run fma as one instruction instead of a
// call into libm, and may put several elements in one vector register. GCC's generic tuning keeps
// AVX-512 code to 256-bit vectors; the v4 copy asks for 512 (exact float32 exp at 2^22 on this
// development machine's Xeon: 9.8 ms in the v3 copy, 6.3 in the v4 copy, one thread).
#if TW_CPU_X86_CLONES
template <class Body>
[[gnu::target("arch=x86-64-v3"), gnu::flatten]] void run_x86_64_v3(const Body& body) { body(); }
template <class Body>
[[gnu::target("arch=x86-64-v4,prefer-vector-width=512"), gnu::flatten]] void run_x86_64_v4(const Body& body) {
  body();
}
#endif

// `widest`: the widest copy compiled for this body, which a wider processor runs too. The tape programs'
// interpreter stops at x86-64-v3: each copy inlines it for every step and dtype (a v4 copy cost 52 of this
// file's 265 CPU-seconds of compilation, 2026-12-07), and its CPU pieces are small (kCpuProgramThreshold).
template <CpuIsa widest = CpuIsa::x86_64_v4, class Body>
void run_in([[maybe_unused]] CpuIsa isa, const Body& body) {
#if TW_CPU_X86_CLONES
  if constexpr (widest == CpuIsa::x86_64_v4)
    if (isa == CpuIsa::x86_64_v4) return run_x86_64_v4(body);
  if (isa == CpuIsa::x86_64_v3 || isa == CpuIsa::x86_64_v4) return run_x86_64_v3(body);
#endif
  body();
}

// Whether the float32 exact math runs in two passes (speculative_math.hpp) in this instruction set: where
// the first pass vectorizes, the x86-64-v3 and -v4 copies. The baseline copy beside them calls libm for
// every fma and would evaluate both of sin's and cos's polynomials, slower than the scalar loop; builds
// without those copies (sanitizers, mutants, other compilers and processors, AArch64's NEON) run the two
// passes, so they are checked there too. The bits are the same either way.
constexpr bool two_passes_pay([[maybe_unused]] CpuIsa isa) {
#if TW_CPU_X86_CLONES
  return isa == CpuIsa::x86_64_v3 || isa == CpuIsa::x86_64_v4;
#else
  return true;
#endif
}

// The per-node kernels' runner on the host: the elements in chunks over the pool; each element is
// the same code whatever thread runs it, in the instruction set the backend chose.
struct HostLoop {
  static constexpr bool kFixesPrims = true;  // dispatch_prim hands it FixedPrimFn: loops that vectorize
  detail::ThreadPool* pool;
  CpuIsa isa;
  template <class Fn, class T>
  [[nodiscard]] Result<void> run(const Fn& fn, std::int64_t n, const T* const* in, T* const* out, const char*) {
    detail::for_each_chunk(pool, n, [&](std::int64_t lo, std::int64_t hi) {
      run_in(isa, [&] {
        if constexpr (std::is_same_v<T, float>) {
          // float32 nodes built on exact functions: two passes, the first vectorized (speculative_math.hpp).
          const bool ran = two_passes_pay(isa) &&
                           detail::speculative::with_speculative(fn, [&](const auto& scalar, const auto& speculative) {
                             detail::speculative::run_two_passes(scalar, speculative, lo, hi, in, out);
                           });
          if (ran) return;
        }
        T x[Fn::nin > 0 ? Fn::nin : 1];
        T y[Fn::nout];
        for (std::int64_t i = lo; i < hi; ++i) {
          for (int k = 0; k < Fn::nin; ++k) x[k] = in[k][i];
          fn(x, y);
          for (int k = 0; k < Fn::nout; ++k) out[k][i] = y[k];
        }
      });
    });
    return {};
  }
};

// The CPUs this process may run on (its affinity mask, which a container or taskset narrows).
int available_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

constexpr int kMaxCpuThreads = 256;
// The empty slabs kept for the next tape, by default: the 1,000-node chain at 2^16 float32 elements
// fills 63 slabs of 4 MiB, which the next run of the chain finds again.
constexpr std::size_t kDefaultKeptLimit = std::size_t{256} << 20;
constexpr int kMaxDefaultThreads = 64;

// CpuOptions::threads as the backend uses it: the number given, else TAPEWISE_CPU_THREADS, else the
// CPUs this process may run on (at most kMaxDefaultThreads).
Result<int> resolve_threads(int requested) {
  if (requested < 0 || requested > kMaxCpuThreads)
    return fail(ErrorCode::InvalidArgument, "make_cpu_backend: threads " + std::to_string(requested) + " is outside 0.." +
                                                std::to_string(kMaxCpuThreads) +
                                                " (0: TAPEWISE_CPU_THREADS, else the CPUs this process may use)");
  if (requested > 0) return requested;
  const char* env = std::getenv("TAPEWISE_CPU_THREADS");
  if (env && *env) {
    const auto value = detail::whole_number(env, kMaxCpuThreads);
    if (!value || *value < 1)
      return fail(ErrorCode::InvalidArgument, std::string("make_cpu_backend: TAPEWISE_CPU_THREADS='") + env +
                                                  "' is not a whole number from 1 to " + std::to_string(kMaxCpuThreads));
    return static_cast<int>(*value);
  }
  return std::min(available_cpus(), kMaxDefaultThreads);
}

bool cpu_runs(CpuIsa isa) {
  switch (isa) {
#if TW_CPU_X86_CLONES
    case CpuIsa::x86_64_v3: return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::x86_64_v4: return __builtin_cpu_supports("x86-64-v4");
#endif
    case CpuIsa::baseline: return true;
    default: return false;
  }
}

Result<CpuIsa> isa_named(std::string_view name, const char* source) {
  for (CpuIsa isa : {CpuIsa::baseline, CpuIsa::x86_64_v3, CpuIsa::x86_64_v4}) {
    if (name != cpu_isa_name(isa)) continue;
    if (!cpu_runs(isa))
      return fail(ErrorCode::InvalidArgument, std::string("make_cpu_backend: ") + source + " " + cpu_isa_name(isa) +
                                                  ": this build or processor cannot run it");
    return isa;
  }
  return fail(ErrorCode::InvalidArgument, std::string("make_cpu_backend: ") + source + " '" + std::string(name) +
                                              "' is not baseline, x86-64-v3 or x86-64-v4");
}

// CpuOptions::isa as the backend uses it: the one given, else TAPEWISE_CPU_ISA, else the widest this
// processor runs.
Result<CpuIsa> resolve_isa(CpuIsa requested) {
  if (requested != CpuIsa::automatic) return isa_named(cpu_isa_name(requested), "instruction set");
  if (const char* env = std::getenv("TAPEWISE_CPU_ISA"); env && *env) return isa_named(env, "TAPEWISE_CPU_ISA");
  for (CpuIsa widest : {CpuIsa::x86_64_v4, CpuIsa::x86_64_v3})
    if (cpu_runs(widest)) return widest;
  return CpuIsa::baseline;
}

class CpuBackend final : public detail::Engine {
 public:
  // `note` says why the thread count is not what was asked for (make_cpu_backend() without options).
  CpuBackend(int threads, CpuIsa isa, std::string note)
      : pool_(threads > 1 ? std::make_unique<detail::ThreadPool>(threads) : nullptr), isa_(isa), note_(std::move(note)) {}
  ~CpuBackend() override { memory_.release_all(host_release); }

  BackendKind kind() const override { return BackendKind::cpu; }
  MathMode math() const override { return MathMode::exact; }
  std::string describe() const override {
    const int n = threads();
    return "CPU (the production per-element code on the host, " + std::to_string(n) + (n == 1 ? " thread" : " threads") +
           ", " + cpu_isa_name(isa_) + (note_.empty() ? "" : "; " + note_) + ")";
  }
  int threads() const { return pool_ ? pool_->threads() : 1; }
  CpuIsa isa() const { return isa_; }

  [[nodiscard]] Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                       Buffer& out) override {
    HostLoop loop{pool_.get(), isa_};
    return detail::run_forward(loop, op, s, inputs, out);
  }
  [[nodiscard]] Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                         const Buffer& g, std::span<Buffer* const> grads) override {
    HostLoop loop{pool_.get(), isa_};
    return detail::run_vjp(loop, op, s, inputs, g, grads);
  }
  [[nodiscard]] Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) override {
    HostLoop loop{pool_.get(), isa_};
    return detail::run_prim(loop, p, c, inputs, out);
  }
  // Each element runs every step in order through the interpreter the CUDA kernel runs, in the
  // same pieces (interpreter.hpp: run_steps_at; program.hpp: piece_at), so CI checks that code on the
  // host. The elements every step of a piece covers go kWideLanes at a time: a step's decode and the
  // loop around its lanes then serve 256 elements, where four lanes left programs 3.2x slower than
  // per-node loops at 2^12 (docs/performance.md, "The CPU backend"). The rest, a piece's last
  // elements, go four at a time, as the CUDA runner's lanes of a large piece (leaving lanes that a step
  // does not cover, as there). Lanes are independent (each runs its own element's code), so the bits
  // do not depend on the lane count. A large piece's elements are spread over the threads in chunks
  // of whole groups of lanes, the groups one thread would make.
  [[nodiscard]] Result<void> run_sealed_program(const detail::Program& program) override {
    constexpr int kLanes = 4;
    constexpr int kWideLanes = 256;  // about 32 KiB of lane state on the stack in float64
    static_assert(detail::kChunkElements % kWideLanes == 0 && kWideLanes % kLanes == 0,
                  "a chunk holds whole groups of lanes");
    for (std::size_t first = 0; first < program.steps.size();) {
      const detail::Piece piece = detail::piece_at(program, first, detail::kStepsPerLaunch);
      first += static_cast<std::size_t>(piece.count);
      auto run_piece = [&]<class T>() -> Result<void> {
        detail::for_each_chunk(pool_.get(), piece.numel, [&](std::int64_t lo, std::int64_t hi) {
          run_in<CpuIsa::x86_64_v3>(isa_, [&] {
            std::int64_t i = lo;
            for (; i + kWideLanes <= std::min(hi, piece.covered); i += kWideLanes)
              detail::run_steps_at<T, std::int64_t, kWideLanes, true>(piece.steps, piece.count, i, 1);
            for (; i < hi; i += kLanes) {
              if (i + kLanes <= piece.covered)
                detail::run_steps_at<T, std::int64_t, kLanes, true>(piece.steps, piece.count, i, 1);
              else
                detail::run_steps_at<T, std::int64_t, kLanes>(piece.steps, piece.count, i, 1);
            }
          });
        });
        return {};
      };
      TAPEWISE_CHECK(detail::with_dtype(piece.dtype, run_piece));
    }
    return {};
  }
  [[nodiscard]] Result<void> synchronize() override { return {}; }
  int dlpack_device_type() const override { return 1; }  // kDLCPU
  int device_id() const override { return 0; }

 protected:
  // Small buffers come from slabs, large ones from blocks kept by size (kept_memory.hpp), as on the CUDA
  // backend, within the kept memory limit.
  [[nodiscard]] Result<void*> raw_allocate(std::size_t bytes) override {
    return memory_.allocate(bytes, host_allocate, host_release);
  }
  void raw_release(void* p) override { memory_.release(p, host_release); }
  detail::KeptMemory* kept_memory() override { return &memory_; }
  std::size_t release_kept_memory(std::size_t keep_bytes) override { return memory_.release_kept(keep_bytes, host_release); }
  [[nodiscard]] Result<void> copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  [[nodiscard]] Result<void> copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return {};
  }
  // Host memory cannot be told from other memory here: the caller's word is taken (wrap's contract).
  [[nodiscard]] Result<void> check_caller_memory(const void*) const override { return {}; }

 private:
  [[nodiscard]] static Result<void*> host_allocate(std::size_t bytes) {
    void* p = ::operator new(bytes, std::align_val_t{detail::SlabAllocator::kAlign}, std::nothrow);
    if (!p) return fail(ErrorCode::OutOfMemory, "host allocation of " + std::to_string(bytes) + " bytes failed");
    return p;
  }
  static void host_release(void* p) { ::operator delete(p, std::align_val_t{detail::SlabAllocator::kAlign}); }

  detail::KeptMemory memory_{/*host_memory=*/true, kDefaultKeptLimit};
  std::unique_ptr<detail::ThreadPool> pool_;  // null: the calling thread alone
  CpuIsa isa_;
  std::string note_;
};

}  // namespace

Result<std::shared_ptr<Backend>> make_cpu_backend(const CpuOptions& options) {
  TAPEWISE_TRY(threads, resolve_threads(options.threads));
  TAPEWISE_TRY(isa, resolve_isa(options.isa));
  TAPEWISE_TRY(kept_limit, detail::kept_memory_limit_from_environment(kDefaultKeptLimit));
  auto backend = std::make_shared<CpuBackend>(threads, isa, "");
  backend->set_kept_memory_limit(kept_limit);
  TAPEWISE_LOG(info, "backend: " + backend->describe());
  return std::shared_ptr<Backend>(std::move(backend));
}

std::shared_ptr<Backend> make_cpu_backend() {
  // No Result to carry an error: what was invalid is replaced (one thread, the baseline instruction
  // set, the default limit), and describe() says why.
  auto threads = resolve_threads(0);
  auto isa = resolve_isa(CpuIsa::automatic);
  auto kept_limit = detail::kept_memory_limit_from_environment(kDefaultKeptLimit);
  std::string note = threads ? "" : threads.error().message + ", so 1 thread";
  if (!isa) note += (note.empty() ? "" : "; ") + isa.error().message + ", so baseline";
  if (!kept_limit) note += (note.empty() ? "" : "; ") + kept_limit.error().message + ", so 256 MiB";
  if (!note.empty()) TAPEWISE_LOG(warn, "the CPU backend: " + note);
  auto backend = std::make_shared<CpuBackend>(threads ? *threads : 1, isa ? *isa : CpuIsa::baseline, std::move(note));
  if (kept_limit) backend->set_kept_memory_limit(*kept_limit);
  TAPEWISE_LOG(info, "backend: " + backend->describe());
  return backend;
}

int cpu_threads(const Backend& backend) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  return cpu ? cpu->threads() : 0;
}

CpuIsa cpu_isa(const Backend& backend) {
  const auto* cpu = dynamic_cast<const CpuBackend*>(&backend);
  return cpu ? cpu->isa() : CpuIsa::baseline;
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::automatic: return "automatic";
    case CpuIsa::baseline: return "baseline";
    case CpuIsa::x86_64_v3: return "x86-64-v3";
    case CpuIsa::x86_64_v4: return "x86-64-v4";
  }
  return "unknown";
}

}  // namespace tapewise
