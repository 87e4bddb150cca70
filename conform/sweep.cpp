// conform/sweep.cpp — `tapewise-conform sweep`: plans one job per node, dtype and run scalar
// set, drives the production kernels chunk by chunk over the case range (on one or several devices,
// or the CPU), re-checks the worst cases and one case of each cause with MPFR, validates the sweep's
// reference against MPFR, and prints the table, the causes and the JSON. The grading itself, and the
// causes, are sweep_reference.hpp, on the device or in host loops.
#include "sweep.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "cases.hpp"
#include "commands.hpp"
#include "exec.hpp"
#include "measure.hpp"
#include "reference.hpp"
#include "report.hpp"

namespace tapewise::conform {

struct SweepOptions {
  std::vector<Op> ops;        // in op-table order
  std::vector<Op> not_swept;  // --ops all, unary or binary: the nodes left out, without a sweep reference
  std::vector<DType> dtypes;  // float32 first
  bool range_given = false;
  std::uint64_t range_lo = 0, range_hi = 0;  // case indices [lo, hi), clamped to each node's count
  std::uint32_t stride = 1;                  // every stride-th case of the range (device sweeps)
  BackendChoice backend = BackendChoice::automatic;
  int devices = 1;
  std::string json_path;
  std::string junit_path;  // --junit: JUnit XML, one test case per node and dtype
  int pair_log2 = 16;                  // binary float32: 2^this cases per exponent pair (0..16)
  int float64_log2 = 32;               // float64 on the device: 2^this random cases per node (0..32)
  bool float64_mpfr = false;           // float64 libm nodes: MPFR on the host instead of double-double
  std::int64_t host_cases = 20000;     // ... that many cases per node
  std::int64_t validate = 1000000;     // reference vs MPFR: random cases in all
  std::uint64_t seed = 20261130;
  std::int64_t chunk = 0;              // elements per chunk; 0: 2^28 on CUDA, 2^20 on the CPU
  bool allow_long = false;             // run a CPU sweep estimated past kCpuSweepLimitSeconds
};
// A CPU sweep estimated to take longer than this is refused without --allow-long: the defaults
// sweep 2^32 cases per node, hours on a CPU, which nobody means by accident.
inline constexpr double kCpuSweepLimitSeconds = 30 * 60;
int sweep_command(const SweepOptions& options);
// "LO:HI", each decimal or 0x-hex, HI <= 2^32, LO < HI.
[[nodiscard]] Result<std::pair<std::uint64_t, std::uint64_t>> parse_sweep_range(const std::string& text);

using namespace sweep;

namespace {

// printf into a string (the table's columns).
template <class... Args>
std::string text(const char* format, Args... args) {
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, format, args...);
  return buffer;
}

constexpr std::uint64_t kFullRange = std::uint64_t{1} << 32;
constexpr double kSecondG = 0.7;  // the second upstream value, R(0.7) in the dtype: not a power of two

// --- the host engine: the same per-element code, in loops over host buffers ------------------------

class HostEngine final : public ChunkEngine {
 public:
  explicit HostEngine(int slots) : tallies_(static_cast<std::size_t>(slots)) { clear(); }

  [[nodiscard]] Result<void> generate(const Job& job, std::uint64_t base, Buffer& a, Buffer* b) override {
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      const std::uint32_t index = case_at(job, base + static_cast<std::uint64_t>(i));
      if (job.kind == CaseKind::bits16_exhaustive) {
        std::uint16_t va, vb;
        case_bits16(job, index, &va, &vb);
        static_cast<std::uint16_t*>(a.data())[i] = va;
        if (b) static_cast<std::uint16_t*>(b->data())[i] = vb;
      } else if (is_float64(job)) {
        double va, vb;
        case_doubles(job, index, &va, &vb);
        static_cast<double*>(a.data())[i] = va;
        if (b) static_cast<double*>(b->data())[i] = vb;
      } else {
        float va, vb;
        case_floats(job, index, &va, &vb);
        static_cast<float*>(a.data())[i] = va;
        if (b) static_cast<float*>(b->data())[i] = vb;
      }
    }
    return {};
  }

  [[nodiscard]] Result<void> fill(Buffer& g, double value) override {
    for (std::int64_t i = 0; i < g.numel(); ++i) {
      if (g.dtype() == DType::float64) static_cast<double*>(g.data())[i] = value;
      else if (is_16bit(g.dtype())) static_cast<std::uint16_t*>(g.data())[i] = bits16_of(g.dtype(), value);
      else static_cast<float*>(g.data())[i] = static_cast<float>(value);
    }
    return {};
  }

  [[nodiscard]] Result<void> grade(const Job& job, int slot, const OutputRequest& request, std::uint64_t base,
                                   const Buffer& a, const Buffer* b, const Buffer& produced) override {
    OutputTally& t = tallies_[static_cast<std::size_t>(slot)];
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      Inputs in;
      in.a = element(a, i);
      in.b = b ? element(*b, i) : 0.0;
      const ElementVerdict v = grade_element(job, request.output, request.g, request.bound, in, element(produced, i));
      add_to_tally(t, v, case_at(job, base + static_cast<std::uint64_t>(i)));
    }
    return {};
  }

  [[nodiscard]] Result<std::vector<OutputTally>> finish() override {
    std::vector<OutputTally> out = tallies_;
    clear();
    return out;
  }

 private:
  static double element(const Buffer& buffer, std::int64_t i) {
    if (buffer.dtype() == DType::float64) return static_cast<const double*>(buffer.data())[i];
    if (is_16bit(buffer.dtype())) return bits16_value(buffer.dtype(), static_cast<const std::uint16_t*>(buffer.data())[i]);
    return static_cast<const float*>(buffer.data())[i];
  }
  void clear() {
    for (OutputTally& t : tallies_) std::memset(&t, 0, sizeof t);
  }
  std::vector<OutputTally> tallies_;
};

// --- what is swept ----------------------------------------------------------------------------------

enum class Method { device_exhaustive, device_every_pair, device_pairs, device_random, host_mpfr };

const char* method_name(Method m) {
  switch (m) {
    case Method::device_exhaustive: return "every bit pattern";
    case Method::device_every_pair: return "every pair of bit patterns";
    case Method::device_pairs: return "every exponent pair x random mantissas, signs";
    case Method::device_random: return "random bit patterns + in-domain values, double-double reference";
    case Method::host_mpfr: return "random subset, graded with MPFR on the host";
  }
  return "";
}

struct Plan {
  Op op = Op::add;
  DType dtype = DType::float32;
  Scalars scalars;  // as given to the backend
  Method method = Method::device_exhaustive;
  Job job;
  std::uint64_t lo = 0, hi = 0;  // case indices [lo, hi), every stride-th (job.case_stride)
  std::vector<OutputRequest> outputs;
  std::uint64_t cases() const { return (hi - lo + job.case_stride - 1) / job.case_stride; }
};

double second_g(DType dtype) { return round_to(dtype, kSecondG); }

std::vector<OutputRequest> output_requests(Op op, DType dtype) {
  std::vector<OutputRequest> out;
  out.push_back({kY, 1.0, Bound{reference::forward_bound(op, dtype).ulp, reference::forward_bound(op, dtype).abs}});
  const reference::Bound vb = reference::vjp_bound(op, dtype);
  for (double g : {1.0, second_g(dtype)})
    for (int k = 1; k <= op_info(op).arity; ++k) out.push_back({k, g, Bound{vb.ulp, vb.abs}});
  return out;
}

const char* output_name(Op op, int output) {
  if (output == kY) return "y";
  if (op_info(op).arity == 1) return "dx";
  return output == kGradA ? "da" : "db";
}

// One sweep of a node at one of its scalar sets (spec/ops.def's run_scalars: one batch each).
Plan make_plan(Op op, DType dtype, const Scalars& scalars, const SweepOptions& o) {
  const OpInfo& info = op_info(op);
  Plan p;
  p.op = op;
  p.dtype = dtype;
  p.scalars = scalars;
  Job& j = p.job;
  j.op = op;
  j.dtype = dtype;
  j.arity = info.arity;
  j.scalar0 = round_to(dtype, p.scalars.s0);
  j.scalar1 = round_to(dtype, p.scalars.s1);
  j.scalar0_raw = p.scalars.s0;
  j.scalar1_raw = p.scalars.s1;
  j.pair_log2 = o.pair_log2;
  j.seed = o.seed;
  const reference::DomainLog2 domain = reference::bounds_domain(info, dtype);  // float16's is narrower
  j.domain_lo = domain.lo;
  j.domain_hi = domain.hi;
  j.positive_only = info.positive_only;
  std::uint64_t count = kFullRange;
  if (is_16bit(dtype)) {
    j.kind = CaseKind::bits16_exhaustive;
    p.method = info.arity == 1 ? Method::device_exhaustive : Method::device_every_pair;
    if (info.arity == 1) count = std::uint64_t{1} << 16;
  } else if (dtype == DType::float32) {
    j.kind = info.arity == 1 ? CaseKind::float32_exhaustive : CaseKind::float32_pairs;
    p.method = info.arity == 1 ? Method::device_exhaustive : Method::device_pairs;
    if (info.arity == 2) count = std::uint64_t{1} << (16 + o.pair_log2);
  } else {
    j.kind = CaseKind::float64_random;
    p.method = ieee_float64(op) || !o.float64_mpfr ? Method::device_random : Method::host_mpfr;
    count = p.method == Method::host_mpfr ? static_cast<std::uint64_t>(o.host_cases)
                                          : std::uint64_t{1} << o.float64_log2;
  }
  // --range and --stride pick case indices of the device sweeps; the MPFR subset is always its first
  // cases.
  const bool device = p.method != Method::host_mpfr;
  p.lo = device && o.range_given ? std::min(o.range_lo, count) : 0;
  p.hi = device && o.range_given ? std::min(o.range_hi, count) : count;
  j.case_lo = static_cast<std::uint32_t>(p.lo);
  j.case_stride = device ? o.stride : 1;
  p.outputs = output_requests(op, dtype);
  return p;
}

