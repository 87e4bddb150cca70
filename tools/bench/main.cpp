// tools/bench/main.cpp — tapewise-bench: per node, direction, size and dtype, the CUDA backend's
// median time against a device-to-device copy of the same bytes and against PyTorch eager (the JSON
// of tools/bench_torch.py, same GPU, same run), plus the 1,000-node record + backward chain.
// It times; correctness is the tests' and tapewise-conform's job (here only poison and equality checks).
#include <algorithm>
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

// As torch_baseline.py: normal values, or |x| + 0.5 for ops that need positive inputs. An element
// that rounds to zero in the dtype becomes 1 (never zeros).
template <class T>
HostArray host_array(const std::vector<double>& v, bool positive) {
  std::vector<T> t(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const T y = static_cast<T>(positive ? std::fabs(v[i]) + 0.5 : v[i]);
    t[i] = y == T(0) ? T(1) : y;
  }
  return HostArray::of<T>(Shape{static_cast<std::int64_t>(v.size())}, t);
}

HostArray host_array(DType d, const std::vector<double>& v, bool positive) {
  return d == DType::float32 ? host_array<float>(v, positive) : host_array<double>(v, positive);
}

// a, b, g ~ N(0, 1); ap, bp = |.| + 0.5 (sqrt, log, div, inv, as torch_baseline.py's POS).
struct Inputs {
  Buffer a, b, g, ap, bp;
};

Inputs make_inputs(Backend& be, DType d, std::int64_t n, std::uint64_t seed) {
  Inputs in;
  const std::vector<double> va = normal_values(n, seed + 1), vb = normal_values(n, seed + 2),
                            vg = normal_values(n, seed + 3);
  in.a = value_or_die(be.upload(host_array(d, va, false)), "upload a");
  in.b = value_or_die(be.upload(host_array(d, vb, false)), "upload b");
  in.g = value_or_die(be.upload(host_array(d, vg, false), AllocTag::gradient), "upload g");
  in.ap = value_or_die(be.upload(host_array(d, va, true)), "upload |a| + 0.5");
  in.bp = value_or_die(be.upload(host_array(d, vb, true)), "upload |b| + 0.5");
  return in;
}

// --- the ops as torch_baseline.py defines them ------------------------------------------------------

Scalars bench_scalars(Op op) {
  switch (op) {
    case Op::scale: return {0.37, 0.0};
    case Op::clamp: return {-0.5, 0.5};
    case Op::safeLog: return {1e-6, 0.0};
    default: return {};
  }
}

bool positive_inputs(Op op) { return op == Op::sqrt || op == Op::log || op == Op::div || op == Op::inv; }

// Whether the fused VJP reads x (a, b): not for add, sub, neg, scale, whose gradients depend on g
// alone; the compiler drops those loads (checked in the PTX: add's VJP has one vector load per step).
bool vjp_reads_inputs(Op op) { return !(op == Op::add || op == Op::sub || op == Op::neg || op == Op::scale); }

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

  void poison(Buffer& b) {
    if (!stream_) std::memset(b.data(), 0xFF, b.bytes());  // --backend cpu
    else cuda_ok(cudaMemsetAsync(b.data(), 0xFF, b.bytes(), stream_), "poison (cudaMemsetAsync)");
  }
  void fetch(const Buffer& b, HostCopy& h) {
    if (h.capacity < b.bytes()) {
      h.data.reset(new std::byte[b.bytes()]);
      h.capacity = b.bytes();
    }
    h.size = b.bytes();
    copy(h.data.get(), b.data(), b.bytes(), cudaMemcpyDeviceToHost, "download");
    if (stream_) cuda_ok(cudaStreamSynchronize(stream_), "download");
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
  double copy_ms(double traffic, int reps) {
    const std::size_t bytes = static_cast<std::size_t>(traffic / 2);
    const auto key = std::make_pair(bytes, reps);
    if (auto it = copies_.find(key); it != copies_.end()) return it->second;
    if (!pattern_) {
      const std::int64_t n = std::int64_t{1} << 24;  // 64 MiB of float32
      pattern_ = value_or_die(be_.upload(host_array<float>(normal_values(n, 7), false)), "upload copy pattern");
    }
    const Shape shape{static_cast<std::int64_t>((bytes + 3) / 4)};
    Buffer src = value_or_die(be_.allocate(shape, DType::float32, AllocTag::workspace), "allocate copy source");
    Buffer dst = value_or_die(be_.allocate(shape, DType::float32, AllocTag::workspace), "allocate copy target");
    for (std::size_t off = 0; off < bytes; off += pattern_.bytes())
      copy(static_cast<std::byte*>(src.data()) + off, pattern_.data(), std::min(pattern_.bytes(), bytes - off),
           cudaMemcpyDeviceToDevice, "fill copy source");
    const double ms = median_ms(
        stream_, reps,
        [&]() -> Result<void> {
          copy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, "D2D copy");
          return {};
        },
        "D2D copy of " + std::to_string(bytes) + " bytes");
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
  void copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind, const char* what) {
    if (!stream_) std::memcpy(dst, src, bytes);
    else cuda_ok(cudaMemcpyAsync(dst, src, bytes, kind, stream_), what);
  }

  Backend& be_;
  cudaStream_t stream_;
  Buffer pattern_;
  std::map<std::pair<std::size_t, int>, double> copies_;
};

