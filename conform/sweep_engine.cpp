// conform/sweep_engine.cpp — the sweep's planning and running: one plan per node, dtype and run scalar
// set, driven chunk by chunk through the production kernels on one or several devices, or the CPU.
#include "sweep_internal.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include <unistd.h>

#include "cases.hpp"
#include "commands.hpp"  // quiet_mode
#include "measure.hpp"

namespace tapewise::conform::sweep_internal {

namespace {

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

double second_g(DType dtype) { return round_to(dtype, kSecondG); }

std::vector<OutputRequest> output_requests(Op op, DType dtype, MathMode math) {
  std::vector<OutputRequest> out;
  const reference::Bound fb = reference::forward_bound(op, dtype, math);
  out.push_back({kY, 1.0, Bound{fb.ulp, fb.abs}});
  const reference::Bound vb = reference::vjp_bound(op, dtype, math);
  for (double g : {1.0, second_g(dtype)})
    for (int k = 1; k <= op_info(op).arity; ++k) out.push_back({k, g, Bound{vb.ulp, vb.abs}});
  return out;
}

// One sweep of a node at one of its scalar sets (spec/ops.def's run_scalars: one batch each).
Plan make_plan(Op op, DType dtype, const Scalars& scalars, const SweepOptions& o, MathMode math) {
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
  p.outputs = output_requests(op, dtype, math);
  return p;
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

}  // namespace

// --- backends: one per device -----------------------------------------------------------------------

[[nodiscard]] Result<Workers> open_backends(const SweepOptions& o) {
  Workers w;
  TAPEWISE_TRY(chosen, choose_backend(o.backend, o.math));
  w.name = chosen.name;
  w.why = chosen.why;
  w.backends.push_back(chosen.backend);
  if (chosen.name == "cuda")
    for (int d = 1; d < o.devices; ++d) {
      TAPEWISE_TRY(be, make_cuda_backend(CudaOptions{d, nullptr, math_mode(*chosen.backend)}));
      w.backends.push_back(be);
    }
  return w;
}

namespace {

[[nodiscard]] Result<std::unique_ptr<ChunkEngine>> make_engine(Backend& backend, int slots) {
#ifdef TAPEWISE_HAS_CUDA
  if (backend.kind() == BackendKind::cuda) return make_cuda_engine(backend, slots);
#endif
  (void)backend;  // the host engine works on any host buffers
  return make_host_engine(slots);
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
    if (!log || quiet_mode() || std::chrono::duration<double>(t - last_log).count() < kProgressLogSeconds) return;
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

}  // namespace

std::int64_t default_chunk(const Workers& w) { return w.name == "cuda" ? std::int64_t{1} << 28 : std::int64_t{1} << 20; }

// --- the command's steps ----------------------------------------------------------------------------

namespace {

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

}  // namespace

// On the CPU: says how long the sweep will take, and refuses one past the limit without --allow-long.
[[nodiscard]] Result<void> check_cpu_duration(Workers& w, const std::vector<Plan>& plans, const SweepOptions& o) {
  if (w.name != "cpu") return {};
  TAPEWISE_TRY(seconds, estimate_cpu_seconds(w, plans));
  std::uint64_t cases = 0;
  for (const Plan& p : plans) cases += p.cases();
  const bool refused = seconds > kCpuSweepLimitSeconds && !o.allow_long;
  if (!quiet_mode() || refused)
    std::cerr << "tapewise-conform sweep: " << cases << " cases on the CPU, estimated " << duration_text(seconds)
              << " (timed on a sample of each node; MPFR re-checks and validation come on top)\n";
  if (!refused) return {};
  return fail(ErrorCode::InvalidArgument,
              "a CPU sweep of about " + duration_text(seconds) + " is refused without --allow-long (the limit is " +
                  duration_text(kCpuSweepLimitSeconds) + "): narrow it with --ops, --dtype, --range or --stride, run " +
                  "it on CUDA, or give --allow-long");
}

// One sweep per dtype, node and run scalar set, dtypes first, graded against the bounds of the
// backends' math mode.
std::vector<Plan> make_plans(const SweepOptions& o, MathMode math) {
  std::vector<Plan> plans;
  for (DType d : o.dtypes)
    for (Op op : o.ops)
      for (const Scalars& s : default_scalar_sets(op)) plans.push_back(make_plan(op, d, s, o, math));
  return plans;
}

namespace {

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

}  // namespace

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

}  // namespace tapewise::conform::sweep_internal

namespace tapewise::conform {

std::unique_ptr<ChunkEngine> sweep::make_host_engine(int slots) { return std::make_unique<HostEngine>(slots); }

}  // namespace tapewise::conform