std::string op_names(const std::vector<Op>& ops) {
  std::string names;
  for (Op op : ops) names += (names.empty() ? "" : ", ") + std::string(op_name(op));
  return names;
}

// The node as the report names it: "scale(c=0.37)", "exp" (a node can be swept at several scalar sets).
std::string node_label(const Plan& p) {
  const std::string scalars = scalars_text(p.op, p.scalars);
  return scalars.empty() ? std::string(op_name(p.op)) : std::string(op_name(p.op)) + "(" + scalars + ")";
}

// --- the chunk driver -------------------------------------------------------------------------------

struct ChunkBuffers {
  Buffer a, b, y, ga, gb, g;
};

[[nodiscard]] Result<ChunkBuffers> allocate_chunk(Backend& backend, const Plan& p, std::int64_t n) {
  const DType d = p.dtype;
  const Shape shape{n};
  const bool binary = p.job.arity == 2;
  ChunkBuffers c;
  TAPEWISE_TRY(a, backend.allocate(shape, d, AllocTag::workspace));
  TAPEWISE_TRY(y, backend.allocate(shape, d, AllocTag::workspace));
  TAPEWISE_TRY(ga, backend.allocate(shape, d, AllocTag::workspace));
  TAPEWISE_TRY(g, backend.allocate(shape, d, AllocTag::workspace));
  c.a = std::move(a);
  c.y = std::move(y);
  c.ga = std::move(ga);
  c.g = std::move(g);
  if (binary) {
    TAPEWISE_TRY(b, backend.allocate(shape, d, AllocTag::workspace));
    TAPEWISE_TRY(gb, backend.allocate(shape, d, AllocTag::workspace));
    c.b = std::move(b);
    c.gb = std::move(gb);
  }
  return c;
}

// Forward and both fused VJPs of one chunk, each graded right after its kernel.
[[nodiscard]] Result<void> sweep_chunk(Backend& backend, ChunkEngine& engine, const Plan& p, ChunkBuffers& c,
                                       std::uint64_t base) {
  const bool binary = p.job.arity == 2;
  Buffer* b = binary ? &c.b : nullptr;
  if (auto r = engine.generate(p.job, base, c.a, b); !r) return r;
  const Buffer* ins[2] = {&c.a, binary ? &c.b : &c.a};
  const std::span<const Buffer* const> inputs(ins, binary ? 2 : 1);
  if (auto r = backend.forward(p.op, p.scalars, inputs, c.y); !r) return r;
  if (auto r = engine.grade(p.job, 0, p.outputs[0], base, c.a, b, c.y); !r) return r;
  Buffer* grads[2] = {&c.ga, &c.gb};
  for (std::size_t slot = 1; slot < p.outputs.size(); slot += static_cast<std::size_t>(p.job.arity)) {
    if (auto r = engine.fill(c.g, p.outputs[slot].g); !r) return r;
    if (auto r = backend.vjp_fused(p.op, p.scalars, inputs, c.g, std::span<Buffer* const>(grads, p.job.arity)); !r)
      return r;
    for (int k = 0; k < p.job.arity; ++k)
      if (auto r = engine.grade(p.job, static_cast<int>(slot) + k, p.outputs[slot + static_cast<std::size_t>(k)],
                                base, c.a, b, *grads[k]);
          !r)
        return r;
  }
  return {};
}

// Positions [lo, hi) of the plan's sweep (case_at maps them to case indices), chunk by chunk.
[[nodiscard]] Result<std::vector<OutputTally>> sweep_range(Backend& backend, ChunkEngine& engine, const Plan& p,
                                                           std::uint64_t lo, std::uint64_t hi, std::int64_t chunk,
                                                           std::atomic<std::int64_t>& done) {
  std::optional<ChunkBuffers> buffers;
  std::int64_t allocated = 0;
  for (std::uint64_t base = lo; base < hi;) {
    const auto n = static_cast<std::int64_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(chunk), hi - base));
    if (n != allocated) {  // the first chunk, and a shorter last one
      buffers.reset();
      TAPEWISE_TRY(c, allocate_chunk(backend, p, n));
      buffers.emplace(std::move(c));
      allocated = n;
    }
    if (auto r = sweep_chunk(backend, engine, p, *buffers, base); !r) return tl::unexpected(r.error());
    base += static_cast<std::uint64_t>(n);
    done += n;
  }
  return engine.finish();
}

void merge(OutputTally& into, const OutputTally& t) {
  for (int b = 0; b < kBucketCount; ++b) into.histogram[b] += t.histogram[b];
  into.above_bound += t.above_bound;
  for (int c = 0; c < kCauseCount; ++c) {
    into.above_by_cause[c] += t.above_by_cause[c];
    into.cause_example_key[c] = std::max(into.cause_example_key[c], t.cause_example_key[c]);
  }
  into.worst_domain_key = std::max(into.worst_domain_key, t.worst_domain_key);
  into.worst_finite_key = std::max(into.worst_finite_key, t.worst_finite_key);
  into.worst_ratio_key = std::max(into.worst_ratio_key, t.worst_ratio_key);
  into.worst_ratio_domain_key = std::max(into.worst_ratio_domain_key, t.worst_ratio_domain_key);
  for (int k = 0; k < kBinadeCount; ++k)
    into.worst_domain_by_binade[k] = std::max(into.worst_domain_by_binade[k], t.worst_domain_by_binade[k]);
  const auto recorded = [](const OutputTally& x) { return std::min<unsigned long long>(x.violations_recorded, kViolationSlots); };
  const unsigned long long have = recorded(into);
  for (unsigned long long k = 0; k < recorded(t) && have + k < kViolationSlots; ++k)
    into.violation_cases[have + k] = t.violation_cases[k];
  into.violations_recorded = std::min<unsigned long long>(have + recorded(t), kViolationSlots);
}

// --- backends: one per device -----------------------------------------------------------------------

struct Workers {
  std::vector<std::shared_ptr<Backend>> backends;
  std::vector<std::unique_ptr<ChunkEngine>> engines;  // made per plan (slot counts differ)
  std::string name, why;
};

[[nodiscard]] Result<Workers> open_backends(const SweepOptions& o) {
  Workers w;
  TAPEWISE_TRY(chosen, choose_backend(o.backend));
  w.name = chosen.name;
  w.why = chosen.why;
  w.backends.push_back(chosen.backend);
  if (chosen.name == "cuda")
    for (int d = 1; d < o.devices; ++d) {
      TAPEWISE_TRY(be, make_cuda_backend(CudaOptions{d, nullptr}));
      w.backends.push_back(be);
    }
  return w;
}

[[nodiscard]] Result<std::unique_ptr<ChunkEngine>> make_engine(Backend& backend, int slots) {
#ifdef TAPEWISE_HAS_CUDA
  if (backend.kind() == BackendKind::cuda) return make_cuda_engine(backend, slots);
#endif
  (void)backend;  // the host engine works on any host buffers
  return make_host_engine(slots);
}

// "42 s", "3.5 min", "14.2 h".
std::string duration_text(double seconds) {
  if (seconds < 90) return text("%.0f s", seconds);
  if (seconds < 5400) return text("%.1f min", seconds / 60);
  return text("%.1f h", seconds / 3600);
}

// The sweep's progress: the terminal line (report.hpp) when stdout is a terminal; otherwise a line on
// stderr every kProgressLogSeconds with the share done and the time left, so that a piped sweep of
// hours is never silent.
constexpr double kProgressLogSeconds = 30;

struct SweepProgress {
  explicit SweepProgress(std::int64_t total_cases)
      : line(total_cases, true), total(std::max<std::int64_t>(total_cases, 1)), log(::isatty(STDOUT_FILENO) != 1) {}
  Progress line;
  std::atomic<std::int64_t> done{0};
  std::int64_t reported = 0, total;
  std::string label;
  bool log;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last_log = start;

