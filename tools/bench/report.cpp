// tools/bench/report.cpp — the benchmark's output: one table row per op/dtype/size/direction on
// stdout, notes for add/sub and the chain, a PASS/MISS summary against the targets, and the
// same content as JSON. Formatting only: every number comes from main.cpp.
#include <cstdio>
#include <string>

#include "bench.hpp"

namespace tapewise::bench {
namespace {

std::string num(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
std::string opt_num(const char* f, const std::optional<double>& v) { return v ? num(f, *v) : "-"; }
std::string mib(double bytes) {
  if (bytes >= 1024.0 * 1024.0) return num("%.0f MiB", bytes / (1024.0 * 1024.0));
  return bytes >= 1024.0 ? num("%.0f KiB", bytes / 1024.0) : num("%.0f B", bytes);
}
std::string key(const Row& r) { return r.op + " " + r.dtype + " 2^" + std::to_string(r.log2n) + " " + r.dir; }

}  // namespace

void print_table(const json& meta, const json& copy, const std::vector<Row>& rows,
                 const std::optional<ChainResult>& chain, bool have_torch, bool have_compare) {
  std::printf("\n== tapewise-bench: %s | %s | commit %s | %s\n", meta.value("gpu", "?").c_str(),
              meta.value("date", "?").c_str(), meta.value("commit", "?").c_str(), meta.value("kernel", "?").c_str());
  std::printf("   %s; CUDA driver %d, runtime %d; L2 %.0f MB\n", meta.value("backend", "?").c_str(),
              meta.value("cuda_driver", 0), meta.value("cuda_runtime", 0), meta.value("l2_bytes", 0) / 1e6);
  if (meta.contains("torch") && meta["torch"].is_object())
    std::printf("   PyTorch %s on %s (eager; backward via torch.autograd.grad)\n",
                meta["torch"].value("torch", "?").c_str(), meta["torch"].value("gpu", "?").c_str());
  const json& roof = copy["roofline_1GiB"];
  std::printf("   copy roofline: 1 GiB cudaMemcpyAsync D2D, %.4f ms, %.1f GB/s (bytes read + written)\n",
              roof.value("ms", 0.0), roof.value("gbps", 0.0));
  std::printf("   ms: median of per-call CUDA events; GB/s: fewest bytes / ms; %%copy: a D2D copy moving the same\n"
              "   bytes, same run (time ratio); ratio: PyTorch ms / tapewise ms; targets: float32 at 2^26\n\n");

  std::printf("%-9s %-4s %-5s %-6s %9s %8s %6s %9s %7s", "op", "type", "n", "dir", "ms", "GB/s", "%copy",
              "torch_ms", "ratio");
  if (have_compare) std::printf(" %9s %7s", "ref_ms", "speedup");
  std::printf("  %-11s %-34s %s\n", "check", "target", "verdict");
  std::string last_group;
  for (const Row& r : rows) {
    const std::string group = r.dtype + std::to_string(r.log2n);
    if (!last_group.empty() && group != last_group) std::printf("\n");
    last_group = group;
    std::printf("%-9s %-4s 2^%-3d %-6s %9.4f %8.1f %5.1f%% %9s %7s", r.op.c_str(), r.dtype.c_str(), r.log2n,
                r.dir.c_str(), r.ms, r.gbps, 100.0 * r.frac_copy, opt_num("%.4f", r.torch_ms).c_str(),
                r.ratio ? num("%.2fx", *r.ratio).c_str() : "-");
    if (have_compare)
      std::printf(" %9s %7s", opt_num("%.4f", r.compare_ms).c_str(), r.speedup ? num("%.2fx", *r.speedup).c_str() : "-");
    std::printf("  %-11s %-34s %s\n", r.check.c_str(), r.target.c_str(), r.verdict.c_str());
  }

  bool noted = false;
  for (const Row& r : rows) {
    if (!r.torch_bytes) continue;
    if (!noted) std::printf("\nadd/sub backward (PyTorch hands g through; tapewise returns fresh gradient buffers):\n");
    noted = true;
    std::printf("  %-28s tapewise %.4f ms moving %s, PyTorch %s ms moving %s, ratio %s\n", key(r).c_str(), r.ms,
                mib(r.bytes).c_str(), opt_num("%.4f", r.torch_ms).c_str(), mib(*r.torch_bytes).c_str(),
                r.ratio ? num("%.2fx", *r.ratio).c_str() : "-");
  }

  if (chain) {
    std::printf("\nchain: %d nodes x %lld float32 [sin, tanh, sigmoid, scale 0.9, relu], record + backward, host clock,\n"
                "       %d warm-up + %d timed runs: %.2f us/node (host time in record %.2f, backward %.2f, teardown %.2f)\n",
                chain->nodes, static_cast<long long>(chain->n), chain->warmup, chain->runs, chain->us_per_node,
                chain->record_host_us_per_node, chain->backward_host_us_per_node, chain->teardown_host_us_per_node);
    std::printf("       PyTorch eager %s us/node -> %s faster (target >= %.0fx): %s\n",
                opt_num("%.2f", chain->torch_us_per_node).c_str(),
                chain->speedup ? num("%.2fx", *chain->speedup).c_str() : "-", kChainSpeedupTarget,
                chain->verdict.c_str());
  }

  const json s = summary_json(rows, chain);
  std::printf("\nsummary: %d PASS, %d MISS of %d judged rows (float32, 2^26)%s; output checks: %s\n",
              s.value("pass", 0), s.value("miss", 0), s.value("judged", 0),
              have_torch ? "" : " [no PyTorch JSON: ratios not judged]",
              s["check_failures"].empty() ? "all ok" : "FAILURES");
  for (const json& m : s["misses"]) std::printf("  MISS %s\n", m.get<std::string>().c_str());
  for (const json& m : s["check_failures"]) std::printf("  CHECK %s\n", m.get<std::string>().c_str());
  std::fflush(stdout);
}

json rows_json(const std::vector<Row>& rows) {
  json list = json::array();
  for (const Row& r : rows) {
    json j = {{"op", r.op}, {"dtype", r.dtype}, {"log2n", r.log2n}, {"n", std::int64_t{1} << r.log2n},
              {"dir", r.dir}, {"ms", r.ms}, {"bytes", r.bytes}, {"gbps", r.gbps}, {"copy_ms", r.copy_ms},
              {"frac_copy", r.frac_copy}};
    j["torch_ms"] = r.torch_ms ? json(*r.torch_ms) : json();
    j["ratio"] = r.ratio ? json(*r.ratio) : json();
    if (r.torch_bytes) j["torch_bytes"] = *r.torch_bytes;
    if (r.compare_ms) {
      j["compare_ms"] = *r.compare_ms;
      j["speedup"] = *r.speedup;
    }
    j["check"] = r.check;
    j["target"] = r.target;
    j["verdict"] = r.verdict;
    list.push_back(j);
  }
  return list;
}

json chain_json(const ChainResult& c) {
  json j = {{"nodes", c.nodes}, {"n", c.n}, {"dtype", "f32"}, {"ops", "sin, tanh, sigmoid, scale 0.9, relu"},
            {"warmup", c.warmup}, {"runs", c.runs}, {"us_per_node", c.us_per_node},
            {"record_host_us_per_node", c.record_host_us_per_node},
            {"backward_host_us_per_node", c.backward_host_us_per_node},
            {"teardown_host_us_per_node", c.teardown_host_us_per_node}};
  j["torch_us_per_node"] = c.torch_us_per_node ? json(*c.torch_us_per_node) : json();
  j["speedup"] = c.speedup ? json(*c.speedup) : json();
  j["target_speedup"] = kChainSpeedupTarget;
  j["verdict"] = c.verdict;
  return j;
}

json summary_json(const std::vector<Row>& rows, const std::optional<ChainResult>& chain) {
  int pass = 0, miss = 0;
  json misses = json::array(), failures = json::array();
  double min_fwd = 1e9, min_vjp = 1e9;
  for (const Row& r : rows) {
    if (r.verdict == "PASS") ++pass;
    if (r.verdict == "MISS") {
      ++miss;
      misses.push_back(key(r) + ": " + num("%.1f%% copy", 100.0 * r.frac_copy) +
                       (r.ratio ? num(", %.2fx torch", *r.ratio) : std::string()) + " (target " + r.target + ")");
    }
    if (r.check != "ok") failures.push_back(key(r) + ": " + r.check);
    if (r.dtype == "f32" && r.log2n == 26) {
      if (r.dir == "fwd") min_fwd = std::min(min_fwd, r.frac_copy);
      if (r.dir == "vjp") min_vjp = std::min(min_vjp, r.frac_copy);
    }
  }
  if (chain && chain->verdict != "-") {
    (chain->verdict == "PASS" ? pass : miss) += 1;
    if (chain->verdict == "MISS")
      misses.push_back("chain: " + num("%.2f us/node, ", chain->us_per_node) +
                       num("%.2fx torch (target >= 10x)", chain->speedup.value_or(0.0)));
  }
  json s = {{"judged", pass + miss}, {"pass", pass}, {"miss", miss}, {"misses", misses}, {"check_failures", failures}};
  s["min_frac_copy_fwd_f32_2^26"] = min_fwd < 1e9 ? json(min_fwd) : json();
  s["min_frac_copy_vjp_f32_2^26"] = min_vjp < 1e9 ? json(min_vjp) : json();
  return s;
}

}  // namespace tapewise::bench