// --- PyTorch's numbers and an earlier tapewise run ---------------------------------------------------

json read_json(const std::string& path, const char* what) {
  std::ifstream f(path);
  if (!f) die(std::string("cannot open ") + what + " " + path);
  try {
    return json::parse(f);
  } catch (const std::exception& e) {
    die(std::string("cannot parse ") + what + " " + path + ": " + e.what());
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

std::string size_key(DType d, int log2n) { return std::string(dtype_short(d)) + "_" + std::to_string(log2n); }
std::string row_key(const std::string& op, const std::string& dt, int log2n, const std::string& dir) {
  return op + "/" + dt + "/" + std::to_string(log2n) + "/" + dir;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Targets apply to float32 at 2^26 (fwd and fused vjp).
void judge(Row& r, Op op, bool have_torch) {
  if (r.dtype != "f32" || r.log2n != 26 || r.dir == "staged") return;
  if (r.dir == "fwd") {
    r.target = ">=95% copy";
    r.verdict = r.frac_copy >= kForwardCopyTarget ? "PASS" : "MISS";
    return;
  }
  bool ok = r.frac_copy >= kVjpCopyTarget;
  r.target = ">=90% copy";
  const double want = ratio_target(op);
  if (want == 0.0) {
    r.target += ", ratio reported";
  } else if (have_torch && r.ratio) {
    r.target += ", >=" + fmt("%.2f", want) + "x torch";
    ok = ok && *r.ratio >= want;
  } else {
    r.target += ", ratio n/a (no torch)";
  }
  r.verdict = ok ? "PASS" : "MISS";
}

// --- the 1,000-node chain: record + backward, as torch_extra.py measures PyTorch ---------------------

ChainResult run_chain(const std::shared_ptr<Backend>& be, std::uint64_t seed) {
  ChainResult c;
  const Shape shape{c.n};
  const Buffer x = value_or_die(be->upload(host_array<float>(normal_values(c.n, seed), false)), "chain: upload x");
  std::vector<Buffer> leaves;  // one fresh leaf per run, made before the clock starts
  for (int r = 0; r < c.warmup + c.runs; ++r) {
    Buffer leaf = value_or_die(be->allocate(shape, DType::float32, AllocTag::value), "chain: allocate leaf");
    const Buffer* in[1] = {&x};
    ok_or_die(be->prim(Prim::copy, 0.0, in, leaf), "chain: copy leaf");
    leaves.push_back(std::move(leaf));
  }
  ok_or_die(be->synchronize(), "chain: synchronize");

  using clock = std::chrono::steady_clock;
  double record_s = 0, backward_s = 0, teardown_s = 0;
  auto once = [&](Buffer leaf, bool timed) {
    const auto t0 = clock::now();
    auto tape = std::make_unique<Tape>(be);
    NodeId h = value_or_die(tape->leaf(std::move(leaf)), "chain: leaf");
    for (int i = 0; i < c.nodes; ++i) {
      switch (i % 5) {  // torch_extra.py: [sin, tanh, sigmoid, t * 0.9, relu]
        case 0: h = value_or_die(tape->sin(h), "chain: sin"); break;
        case 1: h = value_or_die(tape->tanh(h), "chain: tanh"); break;
        case 2: h = value_or_die(tape->sigmoid(h), "chain: sigmoid"); break;
        case 3: h = value_or_die(tape->scale(h, 0.9), "chain: scale"); break;
        default: h = value_or_die(tape->relu(h), "chain: relu"); break;
      }
    }
    const auto t1 = clock::now();
    // torch.ones_like(h) inside the timed region there: an allocation and a fill kernel here.
    Buffer ones = value_or_die(be->allocate(shape, DType::float32, AllocTag::gradient), "chain: seed");
    ok_or_die(be->prim(Prim::fill, 1.0, {}, ones), "chain: seed fill");
    auto grads = std::make_unique<Gradients>(value_or_die(tape->backward(h, ones), "chain: backward"));
    const auto t2 = clock::now();
    grads.reset();  // PyTorch frees its graph and gradients when chain() returns: so do we, timed
    ones.reset();
    tape.reset();
    const auto t3 = clock::now();
    if (timed) {
      record_s += std::chrono::duration<double>(t1 - t0).count();
      backward_s += std::chrono::duration<double>(t2 - t1).count();
      teardown_s += std::chrono::duration<double>(t3 - t2).count();
    }
  };
  for (int r = 0; r < c.warmup; ++r) once(std::move(leaves[static_cast<std::size_t>(r)]), false);
  ok_or_die(be->synchronize(), "chain: synchronize");
  const auto t0 = clock::now();
  for (int r = 0; r < c.runs; ++r) once(std::move(leaves[static_cast<std::size_t>(c.warmup + r)]), true);
  ok_or_die(be->synchronize(), "chain: synchronize");
  const double total_s = std::chrono::duration<double>(clock::now() - t0).count();
  const double per = 1e6 / (static_cast<double>(c.runs) * c.nodes);
  c.us_per_node = total_s * per;
  c.record_host_us_per_node = record_s * per;
  c.backward_host_us_per_node = backward_s * per;
  c.teardown_host_us_per_node = teardown_s * per;
  return c;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
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

int main(int argc, char** argv) {
  Options opt;
  std::string sizes = "26,12", dtypes = "f32,f64", ops = "all";
  bool no_staged = false, no_chain = false;
  CLI::App app{"tapewise-bench: per node and direction, the CUDA backend against the device copy roofline "
               "and PyTorch eager on the same GPU; plus the 1,000-node record + backward chain"};
  app.add_option("--sizes", sizes, "log2 of the element counts, comma-separated")->capture_default_str();
  app.add_option("--dtypes", dtypes, "f32,f64")->capture_default_str();
  app.add_option("--ops", ops, "'all' or comma-separated node names")->capture_default_str();
  app.add_option("--reps", opt.reps, "timed runs (median) for sizes >= 2^20; 10x that below")
      ->capture_default_str()->check(CLI::Range(20, 100000));
  app.add_option("--json", opt.json_path, "write the results as JSON here");
  app.add_option("--torch", opt.torch_path, "PyTorch eager timings from tools/bench_torch.py (same GPU, same run)");
  app.add_option("--compare", opt.compare_path, "an earlier tapewise-bench JSON: adds its ms and the speedup");
  app.add_option("--commit", opt.commit, "git commit to record (default: $TAPEWISE_COMMIT, else 'unknown')");
  app.add_option("--date", opt.date, "date to record (default: today, UTC)");
  app.add_option("--device", opt.device, "CUDA device index")->capture_default_str();
  app.add_option("--backend", opt.backend, "cuda; or cpu: a dry run of this tool on the CPU backend with a "
                                           "host clock, to check it without a GPU (its numbers mean nothing)")
      ->capture_default_str()->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--seed", opt.seed, "input seed")->capture_default_str();
  app.add_flag("--no-staged", no_staged, "skip the staged VJP timings");
  app.add_flag("--no-chain", no_chain, "skip the 1,000-node chain");
  CLI11_PARSE(app, argc, argv);
  opt.staged = !no_staged;
  opt.chain = !no_chain;

  opt.log2_sizes.clear();
  for (const std::string& s : split(sizes)) {
    int v = 0;
    try { v = std::stoi(s); } catch (...) { die("--sizes: '" + s + "' is not a number"); }
    if (v < 2 || v > 30) die("--sizes: log2 size " + s + " outside [2, 30]");
    opt.log2_sizes.push_back(v);
  }
  opt.dtypes.clear();
  for (const std::string& s : split(dtypes)) {
    if (s == "f32" || s == "float32") opt.dtypes.push_back(DType::float32);
    else if (s == "f64" || s == "float64") opt.dtypes.push_back(DType::float64);
    else die("--dtypes: unknown dtype '" + s + "' (f32, f64)");
  }
  if (ops == "all") {
    for (const OpInfo& info : kOps) opt.ops.push_back(info.op);
  } else {
    for (const std::string& s : split(ops)) {
      auto op = op_from_name(s);
      if (!op) die("--ops: unknown node '" + s + "'");
      opt.ops.push_back(*op);
    }
  }
  if (opt.log2_sizes.empty() || opt.dtypes.empty() || opt.ops.empty()) die("nothing to measure");
  if (opt.commit.empty()) opt.commit = std::getenv("TAPEWISE_COMMIT") ? std::getenv("TAPEWISE_COMMIT") : "unknown";
  if (opt.date.empty()) opt.date = today_utc();
  const json torch = opt.torch_path.empty() ? json() : read_json(opt.torch_path, "PyTorch JSON");
  const json compare = opt.compare_path.empty() ? json() : read_json(opt.compare_path, "comparison JSON");
  const bool have_torch = !torch.is_null();
  std::map<std::string, double> compare_ms;
  if (!compare.is_null())
    for (const json& r : compare.value("rows", json::array()))
      compare_ms[row_key(r.value("op", ""), r.value("dtype", ""), r.value("log2n", 0), r.value("dir", ""))] =
          r.value("ms", 0.0);

  // --- the device: a clear message and exit code 2 where there is none ---------------------------------
  std::shared_ptr<Backend> be;
  cudaStream_t stream = nullptr;
  cudaDeviceProp prop{};
  int driver = 0, runtime = 0;
  std::string why;
  if (opt.backend == "cpu") {
    be = make_cpu_backend();
    std::snprintf(prop.name, sizeof prop.name, "CPU (dry run, numbers mean nothing)");
  } else if (!cuda_available(&why)) {
    std::fprintf(stderr,
                 "tapewise-bench: no usable CUDA device (%s).\n"
                 "tapewise-bench times the CUDA backend and needs an NVIDIA GPU: run it on the GPU machine "
                 "(tools/run_bench.sh OUTDIR).\n",
                 why.c_str());
    return 2;
  } else {
    auto made = make_cuda_backend(opt.device);
    if (!made) {
      std::fprintf(stderr, "tapewise-bench: cannot open the CUDA backend: %s\n", made.error().str().c_str());
      return 2;
    }
    be = *made;
    stream = static_cast<cudaStream_t>(cuda_stream(*be));
    if (!stream) die("the CUDA backend has no stream (tapewise::cuda_stream returned null)");
    cuda_ok(cudaGetDeviceProperties(&prop, opt.device), "cudaGetDeviceProperties");
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
  }
  Device dev(*be, stream);

  json meta = {{"tool", "tapewise-bench"},
               {"kernel", "prod: cuda/backends/cuda_backend.cu"},
               {"date", opt.date},
               {"commit", opt.commit},
               {"gpu", prop.name},
               {"backend", be->describe()},
               {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
               {"sm_count", prop.multiProcessorCount},
               {"l2_bytes", prop.l2CacheSize},
               {"global_mem_bytes", prop.totalGlobalMem},
               {"cuda_driver", driver},
               {"cuda_runtime", runtime},
               {"reps", opt.reps},
               {"reps_below_2^20", 10 * opt.reps},
               {"seed", opt.seed},
               {"timing", "median of per-call CUDA event pairs on the backend's stream, after 3 warm-up calls"},
               {"bytes", "fewest bytes moved: each input the kernel reads once, each output written once"},
               {"copy", "cudaMemcpyAsync D2D moving the same bytes (read + write) in the same run"},
               {"torch_json", opt.torch_path},
               {"compare_json", opt.compare_path}};
  if (have_torch) meta["torch"] = torch.value("meta", json::object());

  // The copy roofline: a 1 GiB buffer copied (2 GiB moved), after ~0.25 s of the same copies so that
  // the GPU has left its idle clocks (the PyTorch process before this one may have exited seconds ago).
  const double roofline_traffic = 2.0 * static_cast<double>(std::int64_t{1} << 30);
  if (stream) dev.copy_ms(roofline_traffic, 500);
  const double roofline_ms = dev.copy_ms(roofline_traffic, opt.reps);
  json copy = {{"roofline_1GiB", {{"traffic_bytes", roofline_traffic}, {"ms", roofline_ms},
                                  {"gbps", roofline_traffic / (roofline_ms * 1e-3) / 1e9}}}};
  std::printf("tapewise-bench on %s, %s, commit %s; copy roofline (1 GiB D2D): %.1f GB/s\n", prop.name,
              opt.date.c_str(), opt.commit.c_str(), roofline_traffic / (roofline_ms * 1e-3) / 1e9);
  std::fflush(stdout);

  std::vector<Row> rows;
  bool checks_failed = false;
  HostCopy ref[2], got;
  for (const DType d : opt.dtypes) {
    for (const int log2n : opt.log2_sizes) {
      const std::int64_t n = std::int64_t{1} << log2n;
      const int reps = reps_for(opt, log2n);
      Inputs in = make_inputs(*be, d, n, opt.seed + 100 * static_cast<std::uint64_t>(log2n) + (d == DType::float64 ? 7 : 0));
      const Shape shape{n};
      std::printf("  measuring %s 2^%d (%d reps) ...\n", dtype_short(d), log2n, reps);
      std::fflush(stdout);
      for (const Op op : opt.ops) {
        const OpInfo& info = op_info(op);
        const Scalars sc = bench_scalars(op);
        const bool pos = positive_inputs(op);
        const Buffer* inputs[2] = {pos ? &in.ap : &in.a, pos ? &in.bp : &in.b};
        const std::span<const Buffer* const> ins(inputs, static_cast<std::size_t>(info.arity));
        Buffer out = value_or_die(be->allocate(shape, d, AllocTag::value), "allocate output");
        Buffer grads[2];
        for (int k = 0; k < info.arity; ++k)
          grads[k] = value_or_die(be->allocate(shape, d, AllocTag::gradient), "allocate gradient");
        Buffer* gptr[2] = {&grads[0], &grads[1]};
        const std::span<Buffer* const> gs(gptr, static_cast<std::size_t>(info.arity));
        const std::string what = std::string(info.name) + " " + dtype_short(d) + " 2^" + std::to_string(log2n);

        auto make_row = [&](const std::string& dir, double ms, const std::string& check) {
          Row r;
          r.op = info.name;
          r.dtype = dtype_short(d);
          r.log2n = log2n;
          r.dir = dir;
          r.ms = ms;
          r.bytes = bytes_moved(op, dir, n, d);
          r.gbps = r.bytes / (ms * 1e-3) / 1e9;
          r.copy_ms = dev.copy_ms(r.bytes, reps);
          r.frac_copy = r.copy_ms / ms;
          r.check = check;
          if (have_torch && dir != "staged")
            r.torch_ms = json_number(torch, {"ops", info.name, size_key(d, log2n), dir == "fwd" ? "fwd_ms" : "bwd_ms"});
          if (r.torch_ms) r.ratio = *r.torch_ms / ms;
          if (dir == "vjp") r.torch_bytes = torch_backward_bytes(op, n, d);
          if (auto it = compare_ms.find(row_key(r.op, r.dtype, log2n, dir)); it != compare_ms.end() && it->second > 0) {
            r.compare_ms = it->second;
            r.speedup = it->second / ms;
          }
          judge(r, op, have_torch);
          if (check != "ok") checks_failed = true;
          rows.push_back(r);
        };
        // Poison the outputs, run once, check every element was written. The outputs land in ref[]
        // (the fused gradients stay there for the staged comparison).
        auto check_outputs = [&](std::span<Buffer* const> outs, const std::function<Result<void>()>& call) -> std::string {
          for (Buffer* o : outs) dev.poison(*o);
          ok_or_die(call(), what);
          std::string result = "ok";
          for (std::size_t k = 0; k < outs.size(); ++k) {
            dev.fetch(*outs[k], ref[k]);
            if (const std::int64_t bad = Device::unwritten(ref[k], d); bad > 0) result = std::to_string(bad) + " unwritten";
          }
          return result;
        };

        // (a) forward
        {
          Buffer* outs[1] = {&out};
          const std::function<Result<void>()> fwd = [&]() { return be->forward(op, sc, ins, out); };
          const std::string check = check_outputs(outs, fwd);
          make_row("fwd", median_ms(stream, reps, fwd, what + " forward"), check);
        }
        // (b) fused VJP
        {
          const std::function<Result<void>()> vjp = [&]() { return be->vjp_fused(op, sc, ins, in.g, gs); };
          const std::string check = check_outputs(gs, vjp);
          make_row("vjp", median_ms(stream, reps, vjp, what + " fused vjp"), check);
        }
        // (c) staged VJP, for reference; its outputs must equal the fused ones bit for bit
        if (opt.staged) {
          auto staged = [&]() { return staged_vjp(*be, op, sc, ins, in.g, gs); };
          for (Buffer* o : gs) dev.poison(*o);
          ok_or_die(staged(), what + " staged vjp");
          std::string check = "ok";
          for (std::size_t k = 0; k < gs.size(); ++k) {
            dev.fetch(*gs[k], got);
            if (const std::int64_t bad = Device::unwritten(got, d); bad > 0) check = std::to_string(bad) + " unwritten";
            else if (!Device::same(got, ref[k])) check = "staged!=fused";
          }
          make_row("staged", median_ms(stream, reps, staged, what + " staged vjp"), check);
        }
      }
      ok_or_die(be->synchronize(), "synchronize");
    }
  }
  copy["same_traffic"] = dev.copies_json();

  std::optional<ChainResult> chain;
  if (opt.chain) {
    std::printf("  measuring the 1,000-node chain ...\n");
    std::fflush(stdout);
    chain = run_chain(be, opt.seed + 999);
    if (have_torch) chain->torch_us_per_node = json_number(torch, {"chain", "us_per_node"});
    if (chain->torch_us_per_node) {
      chain->speedup = *chain->torch_us_per_node / chain->us_per_node;
      chain->verdict = *chain->speedup >= kChainSpeedupTarget ? "PASS" : "MISS";
    }
  }

  if (have_torch) copy["torch_copy"] = torch.value("copy", json::object());
  print_table(meta, copy, rows, chain, have_torch, !compare.is_null());

  if (!opt.json_path.empty()) {
    json doc = {{"meta", meta}, {"copy", copy}, {"rows", rows_json(rows)}};
    if (chain) doc["chain"] = chain_json(*chain);
    doc["summary"] = summary_json(rows, chain);
    if (have_torch) doc["torch"] = torch;
    std::ofstream f(opt.json_path);
    if (!f) die("cannot write " + opt.json_path);
    f << doc.dump(1) << "\n";
    std::printf("wrote %s\n", opt.json_path.c_str());
  }
  if (checks_failed) {
    std::fprintf(stderr, "tapewise-bench: some output checks FAILED (see the check column)\n");
    return 3;
  }
  return 0;
}