  void poll() {
    const std::int64_t now = done.load();
    line.advance(now - reported);
    reported = now;
    const auto t = std::chrono::steady_clock::now();
    if (!log || std::chrono::duration<double>(t - last_log).count() < kProgressLogSeconds) return;
    last_log = t;
    const double elapsed = std::chrono::duration<double>(t - start).count();
    const double share = static_cast<double>(now) / static_cast<double>(total);
    std::cerr << "tapewise-conform sweep: " << text("%.1f%%", 100 * share) << " of " << total << " cases (" << label
              << ")" << (share > 0.001 ? ", about " + duration_text(elapsed * (1 - share) / share) + " left" : "") << "\n";
  }
};

// Splits [lo, hi) over the backends, one thread each; merges the tallies.
[[nodiscard]] Result<std::vector<OutputTally>> sweep_on_devices(Workers& w, const Plan& p, std::int64_t chunk,
                                                                SweepProgress& progress) {
  const std::size_t devices = w.backends.size();
  const std::uint64_t total = p.cases(), share = (total + devices - 1) / devices;
  std::vector<Result<std::vector<OutputTally>>> results(devices, fail(ErrorCode::InvalidArgument, "not run"));
  std::vector<std::thread> threads;
  std::atomic<int> running{static_cast<int>(devices)};
  for (std::size_t d = 0; d < devices; ++d) {
    threads.emplace_back([&, d] {
      const std::uint64_t lo = std::min(total, share * d), hi = std::min(total, lo + share);  // positions
      auto engine = make_engine(*w.backends[d], static_cast<int>(p.outputs.size()));
      if (!engine) results[d] = tl::unexpected(engine.error());
      else results[d] = sweep_range(*w.backends[d], **engine, p, lo, hi, chunk, progress.done);
      --running;
    });
  }
  for (int tick = 0; running.load() > 0; ++tick) {  // short sleeps: a CPU slice takes milliseconds
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (tick % 50 == 0) progress.poll();
  }
  for (auto& t : threads) t.join();
  progress.poll();
  std::vector<OutputTally> merged(p.outputs.size());
  for (OutputTally& t : merged) std::memset(&t, 0, sizeof t);
  for (auto& r : results) {
    if (!r) return tl::unexpected(r.error());
    for (std::size_t s = 0; s < merged.size(); ++s) merge(merged[s], (*r)[s]);
  }
  return merged;
}

// --- MPFR on the host ---------------------------------------------------------------------------------

template <class Fn>
void parallel_for(std::int64_t n, Fn fn) {
  const auto threads = static_cast<std::int64_t>(std::clamp(std::thread::hardware_concurrency(), 1u, 32u));
  std::vector<std::thread> pool;
  for (std::int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      reference::ensure_precision();
      for (std::int64_t i = t; i < n; i += threads) fn(i);
      reference::release_thread_caches();
    });
  for (auto& th : pool) th.join();
}

std::vector<reference::Real> real_inputs(const Plan& p, const Inputs& in) {
  std::vector<reference::Real> r{reference::real(in.a)};
  if (p.job.arity == 2) r.push_back(reference::real(in.b));
  return r;
}

reference::Real mpfr_exact(const Plan& p, int output, const Inputs& in, double g) {
  const auto x = real_inputs(p, in);
  if (output == kY) return reference::forward(p.op, p.dtype, p.scalars, x);
  return reference::vjp(p.op, p.dtype, p.scalars, x, reference::real(g))[static_cast<std::size_t>(output - 1)];
}

reference::ErrorCheck mpfr_check(const Plan& p, const OutputRequest& request, const Inputs& in, double produced) {
  const auto x = real_inputs(p, in);
  const reference::Real exact = mpfr_exact(p, request.output, in, request.g);
  const reference::Real g = reference::real(request.g);
  const double w = reference::abs_weight(p.op, p.dtype, p.scalars, x, g, request.output != kY);
  return reference::check(exact, produced, p.dtype, reference::Bound{request.bound.ulp, request.bound.abs}, w);
}

// The production's outputs at a few cases (a small batch through the same backend): per slot.
[[nodiscard]] Result<std::vector<std::vector<double>>> production_at(Backend& backend, const Plan& p,
                                                                     const std::vector<Inputs>& cases) {
  std::vector<double> a, b;
  for (const Inputs& in : cases) {
    a.push_back(in.a);
    b.push_back(in.b);
  }
  std::vector<HostArray> inputs{host_array(p.dtype, a)};
  if (p.job.arity == 2) inputs.push_back(host_array(p.dtype, b));
  std::vector<std::vector<double>> out(p.outputs.size());
  for (std::size_t slot = 1; slot < p.outputs.size(); slot += static_cast<std::size_t>(p.job.arity)) {
    const HostArray g = host_array(p.dtype, std::vector<double>(cases.size(), p.outputs[slot].g));
    TAPEWISE_TRY(run, run_node(backend, p.op, p.scalars, inputs, &g, VjpPath::fused));
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (slot == 1) out[0].push_back(run.y.as_double(static_cast<std::int64_t>(i)));
      for (int k = 0; k < p.job.arity; ++k)
        out[slot + static_cast<std::size_t>(k)].push_back(run.grads[static_cast<std::size_t>(k)].as_double(static_cast<std::int64_t>(i)));
    }
  }
  return out;
}

// A rechecked worst case: the sweep's reading beside MPFR's.
struct Recheck {
  std::string why;  // "worst in domain", "worst finite", "worst ratio", "above bound", "<cause> example"
  std::uint32_t index = 0;
  Inputs in;
  double produced = 0, expected = 0;  // expected: R(exact) by MPFR
  double mpfr_ulps = 0, mpfr_ratio = 0;
  bool mpfr_within = true;
  double sweep_ulps = 0;
  bool sweep_within = true;
  bool agrees = true;  // the sweep's verdict equals MPFR's
  int cause = kCauseInDomain;  // of a value above its bound (sweep_reference.hpp, cause_of)
};

const char* cause_name(int cause) {
  static const char* names[kCauseCount] = {"in_domain", "overflow", "underflow", "unexplained"};
  return names[cause];
}

// Whether spec/bounds.def accepts values above the bound for this cause (only outside the domain).
bool cause_accepted(Op op, DType dtype, int cause) {
  const reference::OutsideDomain outside = reference::accepted_outside_domain(op, dtype);
  if (cause == kCauseOverflow) return reference::accepts_overflow(outside);
  if (cause == kCauseUnderflow) return reference::accepts_underflow(outside);
  return false;
}

struct OutputResult {
  OutputRequest request;
  OutputTally tally{};
  std::vector<Recheck> rechecks;
};

struct NodeResult {
  Plan plan;
  double seconds = 0;
  std::vector<OutputResult> outputs;
  std::string error;
};

std::vector<std::pair<std::string, std::uint32_t>> recheck_cases(const OutputTally& t) {
  std::vector<std::pair<std::string, std::uint32_t>> cases;
  auto add = [&](const char* why, unsigned long long key) {
    if (key_present(key)) cases.emplace_back(why, key_case(key));
  };
  add("worst in domain", t.worst_domain_key);
  add("worst finite", t.worst_finite_key);
  add("worst ratio", t.worst_ratio_key);
  add("worst ratio in domain", t.worst_ratio_domain_key);
  for (int c = 0; c < kCauseCount; ++c)
    if (t.cause_example_key[c] > 0)
      cases.emplace_back(std::string(cause_name(c)) + " example", static_cast<std::uint32_t>(t.cause_example_key[c] - 1));
  for (unsigned long long k = 0; k < std::min<unsigned long long>(t.violations_recorded, kViolationSlots); ++k)
    cases.emplace_back("above bound", t.violation_cases[k]);
  return cases;
}

[[nodiscard]] Result<void> recheck_with_mpfr(Backend& backend, NodeResult& node) {
  const Plan& p = node.plan;
  std::vector<Inputs> inputs;
  for (OutputResult& o : node.outputs)
    for (const auto& [why, index] : recheck_cases(o.tally)) {
      Recheck r;
      r.why = why;
      r.index = index;
      r.in = case_inputs(p.job, index);
      o.rechecks.push_back(r);
      inputs.push_back(r.in);
    }
  if (inputs.empty()) return {};
  TAPEWISE_TRY(produced, production_at(backend, p, inputs));
  std::size_t next = 0;
  for (std::size_t slot = 0; slot < node.outputs.size(); ++slot)
    for (Recheck& r : node.outputs[slot].rechecks) {
      const OutputRequest& request = node.outputs[slot].request;
      r.produced = produced[slot][next++];  // rechecks were listed in this order
      const reference::ErrorCheck c = mpfr_check(p, request, r.in, r.produced);
      r.expected = reference::round_to_dtype(mpfr_exact(p, request.output, r.in, request.g), p.dtype);
      r.mpfr_ulps = c.error_ulps;
      r.mpfr_ratio = c.ratio;
      r.mpfr_within = c.within;
      const ElementVerdict v = grade_element(p.job, request.output, request.g, request.bound, r.in, r.produced);
      r.sweep_ulps = v.graded.error_ulps;
      r.sweep_within = v.graded.within;
      r.cause = cause_of(p.job, request.output, r.in, request.g);
      if (p.method == Method::host_mpfr) {  // MPFR graded these: its verdict is the sweep's
        r.sweep_ulps = r.mpfr_ulps;
        r.sweep_within = r.mpfr_within;
      }
      r.agrees = r.sweep_within == r.mpfr_within;
    }
  return {};
}

