// bench/main.cpp — tapewise-bench: per node, direction, size and dtype, the CUDA backend's
// median time against a device-to-device copy of the same bytes, against its compute roofline (ncu's
// instruction counts, --roofline) and against PyTorch eager, torch.compile and CUDA graphs (the JSON of
// bench/bench_torch.py, same GPU, same run), plus the 1,000-node record + backward chain in three
// graph shapes (chain.cpp) at several sizes. It times; correctness is the tests' and tapewise-conform's
// job (here only poison and equality checks).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "bench.hpp"
#include "backends/compiled_pieces.hpp"
#include "tape/backward_program.hpp"
#include <cuda_runtime.h>

using namespace tapewise;
using namespace tapewise::bench;

namespace {

// --- inputs: random, never zero ------------------------------------------------------------------

struct SplitMix64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Standard normal values (Box–Muller), generated in parallel chunks with their own streams.
std::vector<double> normal_values(std::int64_t n, std::uint64_t seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  const int threads = n < (std::int64_t{1} << 20)
                          ? 1
                          : std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 32);
  const std::int64_t chunk = (n + threads - 1) / threads;
  auto work = [&](int t) {
    SplitMix64 rng{seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(t) * 0xD1B54A32D192ED03ull};
    const std::int64_t lo = t * chunk, hi = std::min(n, lo + chunk);
    for (std::int64_t i = lo; i < hi; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(1.0 - rng.unit()));  // 1 - [0,1) is in (0, 1]
      const double angle = 6.283185307179586 * rng.unit();
      v[static_cast<std::size_t>(i)] = r * std::cos(angle);
      if (i + 1 < hi) v[static_cast<std::size_t>(i + 1)] = r * std::sin(angle);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  return v;
}

// As bench_torch.py: normal values, or |x| + 0.5 for ops that need positive inputs. An element
// that rounds to zero in the dtype becomes 1 (never zeros).
template <class T>
HostArray host_array(const std::vector<double>& v, bool positive) {
  std::vector<T> t(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const T y = static_cast<T>(positive ? std::fabs(v[i]) + 0.5 : v[i]);
    t[i] = static_cast<double>(y) == 0.0 ? T(1) : y;
  }
  return HostArray::of<T>(Shape{static_cast<std::int64_t>(v.size())}, t);
}

HostArray host_array(DType d, const std::vector<double>& v, bool positive) {
  switch (d) {
    case DType::float32: return host_array<float>(v, positive);
    case DType::float64: return host_array<double>(v, positive);
    case DType::bfloat16: return host_array<bfloat16>(v, positive);
    case DType::float16: return host_array<float16>(v, positive);
  }
  return host_array<double>(v, positive);
}

// a, b, g ~ N(0, 1); ap, bp = |.| + 0.5 (the nodes whose bench_inputs are positive in the op table).
struct Inputs {
  Buffer a, b, g, ap, bp;
};

Result<Inputs> make_inputs(Backend& be, DType d, std::int64_t n, std::uint64_t seed) {
  const std::vector<double> va = normal_values(n, seed + 1), vb = normal_values(n, seed + 2),
                            vg = normal_values(n, seed + 3);
  TAPEWISE_TRY(a, in_context(be.upload(host_array(d, va, false)), "upload a"));
  TAPEWISE_TRY(b, in_context(be.upload(host_array(d, vb, false)), "upload b"));
  TAPEWISE_TRY(g, in_context(be.upload(host_array(d, vg, false), AllocTag::gradient), "upload g"));
  TAPEWISE_TRY(ap, in_context(be.upload(host_array(d, va, true)), "upload |a| + 0.5"));
  TAPEWISE_TRY(bp, in_context(be.upload(host_array(d, vb, true)), "upload |b| + 0.5"));
  return Inputs{std::move(a), std::move(b), std::move(g), std::move(ap), std::move(bp)};
}

// --- the nodes' sample scalars and inputs: the op table's (spec/ops.def), as bench_torch.py reads them --

Scalars bench_scalars(Op op) { return default_scalars(op_info(op)); }
bool positive_inputs(Op op) { return op_info(op).bench_inputs == BenchInputs::positive; }

// Whether the fused VJP reads x (a, b) (spec/ops.def, vjp_reads): not for a node whose gradients
// depend on g alone; the compiler drops those loads (checked in the PTX: add's VJP has one vector load
// per step).
bool vjp_reads_inputs(Op op) { return op_info(op).vjp_reads == VjpReads::inputs; }

// Fewest bytes each direction must move: every input it reads once, every output written once.
double bytes_moved(Op op, const std::string& dir, std::int64_t n, DType d) {
  const int arity = op_info(op).arity;
  const int reads = dir == "fwd" ? arity : (vjp_reads_inputs(op) ? arity : 0) + 1;
  const int writes = dir == "fwd" ? 1 : arity;
  return static_cast<double>(reads + writes) * static_cast<double>(n) * static_cast<double>(dtype_size(d));
}

// What PyTorch's backward moves where it hands g through: add returns g for both inputs (no
// kernel), sub returns g and -g (one neg kernel: read g, write -g).
std::optional<double> torch_backward_bytes(Op op, std::int64_t n, DType d) {
  const double elem = static_cast<double>(n) * static_cast<double>(dtype_size(d));
  if (op == Op::add) return 0.0;
  if (op == Op::sub) return 2.0 * elem;
  return std::nullopt;
}

// --- device helpers ---------------------------------------------------------------------------------

// Host copy of device buffers for the checks: reused, never zero-filled.
struct HostCopy {
  std::unique_ptr<std::byte[]> data;
  std::size_t capacity = 0, size = 0;
};

class Device {
 public:
  Device(Backend& be, cudaStream_t stream) : be_(be), stream_(stream) {}
  cudaStream_t stream() const { return stream_; }