// float64 nodes with libm stagings: a random subset, every value graded with MPFR (slow, exact).
[[nodiscard]] Result<std::vector<OutputTally>> grade_on_host_with_mpfr(Backend& backend, const Plan& p) {
  std::vector<Inputs> cases;
  for (std::uint64_t i = p.lo; i < p.hi; ++i) cases.push_back(case_inputs(p.job, static_cast<std::uint32_t>(i)));
  TAPEWISE_TRY(produced, production_at(backend, p, cases));
  std::vector<OutputTally> tallies(p.outputs.size());
  std::vector<std::mutex> locks(p.outputs.size());
  for (OutputTally& t : tallies) std::memset(&t, 0, sizeof t);
  parallel_for(static_cast<std::int64_t>(cases.size() * p.outputs.size()), [&](std::int64_t k) {
    const auto slot = static_cast<std::size_t>(k) % p.outputs.size(), i = static_cast<std::size_t>(k) / p.outputs.size();
    const OutputRequest& request = p.outputs[slot];
    const reference::ErrorCheck c = mpfr_check(p, request, cases[i], produced[slot][i]);
    const double rounded = reference::round_to_dtype(mpfr_exact(p, request.output, cases[i], request.g), p.dtype);
    Graded g;
    g.error_ulps = c.error_ulps;
    g.ratio = c.ratio;
    g.within = c.within;
    g.bucket = std::isfinite(rounded) ? (std::isfinite(c.error_ulps) ? bucket_of(c.error_ulps) : kNonfiniteUnexpected)
                                      : (c.within ? kNonfiniteExpected : kNonfiniteUnexpected);
    ElementVerdict v{g, in_domain(p.job, cases[i]), inputs_finite(p.job, cases[i]), kCauseInDomain};
    if (!g.within) v.cause = cause_of(p.job, request.output, cases[i], request.g);
    std::lock_guard<std::mutex> lock(locks[slot]);
    add_to_tally(tallies[slot], v, static_cast<std::uint32_t>(p.lo + i));
  });
  return tallies;
}

// --- validation of the sweep's reference against MPFR --------------------------------------------------

struct Validation {
  std::int64_t values = 0;
  std::int64_t failures = 0;
  double max_error_ulps = 0;         // |reference - exact| / ulp_of(R(exact)), host copy
  double max_device_error_ulps = 0;  // the device's copy (CUDA only)
  bool device_checked = false;
  std::vector<std::string> examples;
};

// Inputs for validation: random bits and in-domain values, as values of the dtype.
Inputs validation_inputs(const Plan& p, std::uint64_t k) {
  const auto index = static_cast<std::uint32_t>(splitmix64(p.job.seed ^ k));
  if (p.dtype == DType::float64 || p.job.kind == CaseKind::float32_pairs) return case_inputs(p.job, index);
  if (p.job.kind == CaseKind::bits16_exhaustive && (k & 1)) return case_inputs(p.job, index);  // every pattern
  Inputs in;
  double a, b;
  case_doubles(p.job, index, &a, &b);
  in.a = round_to_format(p.dtype, dd_exact(a));
  in.b = round_to_format(p.dtype, dd_exact(b));
  return in;
}

// Whether `value` (the sweep reference) is within the reference's stated bound of MPFR's exact.
bool reference_within(const Plan& p, int output, const Inputs& in, double g, DD value, double* error_ulps) {
  const reference::Real exact = mpfr_exact(p, output, in, g);
  const double rounded = reference::round_to_dtype(exact, p.dtype);
  const double mine = round_to_format(p.job.dtype, value);
  *error_ulps = 0;
  if (!std::isfinite(rounded)) return std::isnan(rounded) ? std::isnan(mine) : mine == rounded;
  if (!std::isfinite(mine)) return false;
  const reference::Real error = abs((reference::real(value.hi) - exact) + ldexp(reference::real(value.lo), value.lo_exp));
  const double ulp = reference::ulp_of(rounded, p.dtype);
  const double w = abs_weight_value(p.job, output, in, g);
  double allowed = kReferenceUlps * ulp + kReferenceSubnormalAbs;
  if (abs_root_output(p.op, output)) allowed += kReferenceAbsEps * reference::dtype_eps(p.dtype) * w;
  *error_ulps = (error / reference::real(ulp)).convert_to<double>();
  return error <= reference::real(allowed);
}

[[nodiscard]] Result<Validation> validate_reference(const std::vector<Plan>& plans, const SweepOptions& o,
                                                    bool on_device) {
  Validation v;
  std::vector<const Plan*> graded;
  for (const Plan& p : plans)
    if (p.method != Method::host_mpfr) graded.push_back(&p);
  if (graded.empty() || o.validate <= 0) return v;
  const std::int64_t per_plan = std::max<std::int64_t>(1, (o.validate + static_cast<std::int64_t>(graded.size()) - 1) /
                                                              static_cast<std::int64_t>(graded.size()));
  std::mutex lock;
  for (const Plan* p : graded) {
    for (const OutputRequest& request : p->outputs) {
      const std::int64_t n = per_plan / static_cast<std::int64_t>(p->outputs.size()) + 1;
      std::vector<Inputs> inputs;
      for (std::int64_t k = 0; k < n; ++k)
        inputs.push_back(validation_inputs(*p, static_cast<std::uint64_t>(k) * 8 + static_cast<std::uint64_t>(request.output) +
                                                   (request.g == 1.0 ? 0 : 4)));
      std::vector<DD> device_values;
#ifdef TAPEWISE_HAS_CUDA
      if (on_device) {
        TAPEWISE_TRY(values, device_reference_values(0, p->job, request.output, request.g, inputs));
        device_values = std::move(values);
        v.device_checked = true;
      }
#else
      (void)on_device;
#endif
      parallel_for(n, [&](std::int64_t k) {
        const Inputs& in = inputs[static_cast<std::size_t>(k)];
        double host_ulps = 0, device_ulps = 0;
        bool ok = reference_within(*p, request.output, in, request.g, exact_value(p->job, request.output, in, request.g), &host_ulps);
        if (!device_values.empty())
          ok = reference_within(*p, request.output, in, request.g, device_values[static_cast<std::size_t>(k)], &device_ulps) && ok;
        std::lock_guard<std::mutex> guard(lock);
        ++v.values;
        v.max_error_ulps = std::max(v.max_error_ulps, host_ulps);
        v.max_device_error_ulps = std::max(v.max_device_error_ulps, device_ulps);
        if (ok) return;
        ++v.failures;
        if (v.examples.size() < 8)
          v.examples.push_back(node_label(*p) + " " + dtype_name(p->dtype) + " " + output_name(p->op, request.output) +
                               " a=" + hex(in.a) + (p->job.arity == 2 ? " b=" + hex(in.b) : "") +
                               " g=" + hex(request.g));
      });
    }
  }
  return v;
}

// --- output ------------------------------------------------------------------------------------------

std::string format_ulps(unsigned long long key) {
  if (!key_present(key)) return "-";
  return text("%.3g", key_metric(key));
}

std::string input_text(const Plan& p, const Inputs& in, std::uint32_t index) {
  if (p.job.kind == CaseKind::float32_exhaustive) return text("0x%08x", index);
  if (p.job.kind == CaseKind::bits16_exhaustive && p.job.arity == 1) return text("0x%04x", index);
  auto bits = [&](double v) {
    if (p.dtype == DType::float32) return text("0x%08x", bits_of_float(static_cast<float>(v)));
    if (is_16bit(p.dtype)) return text("0x%04x", static_cast<unsigned>(bits16_of(p.dtype, v)));
    std::uint64_t b;
    std::memcpy(&b, &v, 8);
    return text("0x%016llx", static_cast<unsigned long long>(b));
  };
  return "(" + bits(in.a) + ", " + bits(in.b) + ")";
}

std::string bound_text(const Bound& b) {
  std::string t = text("%g ulp", b.ulp);
  if (b.abs > 0) t += text(" + %g eps", b.abs);
  return t;
}

// The values above the bound by cause, e.g. "overflow 46751", "in_domain 3!": a '!' marks a cause the
// node's row in spec/bounds.def does not accept (a failure).
std::string causes_text(const Plan& p, const OutputTally& t) {
  std::string out;
  for (int c = 0; c < kCauseCount; ++c) {
    if (t.above_by_cause[c] == 0) continue;
    if (!out.empty()) out += ", ";
    out += text("%s %llu", cause_name(c), t.above_by_cause[c]) + (cause_accepted(p.op, p.dtype, c) ? "" : "!");
  }
  return out.empty() ? "-" : out;
}

void print_table(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << text("%-9s %-8s %-3s %-9s %12s %10s %10s %10s %-16s %10s %10s  %s\n", "node", "dtype", "out", "g", "cases",
               "ulp(dom)", "ulp(fin)", "used(dom)", "bound", "above", "nonfin!", "worst input (ulp, MPFR)");
  for (const NodeResult& n : nodes) {
    const Plan& p = n.plan;
    if (!n.error.empty()) {
      out << text("%-9s %-8s error: ", node_label(p).c_str(), dtype_name(p.dtype)) << n.error << "\n";
      continue;
    }
    for (const OutputResult& o : n.outputs) {
      const OutputTally& t = o.tally;
      // The worst ratio when some value is not correctly rounded (ratio > 0), else the worst in domain.
      std::string worst = "-";
      for (const Recheck& r : o.rechecks)
        if ((r.why == "worst ratio" && r.mpfr_ratio > 0) || (r.why == "worst in domain" && worst == "-") ||
            (r.why == "worst finite" && worst == "-"))
          worst = input_text(p, r.in, r.index) + text(" (%.3g)", r.mpfr_ulps);
      out << text("%-9s %-8s %-3s %-9s %12llu %10s %10s %10s %-16s %10llu %10llu  ", node_label(p).c_str(), dtype_name(p.dtype),
                   output_name(p.op, o.request.output), o.request.output == kY ? "-" : text("%.3g", o.request.g).c_str(),
                   static_cast<unsigned long long>(p.cases()), format_ulps(t.worst_domain_key).c_str(),
                   format_ulps(t.worst_finite_key).c_str(), format_ulps(t.worst_ratio_domain_key).c_str(),
                   bound_text(o.request.bound).c_str(), t.above_bound, t.histogram[kNonfiniteUnexpected])
          << worst << "\n";
    }
  }
}

// Every output with values above its bound: how many of each cause, whether spec/bounds.def accepts
// the cause (outside the domain only), and one example of each, re-checked with MPFR.
void print_causes(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << "\nvalues above their bound, by cause (in_domain and unexplained always fail; overflow and underflow\n"
         "outside the domain pass where spec/bounds.def's TAPEWISE_SWEPT row accepts them):\n";
  bool any = false;
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs) {
      if (o.tally.above_bound == 0) continue;
      any = true;
      out << text("  %-9s %-8s %-3s g=%-6s ", node_label(n.plan).c_str(), dtype_name(n.plan.dtype),
                   output_name(n.plan.op, o.request.output), short_value(o.request.g, n.plan.dtype).c_str())
          << causes_text(n.plan, o.tally) << " (accepted outside: "
          << reference::outside_domain_name(reference::accepted_outside_domain(n.plan.op, n.plan.dtype)) << ")\n";
      for (const Recheck& r : o.rechecks)
        if (r.why.ends_with(" example"))
          out << "      " << r.why << ": " << input_text(n.plan, r.in, r.index) << "  "
              << short_value(r.produced, n.plan.dtype) << " vs " << short_value(r.expected, n.plan.dtype)
              << text("  %.4g ulp (MPFR)", r.mpfr_ulps) << "\n";
    }
  if (!any) out << "  none\n";
}

void print_rechecks(std::ostream& out, const std::vector<NodeResult>& nodes) {
  out << "\nworst and violating cases, re-checked with MPFR (produced, R(exact), ulp by MPFR | by the sweep):\n";
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs)
      for (const Recheck& r : o.rechecks) {
        // Violations and disagreements always; else the worst in domain, and the worst ratio when it
        // is not a correctly rounded value (ratio 0 picks an arbitrary case). The cause examples are
        // print_causes' (unless they disagree).
        if (r.why.ends_with(" example") && r.agrees) continue;
        const bool notable = r.why == "above bound" || !r.mpfr_within || !r.agrees;
        const bool same_as_domain = std::any_of(o.rechecks.begin(), o.rechecks.end(), [&](const Recheck& q) {
          return q.why == "worst in domain" && q.index == r.index;
        });
        if (r.why == "worst ratio" && same_as_domain && !notable) continue;
        if (!notable && r.why != "worst in domain" && !(r.why == "worst ratio" && r.mpfr_ratio > 0)) continue;
        out << text("  %-9s %-8s %-3s %-16s ", node_label(n.plan).c_str(), dtype_name(n.plan.dtype),
                     output_name(n.plan.op, o.request.output), r.why.c_str())
            << input_text(n.plan, r.in, r.index) << " g=" << short_value(o.request.g, n.plan.dtype) << "  "
            << short_value(r.produced, n.plan.dtype) << " vs " << short_value(r.expected, n.plan.dtype)
            << text("  %.4g | %.4g ulp  ", r.mpfr_ulps, r.sweep_ulps)
            << (r.mpfr_within ? "within" : std::string("ABOVE BOUND (") + cause_name(r.cause) + ")")
            << (r.agrees ? "" : "  REFERENCE DISAGREES WITH MPFR") << "\n";
      }
}

const char* bucket_name(int b) {
  static const char* names[kBucketCount] = {"le_0.5", "le_1",      "le_2", "le_4", "le_8", "gt_8", "nonfinite_expected",
                                            "nonfinite_unexpected"};
  return names[b];
}

// An output conforms when every value above its bound has a cause its row accepts outside the domain
// (none inside it, none unexplained) and every re-checked case agrees with MPFR.
bool output_conforms(const Plan& p, const OutputResult& o) {
  for (int c = 0; c < kCauseCount; ++c)
    if (o.tally.above_by_cause[c] > 0 && !cause_accepted(p.op, p.dtype, c)) return false;
  for (const Recheck& r : o.rechecks)
    if (!r.agrees) return false;
  return true;
}

bool node_conforms(const NodeResult& n) {
  if (!n.error.empty()) return false;
  for (const OutputResult& o : n.outputs)
    if (!output_conforms(n.plan, o)) return false;
  return true;
}

Json recheck_json(const Plan& p, const Recheck& r) {
  Json j;
  j["why"] = r.why;
  j["case"] = r.index;
  j["inputs"] = p.job.arity == 1 ? Json::array({hex(r.in.a)}) : Json::array({hex(r.in.a), hex(r.in.b)});
  j["input_bits"] = input_text(p, r.in, r.index);
  j["produced"] = hex(r.produced);
  j["expected"] = hex(r.expected);
  j["error_ulps_mpfr"] = number_json(r.mpfr_ulps);
  j["ratio_mpfr"] = number_json(r.mpfr_ratio);
  j["within_mpfr"] = r.mpfr_within;
  j["error_ulps_sweep"] = number_json(r.sweep_ulps);
  j["within_sweep"] = r.sweep_within;
  j["reference_agrees"] = r.agrees;
  if (!r.mpfr_within) j["cause"] = cause_name(r.cause);
  return j;
}

// The largest error inside the domain per binade of the first input (error against input):
// {"min_exponent": e0, "positive": [...], "negative": [...]}, entry k for floor(log2 |a|) = e0 + k,
// null where no input of that sign and binade was in the domain; null when there is none at all.
Json binade_maxima_json(const OutputTally& t) {
  int lo = kBinadeSpan, hi = -1;
  for (int k = 0; k < kBinadeCount; ++k)
    if (key_present(t.worst_domain_by_binade[k])) {
      lo = std::min(lo, k % kBinadeSpan);
      hi = std::max(hi, k % kBinadeSpan);
    }
  if (hi < 0) return Json(nullptr);
  Json positive = Json::array(), negative = Json::array();
  for (int e = lo; e <= hi; ++e) {
    for (auto [slot, into] : {std::pair{e, &positive}, std::pair{kBinadeSpan + e, &negative}}) {
      const unsigned long long key = t.worst_domain_by_binade[slot];
      into->push_back(key_present(key) ? number_json(key_metric(key)) : Json(nullptr));
    }
  }
  return {{"min_exponent", lo + kBinadeMinExponent}, {"positive", positive}, {"negative", negative}};
}

Json node_json(const NodeResult& n) {
  const Plan& p = n.plan;
  Json j;
  j["op"] = op_name(p.op);
  j["dtype"] = dtype_name(p.dtype);
  j["scalars"] = scalars_text(p.op, p.scalars);
  j["scalar_values"] = Json::array({p.scalars.s0, p.scalars.s1});  // as given; the kernels use R(each)
  j["method"] = method_name(p.method);
  j["range"] = Json::array({p.lo, p.hi});
  j["stride"] = p.job.case_stride;
  j["cases"] = p.cases();
  j["seconds"] = n.seconds;
  j["outside_domain_accepted"] = reference::outside_domain_name(reference::accepted_outside_domain(p.op, p.dtype));
  j["conforms"] = node_conforms(n);
  if (!n.error.empty()) j["error"] = n.error;
  j["outputs"] = Json::array();
  for (const OutputResult& o : n.outputs) {
    const OutputTally& t = o.tally;
    Json oj;
    oj["output"] = output_name(p.op, o.request.output);
    oj["g"] = o.request.output == kY ? Json(nullptr) : Json(o.request.g);
    oj["bound"] = {{"ulp", o.request.bound.ulp}, {"abs", o.request.bound.abs}};
    oj["max_ulp_domain"] = key_present(t.worst_domain_key) ? number_json(key_metric(t.worst_domain_key)) : Json(nullptr);
    oj["max_ulp_finite"] = key_present(t.worst_finite_key) ? number_json(key_metric(t.worst_finite_key)) : Json(nullptr);
    oj["max_ratio"] = key_present(t.worst_ratio_key) ? number_json(key_metric(t.worst_ratio_key)) : Json(nullptr);
    oj["max_ratio_domain"] =
        key_present(t.worst_ratio_domain_key) ? number_json(key_metric(t.worst_ratio_domain_key)) : Json(nullptr);
    oj["above_bound"] = t.above_bound;
    oj["above_bound_domain"] = t.above_by_cause[kCauseInDomain];
    Json causes;
    for (int c = 0; c < kCauseCount; ++c) causes[cause_name(c)] = t.above_by_cause[c];
    oj["above_bound_by_cause"] = causes;
    oj["causes_conform"] = output_conforms(p, o);
    oj["nonfinite_expected"] = t.histogram[kNonfiniteExpected];
    oj["nonfinite_unexpected"] = t.histogram[kNonfiniteUnexpected];
    Json h;
    for (int b = 0; b < kBucketCount; ++b) h[bucket_name(b)] = t.histogram[b];
    oj["histogram"] = h;
    oj["max_ulp_domain_by_binade"] = binade_maxima_json(t);
    oj["worst"] = Json::array();
    for (const Recheck& r : o.rechecks) oj["worst"].push_back(recheck_json(p, r));
    j["outputs"].push_back(oj);
  }
  return j;
}