  [[nodiscard]] Result<void> poison(Buffer& b) {
    if (stream_) return cuda_ok(cudaMemsetAsync(b.data(), 0xFF, b.bytes(), stream_), "poison (cudaMemsetAsync)");
    std::memset(b.data(), 0xFF, b.bytes());  // --backend cpu
    return {};
  }
  [[nodiscard]] Result<void> fetch(const Buffer& b, HostCopy& h) {
    if (h.capacity < b.bytes()) {
      h.data.reset(new std::byte[b.bytes()]);
      h.capacity = b.bytes();
    }
    h.size = b.bytes();
    TAPEWISE_CHECK(copy(h.data.get(), b.data(), b.bytes(), cudaMemcpyDeviceToHost, "download"));
    if (stream_) return cuda_ok(cudaStreamSynchronize(stream_), "download");
    return {};
  }
  // Elements still holding the poison (all bits set): written by nobody.
  static std::int64_t unwritten(const HostCopy& h, DType d) {
    const std::size_t w = dtype_size(d);
    std::int64_t count = 0;
    for (std::size_t i = 0; i + w <= h.size; i += w) {
      std::uint64_t bits = 0;
      std::memcpy(&bits, h.data.get() + i, w);
      count += w == 4 ? bits == 0xFFFFFFFFull : bits == ~std::uint64_t{0};
    }
    return count;
  }
  static bool same(const HostCopy& x, const HostCopy& y) {
    return x.size == y.size && std::memcmp(x.data.get(), y.data.get(), x.size) == 0;
  }

  // Median ms of one cudaMemcpyAsync D2D moving `traffic` bytes (traffic / 2 read, traffic / 2
  // written), from a source filled with random values. Memoised per (traffic, reps).
  [[nodiscard]] Result<double> copy_ms(double traffic, int reps) {
    const std::size_t bytes = static_cast<std::size_t>(traffic / 2);
    const auto key = std::make_pair(bytes, reps);
    if (auto it = copies_.find(key); it != copies_.end()) return it->second;
    if (!pattern_) {
      const std::int64_t n = std::int64_t{1} << 24;  // 64 MiB of float32
      TAPEWISE_TRY(pattern, in_context(be_.upload(host_array<float>(normal_values(n, 7), false)), "upload copy pattern"));
      pattern_ = std::move(pattern);
    }
    const Shape shape{static_cast<std::int64_t>((bytes + 3) / 4)};
    TAPEWISE_TRY(src, in_context(be_.allocate(shape, DType::float32, AllocTag::workspace), "allocate copy source"));
    TAPEWISE_TRY(dst, in_context(be_.allocate(shape, DType::float32, AllocTag::workspace), "allocate copy target"));
    for (std::size_t off = 0; off < bytes; off += pattern_.bytes())
      TAPEWISE_CHECK(copy(static_cast<std::byte*>(src.data()) + off, pattern_.data(),
                          std::min(pattern_.bytes(), bytes - off), cudaMemcpyDeviceToDevice, "fill copy source"));
    TAPEWISE_TRY(ms, median_ms(
                         stream_, reps,
                         [&]() { return copy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, "D2D copy"); },
                         "D2D copy of " + std::to_string(bytes) + " bytes"));
    copies_[key] = ms;
    return ms;
  }
  json copies_json() const {
    json list = json::array();
    for (const auto& [key, ms] : copies_)
      list.push_back({{"traffic_bytes", 2.0 * static_cast<double>(key.first)}, {"copy_bytes", key.first},
                      {"reps", key.second}, {"ms", ms},
                      {"gbps", 2.0 * static_cast<double>(key.first) / (ms * 1e-3) / 1e9}});
    return list;
  }

 private:
  // cudaMemcpyAsync on the backend's stream; plain memcpy for --backend cpu (host memory).
  [[nodiscard]] Result<void> copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* what) {
    if (stream_) return cuda_ok(cudaMemcpyAsync(dst, src, bytes, kind, stream_), what);
    std::memcpy(dst, src, bytes);
    return {};
  }

  Backend& be_;
  cudaStream_t stream_;
  Buffer pattern_;
  std::map<std::pair<std::size_t, int>, double> copies_;
};

// --- PyTorch's numbers and an earlier tapewise run ---------------------------------------------------

Result<json> read_json(const std::string& path, const char* what) {
  std::ifstream f(path);
  if (!f) return fail(ErrorCode::InvalidArgument, std::string("cannot open ") + what + " " + path);
  try {
    return json::parse(f);
  } catch (const std::exception& e) {  // nlohmann reports a malformed document by throwing
    return fail(ErrorCode::InvalidArgument, std::string("cannot parse ") + what + " " + path + ": " + e.what());
  }
}