Json validation_json(const Validation& v) {
  return {{"values", v.values},
          {"failures", v.failures},
          {"max_error_ulps_host", v.max_error_ulps},
          {"max_error_ulps_device", v.device_checked ? Json(v.max_device_error_ulps) : Json(nullptr)},
          {"stated_bound", {{"ulps", kReferenceUlps}, {"abs_eps_near_roots", kReferenceAbsEps}, {"subnormal_abs", kReferenceSubnormalAbs}}},
          {"examples", v.examples}};
}


std::int64_t default_chunk(const Workers& w) { return w.name == "cuda" ? std::int64_t{1} << 28 : std::int64_t{1} << 20; }

// --- the command's steps ----------------------------------------------------------------------------

// Seconds the plans would take on the CPU: each timed on up to kCalibrationCases of its cases spread
// over its range (the cost per case varies little within one sweep, much between nodes). The MPFR
// re-checks and the reference's validation come on top.
constexpr std::uint64_t kCalibrationCases = 2048;

[[nodiscard]] Result<double> estimate_cpu_seconds(Workers& w, const std::vector<Plan>& plans) {
  double seconds = 0;
  for (const Plan& p : plans) {
    if (p.cases() == 0) continue;
    Plan sample = p;
    const std::uint64_t n = std::min<std::uint64_t>(p.method == Method::host_mpfr ? 64 : kCalibrationCases, p.cases());
    const auto start = std::chrono::steady_clock::now();
    if (p.method == Method::host_mpfr) {
      sample.hi = sample.lo + n;
      TAPEWISE_TRY(tallies, grade_on_host_with_mpfr(*w.backends.front(), sample));
      (void)tallies;
    } else {
      sample.job.case_stride = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(std::uint64_t{p.job.case_stride} * (p.cases() / n), UINT32_MAX));
      TAPEWISE_TRY(engine, make_engine(*w.backends.front(), static_cast<int>(p.outputs.size())));
      std::atomic<std::int64_t> done{0};
      TAPEWISE_TRY(tallies, sweep_range(*w.backends.front(), *engine, sample, 0, n, static_cast<std::int64_t>(n), done));
      (void)tallies;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    seconds += elapsed / static_cast<double>(n) * static_cast<double>(p.cases());
  }
  return seconds;
}

// On the CPU: says how long the sweep will take, and refuses one past the limit without --allow-long.
[[nodiscard]] Result<void> check_cpu_duration(Workers& w, const std::vector<Plan>& plans, const SweepOptions& o) {
  if (w.name != "cpu") return {};
  TAPEWISE_TRY(seconds, estimate_cpu_seconds(w, plans));
  std::uint64_t cases = 0;
  for (const Plan& p : plans) cases += p.cases();
  std::cerr << "tapewise-conform sweep: " << cases << " cases on the CPU, estimated " << duration_text(seconds)
            << " (timed on a sample of each node; MPFR re-checks and validation come on top)\n";
  if (seconds <= kCpuSweepLimitSeconds || o.allow_long) return {};
  return fail(ErrorCode::InvalidArgument,
              "a CPU sweep of about " + duration_text(seconds) + " is refused without --allow-long (the limit is " +
                  duration_text(kCpuSweepLimitSeconds) + "): narrow it with --ops, --dtype, --range or --stride, run " +
                  "it on CUDA, or give --allow-long");
}

// One sweep per dtype, node and run scalar set, dtypes first.
std::vector<Plan> make_plans(const SweepOptions& o) {
  std::vector<Plan> plans;
  for (DType d : o.dtypes)
    for (Op op : o.ops)
      for (const Scalars& s : default_scalar_sets(op)) plans.push_back(make_plan(op, d, s, o));
  return plans;
}

// The run's settings, the nodes left out, and one line per planned sweep.
void print_plans(std::ostream& out, const Workers& w, const SweepOptions& o, std::int64_t chunk,
                 const std::vector<Plan>& plans) {
  out << "backend: " << w.name << " (" << w.why << "), " << w.backends.size() << " device(s): "
      << w.backends.front()->describe() << "\n";
  out << "seed " << o.seed << "; second g = R(0.7); chunk " << chunk << "; binary float32 pairs 2^" << o.pair_log2
      << " per exponent pair; float64 2^" << o.float64_log2 << " cases; bfloat16 and float16 every input"
      << (o.float64_mpfr ? text(" (IEEE nodes), %lld graded by MPFR (libm nodes)", static_cast<long long>(o.host_cases))
                         : std::string())
      << "\n";
  if (!o.not_swept.empty()) out << "not swept (no sweep reference yet): " << op_names(o.not_swept) << "\n";
  for (const Plan& p : plans)
    out << text("  %-9s %-8s %-40s ", op_name(p.op), dtype_name(p.dtype), scalars_text(p.op, p.scalars).c_str())
        << method_name(p.method)
        << text(", cases [%llu, %llu)", static_cast<unsigned long long>(p.lo), static_cast<unsigned long long>(p.hi))
        << (p.job.case_stride > 1
                ? text(" every %u-th: %llu", p.job.case_stride, static_cast<unsigned long long>(p.cases()))
                : std::string())
        << "\n";
}

// One plan swept (on the devices, or graded on the host with MPFR), its worst cases re-checked with
// MPFR; an error is kept in the result rather than ending the run.
NodeResult sweep_node(Workers& w, const Plan& p, std::int64_t chunk, SweepProgress& progress) {
  NodeResult n;
  n.plan = p;
  const auto start = std::chrono::steady_clock::now();
  auto tallies = p.method == Method::host_mpfr ? grade_on_host_with_mpfr(*w.backends.front(), p)
                                               : sweep_on_devices(w, p, chunk, progress);
  n.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!tallies) {
    n.error = tallies.error().str();
    return n;
  }
  for (std::size_t s = 0; s < p.outputs.size(); ++s) n.outputs.push_back({p.outputs[s], (*tallies)[s], {}});
  if (auto r = recheck_with_mpfr(*w.backends.front(), n); !r) n.error = r.error().str();
  return n;
}

std::vector<NodeResult> sweep_plans(Workers& w, const std::vector<Plan>& plans, std::int64_t chunk) {
  std::int64_t total = 0;  // the progress line counts the device sweeps' cases
  for (const Plan& p : plans)
    if (p.method != Method::host_mpfr) total += static_cast<std::int64_t>(p.cases());
  SweepProgress progress(total);
  std::vector<NodeResult> nodes;
  for (const Plan& p : plans) {
    progress.label = node_label(p) + " " + dtype_name(p.dtype);
    progress.line.set_label(progress.label);
    nodes.push_back(sweep_node(w, p, chunk, progress));
  }
  progress.line.clear();
  return nodes;
}

void print_validation(std::ostream& out, const Validation& v) {
  out << text("\nreference vs MPFR: %lld values, %lld outside the reference's stated bound, max %.3g ulp (host)",
              static_cast<long long>(v.values), static_cast<long long>(v.failures), v.max_error_ulps);
  if (v.device_checked) out << text(", %.3g ulp (device)", v.max_device_error_ulps);
  out << "\n";
  for (const std::string& e : v.examples) out << "  reference outside its bound: " << e << "\n";
}

// The closing line; whether the run conforms (every node sweep, and the reference's validation).
bool print_verdict(std::ostream& out, const std::vector<NodeResult>& nodes, const Validation& v) {
  int conforming = 0;
  for (const NodeResult& n : nodes) conforming += node_conforms(n) ? 1 : 0;
  out << conforming << "/" << nodes.size()
      << " node sweeps conform (inside their domains within their bounds; outside them, every value above\n"
         "its bound has a cause spec/bounds.def accepts)"
      << (v.failures ? "; the reference failed its validation" : "") << "\n";
  return conforming == static_cast<int>(nodes.size()) && v.failures == 0;
}

// A verdict needs every planned sweep to hold cases (a --range past a node's cases holds none) and
// the reference to be validated against MPFR on at least one value.
[[nodiscard]] Result<void> require_cases(const std::vector<Plan>& plans, const SweepOptions& o) {
  const bool uses_reference =
      std::any_of(plans.begin(), plans.end(), [](const Plan& p) { return p.method != Method::host_mpfr; });
  if (uses_reference && o.validate == 0) return fail(ErrorCode::InvalidArgument, "--validate 0 leaves the sweep's reference unchecked; a verdict needs at least 1");
  std::string empty;
  for (const Plan& p : plans)
    if (p.cases() == 0) empty += (empty.empty() ? "" : ", ") + node_label(p) + " " + dtype_name(p.dtype);
  if (empty.empty()) return {};
  return fail(ErrorCode::InvalidArgument, "no case to sweep for " + empty +
                                              (o.range_given ? " (--range lies past their cases)" : "") +
                                              "; a verdict needs at least one per node");
}

// After the run: an output with no graded value, or a validation of no value, cannot pass.
std::string missing_evidence(const std::vector<NodeResult>& nodes, const Validation& v) {
  const bool uses_reference = std::any_of(nodes.begin(), nodes.end(),
                                         [](const NodeResult& n) { return n.plan.method != Method::host_mpfr; });
  if (uses_reference && v.values == 0) return "the sweep's reference was validated on no value";
  for (const NodeResult& n : nodes)
    for (const OutputResult& o : n.outputs) {
      unsigned long long graded = 0;
      for (int b = 0; b < kBucketCount; ++b) graded += o.tally.histogram[b];
      if (graded == 0)
        return node_label(n.plan) + " " + dtype_name(n.plan.dtype) + " " + output_name(n.plan.op, o.request.output) +
               ": no value graded";
    }
  return "";
}

Json sweep_report_json(const Workers& w, const SweepOptions& o, const std::vector<NodeResult>& nodes,
                       const Validation& v, bool conforms) {
  Json j;
  j["schema"] = "tapewise-conform.sweep/2";
  j["backend"] = w.name;
  j["devices"] = w.backends.size();
  j["seed"] = o.seed;
  j["second_g"] = kSecondG;
  j["nodes"] = Json::array();
  for (const NodeResult& n : nodes) j["nodes"].push_back(node_json(n));
  j["not_swept"] = Json::array();
  for (Op op : o.not_swept) j["not_swept"].push_back(op_name(op));
  j["validation"] = validation_json(v);
  j["conforms"] = conforms;
  return j;
}

}  // namespace

std::unique_ptr<ChunkEngine> sweep::make_host_engine(int slots) { return std::make_unique<HostEngine>(slots); }

[[nodiscard]] Result<std::pair<std::uint64_t, std::uint64_t>> parse_sweep_range(const std::string& text) {
  const auto colon = text.find(':');
  auto number = [](std::string part) -> std::optional<std::uint64_t> {
    int base = 10;
    if (part.starts_with("0x") || part.starts_with("0X")) {
      part = part.substr(2);
      base = 16;
    }
    std::uint64_t v = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), v, base);
    if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size()) return std::nullopt;
    return v;
  };
  const auto bad = [&] { return fail(ErrorCode::InvalidArgument, "--range: '" + text + "' is not LO:HI (decimal or 0x hex, LO < HI <= 2^32)"); };
  if (colon == std::string::npos) return bad();
  const auto lo = number(text.substr(0, colon)), hi = number(text.substr(colon + 1));
  if (!lo || !hi || *lo >= *hi || *hi > kFullRange) return bad();
  return std::pair{*lo, *hi};
}

// Why a swept node does not conform: its error, or each output with values above the bound for a
// cause its row does not accept, or a re-check that disagrees with MPFR.
std::string node_failure(const NodeResult& n) {
  if (!n.error.empty()) return n.error;
  std::string text = "does not conform:";
  for (const OutputResult& o : n.outputs) {
    if (output_conforms(n.plan, o)) continue;
    text += std::string("\n") + output_name(n.plan.op, o.request.output) + " at g=" + std::to_string(o.request.g) + ":";
    for (int c = 0; c < kCauseCount; ++c)
      if (o.tally.above_by_cause[c] > 0 && !cause_accepted(n.plan.op, n.plan.dtype, c))
        text += " " + std::to_string(o.tally.above_by_cause[c]) + " above the bound (" + cause_name(c) + ")";
    for (const Recheck& r : o.rechecks)
      if (!r.agrees) text += " the sweep's reference disagrees with MPFR at case " + std::to_string(r.index);
  }
  return text;
}

// One test case per node (with its scalars where it is swept at several) and dtype swept, or skipped
// (no sweep reference), and one for the reference's validation against MPFR, on which every verdict rests.
std::vector<JunitCase> sweep_junit_cases(const SweepOptions& o, const std::vector<NodeResult>& nodes, const Validation& v) {
  std::vector<JunitCase> cases;
  for (const NodeResult& n : nodes)
    cases.push_back({std::string("tapewise.sweep.") + dtype_name(n.plan.dtype), node_label(n.plan),
                     node_conforms(n) ? "" : node_failure(n), ""});
  for (Op op : o.not_swept)
    for (DType dtype : o.dtypes)
      cases.push_back({std::string("tapewise.sweep.") + dtype_name(dtype), op_name(op), "",
                       "no sweep reference (spec/bounds.def: TAPEWISE_NOT_SWEPT)"});
  std::string validation_failure;
  if (v.failures > 0) {
    validation_failure = std::to_string(v.failures) + " of " + std::to_string(v.values) + " reference values disagree with MPFR";
    for (const std::string& e : v.examples) validation_failure += "\n" + e;
  }
  cases.push_back({"tapewise.sweep", "reference-validation", validation_failure, ""});
  return cases;
}

int sweep_command(const SweepOptions& o) {
  for (const auto& [path, option] : {std::pair{o.json_path, "--json"}, std::pair{o.junit_path, "--junit"}})
    if (!path.empty())
      if (auto ok = check_output(path, option); !ok) {
        std::cerr << "tapewise-conform sweep: " << ok.error().message << "\n";
        return kUsageError;
      }
  auto workers = open_backends(o);
  if (!workers) {
    std::cerr << "tapewise-conform sweep: " << workers.error().str() << "\n";
    return kUsageError;
  }
  Workers& w = *workers;
  if (o.devices > 1 && w.name != "cuda") {
    std::cerr << "tapewise-conform sweep: --devices " << o.devices << " splits a sweep over CUDA devices, but the backend is "
              << w.name << " (" << w.why << "); give --devices 1 or --backend cuda\n";
    return kUsageError;
  }
  const std::int64_t chunk = o.chunk > 0 ? o.chunk : default_chunk(w);
  const std::vector<Plan> plans = make_plans(o);
  if (auto empty = require_cases(plans, o); !empty) {
    std::cerr << "tapewise-conform sweep: " << empty.error().message << "\n";
    return kUsageError;
  }
  if (auto duration = check_cpu_duration(w, plans, o); !duration) {
    std::cerr << "tapewise-conform sweep: " << duration.error().message << "\n";
    return kUsageError;
  }
  print_plans(std::cout, w, o, chunk, plans);
  const std::vector<NodeResult> nodes = sweep_plans(w, plans, chunk);

  auto validation = validate_reference(plans, o, w.name == "cuda");
  if (!validation) {
    std::cerr << "tapewise-conform sweep: validation: " << validation.error().str() << "\n";
    return kUsageError;
  }
  print_table(std::cout, nodes);
  print_rechecks(std::cout, nodes);
  print_causes(std::cout, nodes);
  print_validation(std::cout, *validation);
  for (const NodeResult& n : nodes)
    std::cout << text("time %-9s %-8s %.2f s\n", node_label(n.plan).c_str(), dtype_name(n.plan.dtype), n.seconds);
  const bool ok = print_verdict(std::cout, nodes, *validation);
  if (const std::string missing = missing_evidence(nodes, *validation); ok && !missing.empty()) {
    std::cerr << "tapewise-conform sweep: no verdict: " << missing << "\n";
    return kUsageError;
  }

  if (!o.json_path.empty())
    if (auto r = write_json_output(o.json_path, "--json", sweep_report_json(w, o, nodes, *validation, ok)); !r) {
      std::cerr << "tapewise-conform sweep: " << r.error().str() << "\n";
      return kUsageError;
    }
  if (!o.junit_path.empty())
    if (auto r = write_junit(o.junit_path, "sweep", sweep_junit_cases(o, nodes, *validation)); !r) {
      std::cerr << "tapewise-conform sweep: " << r.error().str() << "\n";
      return kUsageError;
    }
  return ok ? kConforms : kViolation;
}