std::optional<double> json_number(const json& j, std::initializer_list<std::string> path) {
  const json* at = &j;
  for (const std::string& key : path) {
    if (!at->is_object() || !at->contains(key)) return std::nullopt;
    at = &(*at)[key];
  }
  if (!at->is_number()) return std::nullopt;
  return at->get<double>();
}

std::string row_key(const std::string& op, const std::string& dt, int log2n, const std::string& dir) {
  return op + "/" + dt + "/" + std::to_string(log2n) + "/" + dir;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<std::vector<int>> parse_log2_sizes(const std::string& list, const char* flag, int lo, int hi) {
  std::vector<int> out;
  for (const std::string& s : split(list)) {
    int v = 0;
    const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (err != std::errc() || end != s.data() + s.size())
      return fail(ErrorCode::InvalidArgument, std::string(flag) + ": '" + s + "' is not a number");
    if (v < lo || v > hi)
      return fail(ErrorCode::InvalidArgument, std::string(flag) + ": log2 size " + s + " outside [" +
                                                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out.push_back(v);
  }
  return out;
}

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

}  // namespace

// A dtype by its short or full name ("bf16" or "bfloat16").
Result<DType> dtype_named(const std::string& s, const char* option) {
  for (DType d : kDTypes)
    if (s == dtype_short(d) || s == dtype_name(d)) return d;
  return fail(ErrorCode::InvalidArgument, std::string(option) + ": unknown dtype '" + s + "' (f32, f64, bf16, f16)");
}

// CLI11 prints --help and usage errors and exits (app.exit); every other bad value is an error.
Result<Options> parse_options(int argc, char** argv) {
  Options opt;
  std::string sizes = "26,12", dtypes = "f32,f64", ops = "all", chain_sizes = "12,16,20", shapes,
              chain_shapes = "unary,binary,fanout", chain_dtype = "f32";
  bool no_staged = false, no_chain = false, no_kernels = false;
  CLI::App app{"tapewise-bench: per node and direction, the CUDA backend against the copy and compute rooflines "
               "and PyTorch (eager, torch.compile, CUDA graphs) on the same GPU; plus the 1,000-node record + "
               "backward chain"};
  app.add_option("--sizes", sizes, "log2 of the element counts, comma-separated")->capture_default_str();
  app.add_option("--dtypes", dtypes, "comma-separated: f32, f64, bf16, f16")->capture_default_str();
  app.add_option("--ops", ops, "'all' or comma-separated node names")->capture_default_str();
  app.add_option("--reps", opt.reps, "timed runs (median) for sizes >= 2^20; 10x that below")
      ->capture_default_str()->check(CLI::Range(20, 100000));
  app.add_option("--chain-sizes", chain_sizes, "log2 element counts of the 1,000-node chain")->capture_default_str();
  app.add_option("--chain-shapes", chain_shapes,
                 "the chain's graph shapes, comma-separated: unary (sin, tanh, sigmoid, scale 0.9, relu), binary "
                 "(mul, add, max, sub, each with a fresh leaf), fanout (sin, tanh, sigmoid of one value, summed, "
                 "scale 0.5)")
      ->capture_default_str();
  app.add_option("--chain-dtype", chain_dtype, "the chain's dtype: f32, f64, bf16 or f16")->capture_default_str();
  app.add_option("--chain-nodes", opt.chain_nodes, "nodes per chain (fanout: whole cycles of 6)")
      ->capture_default_str()->check(CLI::Range(6, 1000000));
  app.add_option("--chain-calls", opt.chain_calls,
                 "timed blocks of the chain's 5 runs, each timed alone: the median block is the result, every "
                 "block's time is kept (the spread)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--chain-values", opt.chain_values_path,
                 "write one untimed run's leaves, output and leaf gradients per shape and size (their first 64 "
                 "elements) as JSON here: the recording's check, for small sizes");
  app.add_option_function<std::string>(
         "--chain-gradients", [&opt](const std::string& which) { opt.chain_every_gradient = which == "all"; },
         "what the chain's backward returns: leaf (the leaves' gradients, as PyTorch's chain asks for x's and "
         "binary's fresh leaves'; default) or all (every node's)")
      ->check(CLI::IsMember({"leaf", "all"}));
  app.add_option("--program-threshold", opt.program_threshold,
                 "elements up to which the chain's tapes run as programs (default: the library's, 2^26)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 40));
  app.add_option("--max-pending-nodes", opt.max_pending_nodes,
                 "forwards a chain's tape defers before it flushes (default: the library's, 4,096)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{65536}));
  app.add_option("--recompute-from", opt.recompute_from,
                 "elements from which a backward program computes single-use values again rather than have the "
                 "flush store them (default: the library's, 2^20 on CUDA in float32, else never; 0: always)")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 62));
  app.add_option("--map-shapes", shapes, "launch shapes to measure side by side (TAPEWISE_MAP_SHAPE names, "
                                         "comma-separated; default: the library's); float32 and float64 "
                                         "only, each 16-bit kernel has one shape");
  app.add_option("--json", opt.json_path, "write the results as JSON here");
  app.add_option("--torch", opt.torch_path, "PyTorch's timings from bench/bench_torch.py (same GPU, same run)");
  app.add_option("--roofline", opt.roofline_path, "compute rooflines from bench/roofline.py (ncu counts)");
  app.add_option("--compare", opt.compare_path, "an earlier tapewise-bench JSON: adds its ms and the speedup");
  app.add_option("--commit", opt.commit, "git commit to record (default: $TAPEWISE_COMMIT, else 'unknown')");
  app.add_option("--date", opt.date, "date to record (default: today, UTC)");
  app.add_option("--device", opt.device, "CUDA device index")->capture_default_str();
  app.add_option("--backend", opt.backend, "cuda; or cpu: this tool on the CPU backend with a host clock (the "
                                           "kernels' numbers mean nothing; the chain's are the tape's host costs)")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--math", opt.math, "the CUDA backend's math mode: aten or exact")
      ->capture_default_str()->check(CLI::IsMember({"aten", "exact"}));
  app.add_option("--seed", opt.seed, "input seed")->capture_default_str();
  app.add_flag("--no-staged", no_staged, "skip the staged VJP timings");
  app.add_flag("--no-chain", no_chain, "skip the 1,000-node chain");
  app.add_flag("--no-kernels", no_kernels, "skip the per-node kernels (the chain only)");
  app.add_flag("--once", opt.once, "run each forward and fused VJP once, untimed, and stop (a pass for ncu)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  opt.staged = !no_staged;
  opt.kernels = !no_kernels;
  TAPEWISE_TRY(log2_sizes, parse_log2_sizes(sizes, "--sizes", 2, 30));
  opt.log2_sizes = std::move(log2_sizes);
  if (!no_chain) {
    TAPEWISE_TRY(chain_log2_sizes, parse_log2_sizes(chain_sizes, "--chain-sizes", 0, 26));
    opt.chain_log2_sizes = std::move(chain_log2_sizes);
  } else {
    opt.chain_log2_sizes.clear();
  }
  opt.chain_shapes = split(chain_shapes);
  for (const std::string& s : opt.chain_shapes)
    if (std::find(chain_shape_names().begin(), chain_shape_names().end(), s) == chain_shape_names().end())
      return fail(ErrorCode::InvalidArgument, "--chain-shapes: unknown shape '" + s + "' (unary, binary, fanout)");
  if (!shapes.empty()) opt.map_shapes = split(shapes);
  opt.dtypes.clear();
  for (const std::string& s : split(dtypes)) {
    TAPEWISE_TRY(d, dtype_named(s, "--dtypes"));
    opt.dtypes.push_back(d);
  }
  TAPEWISE_TRY(chain_d, dtype_named(chain_dtype, "--chain-dtype"));
  opt.chain_dtype = chain_d;
  if (ops == "all") {
    for (const OpInfo& info : kOps) opt.ops.push_back(info.op);
  } else {
    for (const std::string& s : split(ops)) {
      auto op = op_from_name(s);
      if (!op) return fail(ErrorCode::InvalidArgument, "--ops: unknown node '" + s + "'");
      opt.ops.push_back(*op);
    }
  }
  if (opt.kernels && (opt.log2_sizes.empty() || opt.dtypes.empty() || opt.ops.empty()))
    return fail(ErrorCode::InvalidArgument, "nothing to measure (--sizes, --dtypes or --ops is empty)");
  if (opt.commit.empty()) opt.commit = std::getenv("TAPEWISE_COMMIT") ? std::getenv("TAPEWISE_COMMIT") : "unknown";
  if (opt.date.empty()) opt.date = today_utc();
  return opt;
}

// The backend for one pass: CUDA with TAPEWISE_MAP_SHAPE set to `shape` ("" = the default), or CPU.
struct Opened {
  std::shared_ptr<Backend> be;
  cudaStream_t stream = nullptr;
  cudaDeviceProp prop{};
  int driver = 0, runtime = 0;
};

// No usable device (DeviceUnavailable) makes main exit 2, as a run without a GPU is not a failed run.
Result<Opened> open_backend(const Options& opt, const std::string& shape) {
  Opened o;
  if (opt.backend == "cpu") {
    o.be = make_cpu_backend();
    std::snprintf(o.prop.name, sizeof o.prop.name, "CPU (host loop)");
    return o;
  }
  std::string why;
  if (!cuda_available(&why))
    return fail(ErrorCode::DeviceUnavailable,
                "no usable CUDA device (" + why +
                    ").\ntapewise-bench times the CUDA backend and needs an NVIDIA GPU: run it on the GPU machine "
                    "(bench/run_bench.sh OUTDIR), or --backend cpu for the tape's host costs.");
  if (shape.empty()) unsetenv("TAPEWISE_MAP_SHAPE");
  else setenv("TAPEWISE_MAP_SHAPE", shape.c_str(), 1);
  CudaOptions options;
  options.device = opt.device;
  options.math = opt.math == "exact" ? MathMode::exact : MathMode::aten;
  auto made = make_cuda_backend(options);
  if (!made) return fail(ErrorCode::DeviceUnavailable, "cannot open the CUDA backend: " + made.error().str());
  o.be = *made;
  o.stream = static_cast<cudaStream_t>(cuda_stream(*o.be));
  if (!o.stream)
    return fail(ErrorCode::CudaFailure, "the CUDA backend has no stream (tapewise::cuda_stream returned null)");
  TAPEWISE_CHECK(cuda_ok(cudaGetDeviceProperties(&o.prop, opt.device), "cudaGetDeviceProperties"));
  cudaDriverGetVersion(&o.driver);
  cudaRuntimeGetVersion(&o.runtime);
  return o;
}

// What the tape programs' compiled pieces did in this process (cuda/backends/compiled_pieces.hpp).
json compiled_pieces_json() {
  const detail::CompiledPieceStats s = detail::compiled_piece_stats();
  return {{"compiled", s.compiled}, {"failed", s.failed}, {"compile_ms", s.compile_ms}, {"launches", s.launches},
          {"interpreted_short", s.interpreted_short}, {"interpreted_uneven", s.interpreted_uneven},
          {"interpreted_irregular", s.interpreted_irregular}, {"interpreted_failed", s.interpreted_failed},
          {"launch_host_us", s.launch_host_us}, {"driver_launch_us", s.driver_launch_us}, {"last_error", s.last_error}};
}

json meta_json(const Options& opt, const Opened& o, const json& torch) {
  json meta = {{"tool", "tapewise-bench"},
               {"kernel", "prod: cuda/backends/cuda_kernels.cu"},
               {"date", opt.date},
               {"commit", opt.commit},
               {"math", opt.math},
               {"gpu", o.prop.name},
               {"backend", o.be->describe()},
               {"compute_capability", std::to_string(o.prop.major) + "." + std::to_string(o.prop.minor)},
               {"sm_count", o.prop.multiProcessorCount},
               {"l2_bytes", o.prop.l2CacheSize},
               {"global_mem_bytes", o.prop.totalGlobalMem},
               {"cuda_driver", o.driver},
               {"cuda_runtime", o.runtime},
               {"reps", opt.reps},
               {"reps_below_2^20", 10 * opt.reps},
               {"seed", opt.seed},
               {"map_shapes", opt.map_shapes},
               {"chain_gradients", opt.chain_every_gradient ? "all" : "leaf"},
               {"chain_shapes", opt.chain_shapes}, {"chain_dtype", dtype_short(opt.chain_dtype)},
               {"chain_nodes", opt.chain_nodes}, {"chain_calls", opt.chain_calls},
               {"timing", "median of per-call CUDA event pairs on the backend's stream, after 3 warm-up calls"},
               {"bytes", "fewest bytes moved: each input the kernel reads once, each output written once"},
               {"copy", "cudaMemcpyAsync D2D moving the same bytes (read + write) in the same run"},
               {"roofline", "max(copy time, compute time from ncu's instruction counts) where --roofline is given"},
               {"torch_json", opt.torch_path},
               {"roofline_json", opt.roofline_path},
               {"compare_json", opt.compare_path}};
  if (!torch.is_null()) meta["torch"] = torch.value("meta", json::object());
  return meta;
}

// The peers' numbers for one row: eager's ratio, torch.compile and CUDA graph, the fastest of them.
void attach_peers(Row& r, const json& torch) {
  const std::string key = r.dtype + "_" + std::to_string(r.log2n);
  const bool fwd = r.dir == "fwd";
  r.torch_ms = json_number(torch, {"ops", r.op, key, fwd ? "fwd_ms" : "bwd_ms"});
  if (r.torch_ms) r.ratio = *r.torch_ms / r.ms;
  r.compile_ms = json_number(torch, {"ops", r.op, key, fwd ? "compile_fwd_ms" : "compile_bwd_ms"});
  r.graph_ms = json_number(torch, {"ops", r.op, key, fwd ? "graph_fwd_ms" : "graph_bwd_ms"});
  for (const auto& [name, ms] : {std::pair{"eager", r.torch_ms}, std::pair{"compile", r.compile_ms}, std::pair{"graph", r.graph_ms}})
    if (ms && (!r.peer || *ms < r.peer->ms)) r.peer = Peer{name, *ms};
}

// ncu's compute rooflines (bench/roofline.py): op/dtype/log2n/dir -> ms.
std::map<std::string, double> read_rooflines(const json& doc) {
  std::map<std::string, double> out;
  for (const json& k : doc.value("kernels", json::array()))
    out[row_key(k.value("op", ""), k.value("dtype", ""), k.value("log2n", 0), k.value("dir", ""))] = k.value("compute_ms", 0.0);
  return out;
}

struct Sources {
  json torch;
  std::map<std::string, double> compare_ms, compute_ms;
};

// One op at one dtype and size: forward, fused VJP and (unless --no-staged) the staged VJP, each
// checked once (outputs poisoned first; every element written; staged == fused bit for bit), then
// timed; --once stops after the checks. Rows appended; false when a check failed.
Result<bool> measure_op(const Options& opt, const Opened& o, Device& dev, const std::string& shape, const Sources& src, Op op,
                DType d, int log2n, const Inputs& in, HostCopy (&ref)[2], HostCopy& got, std::vector<Row>& rows) {
  Backend& be = *o.be;
  const std::int64_t n = std::int64_t{1} << log2n;
  const int reps = reps_for(opt, log2n);
  const OpInfo& info = op_info(op);
  const Scalars sc = bench_scalars(op);
  const bool pos = positive_inputs(op);
  const Buffer* inputs[2] = {pos ? &in.ap : &in.a, pos ? &in.bp : &in.b};
  const std::span<const Buffer* const> ins(inputs, static_cast<std::size_t>(info.arity));
  const Shape shape_n{n};
  TAPEWISE_TRY(out, in_context(be.allocate(shape_n, d, AllocTag::value), "allocate output"));
  Buffer grads[2];
  for (int k = 0; k < info.arity; ++k) {
    TAPEWISE_TRY(grad, in_context(be.allocate(shape_n, d, AllocTag::gradient), "allocate gradient"));
    grads[k] = std::move(grad);
  }
  Buffer* gptr[2] = {&grads[0], &grads[1]};
  const std::span<Buffer* const> gs(gptr, static_cast<std::size_t>(info.arity));
  const std::string what = std::string(info.name) + " " + dtype_short(d) + " 2^" + std::to_string(log2n);
  bool checks_ok = true;

  auto make_row = [&](const std::string& dir, double ms, const std::string& check) -> Result<void> {
    Row r;
    r.op = info.name;
    r.dtype = dtype_short(d);
    r.shape = shape;
    r.log2n = log2n;
    r.dir = dir;
    r.ms = ms;
    r.bytes = bytes_moved(op, dir, n, d);
    r.gbps = r.bytes / (ms * 1e-3) / 1e9;
    TAPEWISE_TRY(copy_ms, dev.copy_ms(r.bytes, reps));
    r.copy_ms = copy_ms;
    r.frac_copy = r.copy_ms / ms;
    const std::string key = row_key(r.op, r.dtype, log2n, dir);
    if (auto it = src.compute_ms.find(key); it != src.compute_ms.end() && dir != "staged") r.compute_ms = it->second;
    r.roofline_ms = std::max(r.copy_ms, r.compute_ms.value_or(0.0));
    r.frac_roofline = r.roofline_ms / ms;
    r.check = check;
    if (!src.torch.is_null() && dir != "staged") attach_peers(r, src.torch);
    if (dir == "vjp") r.torch_bytes = torch_backward_bytes(op, n, d);
    if (auto it = src.compare_ms.find(key); it != src.compare_ms.end() && it->second > 0) {
      r.compare_ms = it->second;
      r.speedup = it->second / ms;
    }
    judge(r, !src.torch.is_null());
    if (check != "ok") checks_ok = false;
    rows.push_back(r);
    return {};
  };
  // Poison the outputs, run once, check every element was written. The outputs land in ref[]
  // (the fused gradients stay there for the staged comparison).
  auto check_outputs = [&](std::span<Buffer* const> outs,
                           const std::function<Result<void>()>& call) -> Result<std::string> {
    for (Buffer* b : outs) TAPEWISE_CHECK(dev.poison(*b));
    TAPEWISE_CHECK(in_context(call(), what));
    std::string result = "ok";
    for (std::size_t k = 0; k < outs.size(); ++k) {
      TAPEWISE_CHECK(dev.fetch(*outs[k], ref[k]));
      if (const std::int64_t bad = Device::unwritten(ref[k], d); bad > 0) result = std::to_string(bad) + " unwritten";
    }
    return result;
  };

  Buffer* outs[1] = {&out};
  const std::function<Result<void>()> fwd = [&]() { return be.forward(op, sc, ins, out); };
  const std::function<Result<void>()> vjp = [&]() { return be.vjp_fused(op, sc, ins, in.g, gs); };
  TAPEWISE_TRY(fwd_check, check_outputs(outs, fwd));
  TAPEWISE_TRY(vjp_check, check_outputs(gs, vjp));
  if (opt.once) return fwd_check == "ok" && vjp_check == "ok";
  TAPEWISE_TRY(fwd_ms, median_ms(o.stream, reps, fwd, what + " forward"));
  TAPEWISE_CHECK(make_row("fwd", fwd_ms, fwd_check));
  TAPEWISE_TRY(vjp_ms, median_ms(o.stream, reps, vjp, what + " fused vjp"));
  TAPEWISE_CHECK(make_row("vjp", vjp_ms, vjp_check));
  if (!opt.staged) return checks_ok;
  // The staged VJP, for reference; its outputs must equal the fused ones bit for bit.
  auto staged = [&]() { return staged_vjp(be, op, sc, ins, in.g, gs); };
  for (Buffer* b : gs) TAPEWISE_CHECK(dev.poison(*b));
  TAPEWISE_CHECK(in_context(staged(), what + " staged vjp"));
  std::string check = "ok";
  for (std::size_t k = 0; k < gs.size(); ++k) {
    TAPEWISE_CHECK(dev.fetch(*gs[k], got));
    if (const std::int64_t bad = Device::unwritten(got, d); bad > 0) check = std::to_string(bad) + " unwritten";
    else if (!Device::same(got, ref[k])) check = "staged!=fused";
  }
  TAPEWISE_TRY(staged_ms, median_ms(o.stream, reps, staged, what + " staged vjp"));
  TAPEWISE_CHECK(make_row("staged", staged_ms, check));
  return checks_ok;
}

// PyTorch's numbers for one shape's chain at one size (bench_torch.py's chain_shapes; files written
// before the shapes had the unary chain alone, under "chain"), and the fastest of its three forms.
// Attached only when PyTorch's chain has as many nodes: the comparison is per node of the same graph.
void attach_chain_peers(ChainResult& c, const json& torch) {
  const json* chain = nullptr;
  if (torch.contains("chain_shapes") && torch["chain_shapes"].contains(c.shape)) chain = &torch["chain_shapes"][c.shape];
  else if (c.shape == "unary" && torch.contains("chain")) chain = &torch["chain"];
  if (!chain) return;
  if (const std::string dtype = chain->value("dtype", "f32"); dtype != dtype_short(c.dtype)) {
    std::printf("  (PyTorch's %s chain is %s, this one %s: not compared)\n", c.shape.c_str(), dtype.c_str(),
                dtype_short(c.dtype));
    return;
  }
  if (const auto nodes = json_number(*chain, {"nodes"}); nodes && static_cast<int>(*nodes) != c.nodes) {
    std::printf("  (PyTorch's %s chain has %d nodes, this one %d: not compared)\n", c.shape.c_str(),
                static_cast<int>(*nodes), c.nodes);
    return;
  }
  const std::string key = std::to_string(c.log2n);
  c.eager_us_per_node = json_number(*chain, {"sizes", key, "eager_us_per_node"});
  c.graph_us_per_node = json_number(*chain, {"sizes", key, "graph_us_per_node"});
  c.compile_us_per_node = json_number(*chain, {"sizes", key, "compile_us_per_node"});
  c.compile_first_call_s = json_number(*chain, {"sizes", key, "compile_first_call_s"});
  for (const auto& [name, us] : {std::pair{"eager", c.eager_us_per_node}, std::pair{"compile", c.compile_us_per_node},
                                 std::pair{"graph", c.graph_us_per_node}})
    if (us && (!c.peer || *us < c.peer->ms)) c.peer = Peer{name, *us};
  if (c.peer) c.speedup = c.peer->ms / c.us_per_node;
}

// Every --chain-shapes shape at every --chain-sizes size on `be`, with the peers' numbers for the same
// shape and size; `values` (--chain-values) receives each one's checked run.
Result<std::vector<ChainResult>> measure_chains(const Options& opt, const std::shared_ptr<Backend>& be,
                                               const json& torch, json& values) {
  std::vector<ChainResult> out;
  ChainSetup setup;
  setup.nodes = opt.chain_nodes;
  setup.calls = opt.chain_calls;
  setup.dtype = opt.chain_dtype;
  setup.every_gradient = opt.chain_every_gradient;
  if (opt.program_threshold >= 0) setup.tape.program_threshold = opt.program_threshold;
  if (opt.max_pending_nodes > 0) setup.tape.max_pending_nodes = opt.max_pending_nodes;
  if (opt.recompute_from >= 0) detail::set_recompute_from(opt.recompute_from);
  for (const std::string& shape : opt.chain_shapes) {
    for (const int log2n : opt.chain_log2_sizes) {
      std::printf("  measuring the %s chain at 2^%d ...\n", shape.c_str(), log2n);
      std::fflush(stdout);
      json run;
      TAPEWISE_TRY(c, in_context(run_chain(be, setup, shape, log2n, opt.seed + 999,
                                           opt.chain_values_path.empty() ? nullptr : &run),
                                 shape + " chain at 2^" + std::to_string(log2n)));
      if (!opt.chain_values_path.empty()) {
        json entry = {{"shape", c.shape}, {"log2n", log2n}, {"nodes", c.nodes}};
        entry.update(run);
        values.push_back(std::move(entry));
      }
      if (!torch.is_null()) attach_chain_peers(c, torch);
      if (shape == "unary" && log2n == 12 && opt.chain_nodes == 1000 && opt.backend == "cuda") {
        c.target = "<= 0.35 us/node";
        c.verdict = c.us_per_node <= kChainUsPerNodeTarget ? "PASS" : "MISS";
      }
      out.push_back(c);
    }
  }
  return out;
}

// Every op, direction, dtype and size on one backend; rows appended. False when a check failed.
Result<bool> measure_kernels(const Options& opt, const Opened& o, Device& dev, const std::string& shape, const Sources& src,
                             std::vector<Row>& rows) {
  Backend& be = *o.be;
  bool checks_ok = true;
  HostCopy ref[2], got;
  for (const DType d : opt.dtypes) {
    for (const int log2n : opt.log2_sizes) {
      const std::int64_t n = std::int64_t{1} << log2n;
      const int reps = reps_for(opt, log2n);
      TAPEWISE_TRY(in, make_inputs(be, d, n,
                                   opt.seed + 100 * static_cast<std::uint64_t>(log2n) + (d == DType::float64 ? 7 : 0)));
      std::printf("  measuring %s 2^%d (%d reps)%s%s ...\n", dtype_short(d), log2n, reps, shape.empty() ? "" : ", shape ",
                  shape.c_str());
      std::fflush(stdout);
      for (const Op op : opt.ops) {
        TAPEWISE_TRY(op_ok, measure_op(opt, o, dev, shape, src, op, d, log2n, in, ref, got, rows));
        checks_ok = op_ok && checks_ok;
      }
      TAPEWISE_CHECK(in_context(be.synchronize(), "synchronize"));
    }
  }
  return checks_ok;
}

// The whole run; its value is the exit status of a run that measured (0, or 3 when a check failed).
Result<int> run(int argc, char** argv) {
  TAPEWISE_TRY(opt, parse_options(argc, argv));
  Sources src;
  if (!opt.torch_path.empty()) {
    TAPEWISE_TRY(torch, read_json(opt.torch_path, "PyTorch JSON"));
    src.torch = std::move(torch);
  }
  const bool have_torch = !src.torch.is_null();
  json compare;
  if (!opt.compare_path.empty()) {
    TAPEWISE_TRY(earlier, read_json(opt.compare_path, "comparison JSON"));
    compare = std::move(earlier);
  }
  if (!compare.is_null())
    for (const json& r : compare.value("rows", json::array()))
      src.compare_ms[row_key(r.value("op", ""), r.value("dtype", ""), r.value("log2n", 0), r.value("dir", ""))] = r.value("ms", 0.0);
  if (!opt.roofline_path.empty()) {
    TAPEWISE_TRY(rooflines, read_json(opt.roofline_path, "roofline JSON"));
    src.compute_ms = read_rooflines(rooflines);
  }

  std::vector<Row> rows;
  bool checks_ok = true;
  json meta, copy;
  std::vector<ChainResult> chains;
  json chain_values = json::array();
  // The default shape's pass last: its backend then runs the chain and gives the roofline and meta.
  std::vector<std::string> shapes = opt.map_shapes;
  std::stable_partition(shapes.begin(), shapes.end(), [](const std::string& s) { return !s.empty(); });
  for (std::size_t pass = 0; pass < shapes.size(); ++pass) {
    TAPEWISE_TRY(o, open_backend(opt, shapes[pass]));
    Device dev(*o.be, o.stream);
    // The copy roofline: a 1 GiB buffer copied (2 GiB moved), after ~0.25 s of the same copies so that
    // the GPU has left its idle clocks (the PyTorch process before this one may have exited seconds ago).
    // On the CPU backend without kernels (a dry run of the chain) there is nothing to hold against it,
    // and 23 GiB of memcpy would outlast the run.
    const double roofline_traffic = 2.0 * static_cast<double>(std::int64_t{1} << 30);
    meta = meta_json(opt, o, src.torch);
    copy = json::object();
    if (o.stream || opt.kernels) {
      if (o.stream) TAPEWISE_CHECK(dev.copy_ms(roofline_traffic, 500));
      TAPEWISE_TRY(roofline_ms, dev.copy_ms(roofline_traffic, opt.reps));
      copy["roofline_1GiB"] = {{"traffic_bytes", roofline_traffic}, {"ms", roofline_ms},
                               {"gbps", roofline_traffic / (roofline_ms * 1e-3) / 1e9}};
    }
    char roofline_text[32] = "not measured";
    if (copy.contains("roofline_1GiB"))
      std::snprintf(roofline_text, sizeof roofline_text, "%.1f GB/s", copy["roofline_1GiB"]["gbps"].get<double>());
    std::printf("tapewise-bench on %s (%s), %s, commit %s; copy roofline (1 GiB D2D): %s\n", o.prop.name,
                o.be->describe().c_str(), opt.date.c_str(), opt.commit.c_str(), roofline_text);
    std::fflush(stdout);
    if (opt.kernels) {
      TAPEWISE_TRY(kernels_ok, measure_kernels(opt, o, dev, shapes[pass], src, rows));
      checks_ok = kernels_ok && checks_ok;
    }
    if (opt.once) return checks_ok ? 0 : 3;
    copy["same_traffic"] = dev.copies_json();
    if (pass + 1 == shapes.size()) {
      TAPEWISE_TRY(measured, measure_chains(opt, o.be, src.torch, chain_values));
      chains = std::move(measured);
      meta["compiled_pieces"] = compiled_pieces_json();
    }
  }
  if (have_torch) copy["torch_copy"] = src.torch.value("copy", json::object());
  print_table(meta, copy, rows, chains, have_torch, !compare.is_null());

  if (!opt.chain_values_path.empty()) {
    std::ofstream f(opt.chain_values_path);
    if (!f) return fail(ErrorCode::InvalidArgument, "cannot write " + opt.chain_values_path);
    f << json{{"elements", kChainValuesElements}, {"chains", chain_values}}.dump(1) << "\n";
    std::printf("wrote %s\n", opt.chain_values_path.c_str());
  }
  if (!opt.json_path.empty()) {
    json doc = {{"meta", meta}, {"copy", copy}, {"rows", rows_json(rows)}};
    json chain_list = json::array();
    for (const ChainResult& c : chains) chain_list.push_back(chain_json(c));
    doc["chain"] = chain_list;
    doc["summary"] = summary_json(rows, chains);
    if (have_torch) doc["torch"] = src.torch;
    std::ofstream f(opt.json_path);
    if (!f) return fail(ErrorCode::InvalidArgument, "cannot write " + opt.json_path);
    f << doc.dump(1) << "\n";
    std::printf("wrote %s\n", opt.json_path.c_str());
  }
  if (!checks_ok) {
    std::fprintf(stderr, "tapewise-bench: some output checks FAILED (see the check column)\n");
    return 3;
  }
  return 0;
}

// Exit status: 0; 1 on an error (named on stderr); 2 without a usable CUDA device; 3 when an output
// check failed.
int main(int argc, char** argv) {
  const Result<int> status = run(argc, argv);
  if (status) return *status;
  std::fflush(stdout);
  std::fprintf(stderr, "tapewise-bench: %s\n", status.error().str().c_str());
  return status.error().code == ErrorCode::DeviceUnavailable ? 2 : 1;
}