namespace {

// The sweep's command line, as text until parsed (CLI11 would wrap negative numbers around).
struct SweepCli {
  std::string ops = "all", dtype = "float32", backend = "auto", range, json, junit, seed = "20261130";
  std::string devices = "1", pair_log2 = "16", float64_log2 = "32", host_cases = "20000", validate = "1000000",
              chunk = "0", stride = "1";
  bool float64_mpfr = false, allow_long = false;
};

// The numeric options, each strictly decimal within its range (parse_whole_number).
[[nodiscard]] Result<void> read_numbers(const SweepCli& cli, SweepOptions& o) {
  TAPEWISE_TRY(devices, parse_whole_number(cli.devices, "--devices", 1, 64));
  TAPEWISE_TRY(stride, parse_whole_number(cli.stride, "--stride", 1, std::int64_t{1} << 31));
  TAPEWISE_TRY(pair_log2, parse_whole_number(cli.pair_log2, "--pair-log2", 0, 16));
  TAPEWISE_TRY(float64_log2, parse_whole_number(cli.float64_log2, "--float64-log2", 0, 32));
  TAPEWISE_TRY(host_cases, parse_whole_number(cli.host_cases, "--host-cases", 0, kMaxCases));
  TAPEWISE_TRY(validate, parse_whole_number(cli.validate, "--validate", 0, kMaxCases));
  TAPEWISE_TRY(chunk, parse_whole_number(cli.chunk, "--chunk", 0, std::int64_t{1} << 30));
  o.devices = static_cast<int>(devices);
  o.stride = static_cast<std::uint32_t>(stride);
  o.pair_log2 = static_cast<int>(pair_log2);
  o.float64_log2 = static_cast<int>(float64_log2);
  o.host_cases = host_cases;
  o.validate = validate;
  o.chunk = chunk;
  return {};
}

int usage(const std::string& message) {
  std::cerr << "tapewise-conform sweep: " << message << "\n";
  return kUsageError;
}

// --ops: node names, each of which must have a sweep reference (sweep_reference.hpp); or all, unary
// or binary: every node (of that arity) that has one, the others noted as not swept.
[[nodiscard]] Result<void> choose_nodes(const std::string& ops, const Selection& selection, SweepOptions& o) {
  const bool by_arity = ops == "unary" || ops == "binary";
  const bool every = ops.empty() || ops == "all" || by_arity;
  for (const OpInfo& info : kOps) {
    const bool selected = std::find(selection.ops.begin(), selection.ops.end(), info.op) != selection.ops.end();
    if (!selected || (by_arity && info.arity != (ops == "unary" ? 1 : 2))) continue;
    if (has_sweep_reference(info.op)) {
      o.ops.push_back(info.op);
    } else if (every) {
      o.not_swept.push_back(info.op);
    } else {
      return fail(ErrorCode::InvalidArgument,
                  std::string("--ops: ") + info.name +
                      " has no sweep reference yet (reference/sweep_reference.hpp transcribes each node the "
                      "sweep grades; spec/bounds.def records it as TAPEWISE_NOT_SWEPT)");
    }
  }
  if (o.ops.empty()) return fail(ErrorCode::InvalidArgument, "--ops '" + ops + "': no node with a sweep reference");
  return {};
}

int run_sweep_cli(const SweepCli& cli) {
  SweepOptions o;
  const bool by_arity = cli.ops == "unary" || cli.ops == "binary";
  auto selection = parse_selection(by_arity ? "all" : cli.ops, cli.dtype);
  if (!selection) return usage(selection.error().message);
  auto backend = parse_backend(cli.backend);
  if (!backend) return usage(backend.error().message);
  auto seed = parse_seed(cli.seed, "--seed");
  if (!seed) return usage(seed.error().message);
  if (auto chosen = choose_nodes(cli.ops, *selection, o); !chosen) return usage(chosen.error().message);
  o.dtypes = selection->dtypes;
  o.backend = *backend;
  o.seed = *seed;
  if (!cli.range.empty()) {
    auto range = parse_sweep_range(cli.range);
    if (!range) return usage(range.error().message);
    o.range_given = true;
    o.range_lo = range->first;
    o.range_hi = range->second;
  }
  if (auto numbers = read_numbers(cli, o); !numbers) return usage(numbers.error().message);
  o.json_path = cli.json;
  o.junit_path = cli.junit;
  o.float64_mpfr = cli.float64_mpfr;
  o.allow_long = cli.allow_long;
  return sweep_command(o);
}

}  // namespace

std::function<std::optional<int>()> add_sweep_subcommand(CLI::App& app) {
  auto cli = std::make_shared<SweepCli>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "exhaustive accuracy sweep: every float32, bfloat16 and float16 input of each unary node (and every "
               "16-bit pair of each binary one) against spec/bounds.def");
  sweep->footer(
      "What is swept, per node and dtype (forward y and the fused VJP at g = 1 and g = R(0.7)):\n"
      "  unary float32     every bit pattern (2^32 cases; case index = the input's bits)\n"
      "  binary float32    every exponent pair x 2^pair-log2 random mantissas and signs\n"
      "  float64           2^float64-log2 random cases (random bit patterns and in-domain values; sin and\n"
      "                    cos below 2^20) against a double-double reference; with --float64-mpfr, the\n"
      "                    libm nodes get --host-cases random cases graded with MPFR on the host instead\n"
      "  unary 16-bit      every bit pattern (2^16 cases; case index = the input's bits)\n"
      "  binary 16-bit     every pair of bit patterns (2^32 cases; case index = a's bits << 16 | b's bits)\n"
      "                    (float16 is graded inside [2^-3, 2^3), spec/bounds.def's float16 domain)\n"
      "The sweep's reference is validated against MPFR (--validate cases), and every worst and violating\n"
      "case is re-checked with MPFR. --range LO:HI restricts the device sweeps to case indices [LO, HI)\n"
      "(a CPU slice, e.g. --backend cpu --range 0x3f000000:0x3f100000), --stride N to every N-th of them.\n"
      "Every value above its bound gets a cause: in_domain (inside spec/ops.def's domain), overflow or\n"
      "underflow (an exact intermediate of the staging leaves the dtype's range), or unexplained.\n"
      "Only nodes with a sweep reference (reference/sweep_reference.hpp) are swept: --ops naming\n"
      "another is a usage error; all, unary and binary leave the others out and the report lists them.\n"
      "On the CPU the sweep first times a sample of each node and prints its estimate on stderr; one\n"
      "estimated past 30 minutes (the defaults: hours) is refused unless --allow-long is given. When stdout\n"
      "is not a terminal, progress goes to stderr every 30 s with the time left. --devices N needs CUDA.\n"
      "A verdict needs cases: a --range past a node's cases, or --validate 0, is a usage error.\n"
      "Exit status: 0 every node conforms (no value above its bound inside the domain, none unexplained,\n"
      "outside it only causes spec/bounds.def accepts), 1 otherwise or a failed validation, 2 a usage or\n"
      "backend error.");
  sweep->add_option("--ops", cli->ops,
                    "comma-separated node names, or all, unary or binary (the nodes, of that arity, that have a "
                    "sweep reference)")
      ->capture_default_str();
  sweep->add_option("--dtype", cli->dtype, "float32, float64, bfloat16, float16 (comma-separated) or all")->capture_default_str();
  sweep->add_option("--backend", cli->backend, "auto, cpu or cuda")->capture_default_str();
  sweep->add_option("--range", cli->range, "case indices LO:HI (decimal or 0x hex; unary float32 and 16-bit: the bit patterns)")
      ->type_name("LO:HI");
  sweep->add_option("--stride", cli->stride,
                    "every N-th case of the range (device sweeps): --stride 256 samples every exponent of a float32 "
                    "node with 2^24 cases")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_option("--devices", cli->devices, "split the range over this many GPUs of this host")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--json", cli->json, "write the report as JSON to this file (- for standard output)")
      ->type_name("FILE|-");
  sweep->add_option("--junit", cli->junit, "write a JUnit XML report, one test case per node and dtype (- for standard output)")
      ->type_name("FILE|-");
  sweep->add_option("--pair-log2", cli->pair_log2, "binary float32: 2^N cases per exponent pair (0..16)")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--float64-log2", cli->float64_log2, "float64 on the device: 2^N random cases per node (0..32)")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_flag("--float64-mpfr", cli->float64_mpfr,
                  "grade the float64 libm nodes (exp sin cos log safeLog sigmoid tanh silu gelu softplus) with MPFR on "
                  "the host instead of the double-double reference");
  sweep->add_option("--host-cases", cli->host_cases, "with --float64-mpfr: cases per libm node")->type_name("N")
      ->capture_default_str();
  sweep->add_option("--validate", cli->validate, "random cases for validating the sweep's reference against MPFR")
      ->type_name("N")
      ->capture_default_str();
  sweep->add_option("--seed", cli->seed, "seed of the random cases")->type_name("UINT64")->capture_default_str();
  sweep->add_option("--chunk", cli->chunk, "elements per chunk (default 2^28 on CUDA, 2^20 on the CPU)")->type_name("N");
  sweep->add_flag("--allow-long", cli->allow_long,
                  "run a CPU sweep estimated to take longer than 30 minutes (refused without it)");
  return [sweep, cli]() -> std::optional<int> {
    if (!sweep->parsed()) return std::nullopt;
    return guarded("sweep", [&] { return run_sweep_cli(*cli); });
  };
}

}  // namespace tapewise::conform
