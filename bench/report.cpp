// bench/report.cpp — the benchmark's output: one table row per op/dtype/size/direction (and
// launch shape) on stdout with its rooflines and peers, notes for add/sub, each chain shape at each
// size beside PyTorch's three forms, a PASS/MISS summary against the targets, and the same
// content as JSON. Formatting only: every number comes from main.cpp and chain.cpp.
#include <algorithm>
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
std::string key(const Row& r) {
  return r.op + " " + r.dtype + " 2^" + std::to_string(r.log2n) + " " + r.dir + (r.shape.empty() ? "" : " [" + r.shape + "]");
}
json opt_json(const std::optional<double>& v) { return v ? json(*v) : json(); }

void print_rows(const std::vector<Row>& rows, bool have_compare) {
  std::printf("%-9s %-4s %-5s %-6s %-7s %9s %8s %6s %6s %9s %6s  %-17s", "op", "type", "n", "dir", "shape", "ms", "GB/s",
              "%copy", "%roof", "torch_ms", "eager", "strongest peer");
  if (have_compare) std::printf(" %9s %7s", "ref_ms", "speedup");
  std::printf("  %-11s %-36s %s\n", "check", "target", "verdict");
  std::string last_group;
  for (const Row& r : rows) {
    const std::string group = r.shape + r.dtype + std::to_string(r.log2n);
    if (!last_group.empty() && group != last_group) std::printf("\n");
    last_group = group;
    std::printf("%-9s %-4s 2^%-3d %-6s %-7s %9.4f %8.1f %5.1f%% %5.1f%% %9s %6s  %-17s", r.op.c_str(), r.dtype.c_str(),
                r.log2n, r.dir.c_str(), r.shape.empty() ? "default" : r.shape.c_str(), r.ms, r.gbps, 100.0 * r.frac_copy,
                100.0 * r.frac_roofline, opt_num("%.4f", r.torch_ms).c_str(), r.ratio ? num("%.2fx", *r.ratio).c_str() : "-",
                peer_text(r.peer, r.ms).c_str());
    if (have_compare)
      std::printf(" %9s %7s", opt_num("%.4f", r.compare_ms).c_str(), r.speedup ? num("%.2fx", *r.speedup).c_str() : "-");
    std::printf("  %-11s %-36s %s\n", r.check.c_str(), r.target.c_str(), r.verdict.c_str());
  }
}

// "chain unary 2^12": a chain row's name in the summary.
std::string chain_key(const ChainResult& c) { return "chain " + c.shape + " 2^" + std::to_string(c.log2n); }

// One block per shape: its graph in words, then each size's times beside PyTorch's three forms and the
// strongest of them.
void print_chains(const std::vector<ChainResult>& chains, bool every_gradient) {
  if (chains.empty()) return;
  const ChainResult& c0 = chains.front();
  std::printf("\nchains: %s, record + backward (%s) + release; host clock over %d runs after %d warm-ups%s;\n"
              "        device: one run queued whole behind a gate, then CUDA events (program-sized chains); us per "
              "node\n        (nodes: the tape's nodes other than leaves); strongest peer: the fastest of eager, "
              "graph and\n        compile, its us / ours (WINS below 1x)\n",
              dtype_name(c0.dtype), every_gradient ? "every node's gradient" : "the leaves' gradients", c0.runs, c0.warmup,
              c0.calls > 1 ? (", " + std::to_string(c0.calls) + " such blocks: total is the median block, spread "
                              "its min-max").c_str()
                           : "");
  std::string last_shape;
  for (const ChainResult& c : chains) {
    if (c.shape != last_shape) {
      std::printf("\n  %s: %d nodes, %d %s [%s]\n", c.shape.c_str(), c.nodes, c.leaves, c.leaves == 1 ? "leaf" : "leaves",
                  c.ops.c_str());
      std::printf("  %-6s %8s %8s %8s %8s %8s | %8s %8s %8s %9s | %-26s %s\n", "n", "total", "record", "backward",
                  "teardown", "device", "eager", "graph", "compile", "compile_s", "strongest peer", "verdict");
      last_shape = c.shape;
    }
    std::printf("  2^%-4d %8.3f %8.3f %8.3f %8.3f %8s | %8s %8s %8s %9s | %-26s %s %s\n", c.log2n, c.us_per_node,
                c.record_host_us_per_node, c.backward_host_us_per_node, c.teardown_host_us_per_node,
                opt_num("%.3f", c.device_us_per_node).c_str(), opt_num("%.2f", c.eager_us_per_node).c_str(),
                opt_num("%.2f", c.graph_us_per_node).c_str(), opt_num("%.3f", c.compile_us_per_node).c_str(),
                opt_num("%.1f", c.compile_first_call_s).c_str(), peer_text(c.peer, c.us_per_node).c_str(),
                c.target.c_str(), c.verdict.c_str());
    if (c.calls > 1) {
      const auto [lo, hi] = std::minmax_element(c.us_per_node_calls.begin(), c.us_per_node_calls.end());
      std::printf("         spread %.3f-%.3f over %d blocks\n", *lo, *hi, c.calls);
    }
  }
}

}  // namespace

// "compile 1.23x": the fastest peer and how much slower it is than tapewise (below 1x: it wins).
std::string peer_text(const std::optional<Peer>& peer, double ours) {
  if (!peer) return "-";
  const double ratio = peer->ms / ours;
  return peer->name + " " + num("%.2fx", ratio) + (ratio < 1.0 ? " WINS" : "");
}

void print_table(const json& meta, const json& copy, const std::vector<Row>& rows,
                 const std::vector<ChainResult>& chains, bool have_torch, bool have_compare) {
  std::printf("\n== tapewise-bench: %s | %s | commit %s | %s\n", meta.value("gpu", "?").c_str(),
              meta.value("date", "?").c_str(), meta.value("commit", "?").c_str(), meta.value("kernel", "?").c_str());
  std::printf("   %s; CUDA driver %d, runtime %d; L2 %.0f MB\n", meta.value("backend", "?").c_str(),
              meta.value("cuda_driver", 0), meta.value("cuda_runtime", 0), meta.value("l2_bytes", 0) / 1e6);
  if (meta.contains("torch") && meta["torch"].is_object())
    std::printf("   PyTorch %s on %s: eager (backward via torch.autograd.grad), torch.compile (default mode), CUDA graphs\n",
                meta["torch"].value("torch", "?").c_str(), meta["torch"].value("gpu", "?").c_str());
  if (copy.contains("roofline_1GiB")) {
    const json& roof = copy["roofline_1GiB"];
    std::printf("   copy roofline: 1 GiB cudaMemcpyAsync D2D, %.4f ms, %.1f GB/s (bytes read + written)\n",
                roof.value("ms", 0.0), roof.value("gbps", 0.0));
  } else {
    std::printf("   copy roofline: not measured (the CPU backend's chain alone)\n");
  }
  std::printf("   ms: median of per-call CUDA events; GB/s: fewest bytes / ms; %%copy: a D2D copy moving the same bytes,\n"
              "   same run (time ratio); %%roof: the larger of that copy and the compute time from ncu's instruction\n"
              "   counts (--roofline), over ms; eager: PyTorch eager ms / tapewise ms; strongest peer: the fastest of\n"
              "   eager, torch.compile and a CUDA graph, its ms / tapewise ms (WINS below 1x)\n\n");
  if (!rows.empty()) print_rows(rows, have_compare);

  bool noted = false;
  for (const Row& r : rows) {
    if (!r.torch_bytes) continue;
    if (!noted) std::printf("\nadd/sub backward (PyTorch hands g through; tapewise returns fresh gradient buffers):\n");
    noted = true;
    std::printf("  %-28s tapewise %.4f ms moving %s, PyTorch %s ms moving %s, ratio %s\n", key(r).c_str(), r.ms,
                mib(r.bytes).c_str(), opt_num("%.4f", r.torch_ms).c_str(), mib(*r.torch_bytes).c_str(),
                r.ratio ? num("%.2fx", *r.ratio).c_str() : "-");
  }
  print_chains(chains, meta.value("chain_gradients", "leaf") == "all");
  if (const json p = meta.value("compiled_pieces", json()); !chains.empty() && p.is_object())
    std::printf("\ntape programs: %lld pieces compiled (%.0f ms), %lld failed; launches %lld compiled, interpreted %lld short, "
                "%lld uneven, %lld irregular, %lld failed; host %.1f us a compiled launch (%.1f in the launch call)%s%s\n",
                p.value("compiled", 0LL), p.value("compile_ms", 0.0), p.value("failed", 0LL), p.value("launches", 0LL),
                p.value("interpreted_short", 0LL), p.value("interpreted_uneven", 0LL), p.value("interpreted_irregular", 0LL),
                p.value("interpreted_failed", 0LL),
                p.value("launch_host_us", 0.0) / std::max(1.0, p.value("launches", 0.0)),
                p.value("driver_launch_us", 0.0) / std::max(1.0, p.value("launches", 0.0)),
                p.value("last_error", std::string()).empty() ? "" : "; last error: ",
                p.value("last_error", std::string()).c_str());

  const json s = summary_json(rows, chains);
  std::printf("\nsummary: %d PASS, %d MISS of %d judged (2^26 rows, the unary chain at 2^12)%s; output checks: %s\n",
              s.value("pass", 0), s.value("miss", 0), s.value("judged", 0),
              have_torch ? "" : " [no PyTorch JSON: ratios not judged]",
              s["check_failures"].empty() ? "all ok" : "FAILURES");
  for (const json& m : s["misses"]) std::printf("  MISS %s\n", m.get<std::string>().c_str());
  for (const json& m : s["peer_wins"]) std::printf("  PEER WINS %s\n", m.get<std::string>().c_str());
  for (const json& m : s["check_failures"]) std::printf("  CHECK %s\n", m.get<std::string>().c_str());
  std::fflush(stdout);
}

json rows_json(const std::vector<Row>& rows) {
  json list = json::array();
  for (const Row& r : rows) {
    json j = {{"op", r.op}, {"dtype", r.dtype}, {"log2n", r.log2n}, {"n", std::int64_t{1} << r.log2n},
              {"dir", r.dir}, {"shape", r.shape.empty() ? "default" : r.shape}, {"ms", r.ms}, {"bytes", r.bytes},
              {"gbps", r.gbps}, {"copy_ms", r.copy_ms}, {"frac_copy", r.frac_copy}};
    j["compute_ms"] = opt_json(r.compute_ms);
    j["roofline_ms"] = r.roofline_ms;
    j["frac_roofline"] = r.frac_roofline;
    j["torch_ms"] = opt_json(r.torch_ms);
    j["ratio"] = opt_json(r.ratio);
    j["compile_ms"] = opt_json(r.compile_ms);
    j["graph_ms"] = opt_json(r.graph_ms);
    j["peer"] = r.peer ? json{{"name", r.peer->name}, {"ms", r.peer->ms}, {"ratio", r.peer->ms / r.ms}} : json();
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
  json j = {{"shape", c.shape}, {"nodes", c.nodes}, {"leaves", c.leaves}, {"log2n", c.log2n}, {"n", c.n},
            {"dtype", dtype_short(c.dtype)}, {"ops", c.ops}, {"warmup", c.warmup}, {"runs", c.runs},
            {"calls", c.calls}, {"us_per_node", c.us_per_node}, {"us_per_node_calls", c.us_per_node_calls},
            {"record_host_us_per_node", c.record_host_us_per_node},
            {"backward_host_us_per_node", c.backward_host_us_per_node},
            {"teardown_host_us_per_node", c.teardown_host_us_per_node}};
  j["device_us_per_node"] = opt_json(c.device_us_per_node);
  j["eager_us_per_node"] = opt_json(c.eager_us_per_node);
  j["graph_us_per_node"] = opt_json(c.graph_us_per_node);
  j["compile_us_per_node"] = opt_json(c.compile_us_per_node);
  j["compile_first_call_s"] = opt_json(c.compile_first_call_s);
  j["peer"] = c.peer ? json{{"name", c.peer->name}, {"us_per_node", c.peer->ms}} : json();
  j["speedup_over_peer"] = opt_json(c.speedup);
  j["target"] = c.target;
  j["verdict"] = c.verdict;
  return j;
}

json summary_json(const std::vector<Row>& rows, const std::vector<ChainResult>& chains) {
  int pass = 0, miss = 0;
  json misses = json::array(), failures = json::array(), wins = json::array();
  for (const Row& r : rows) {
    if (r.verdict == "PASS") ++pass;
    if (r.verdict == "MISS") {
      ++miss;
      misses.push_back(key(r) + ": " + num("%.1f%% copy, ", 100.0 * r.frac_copy) + num("%.1f%% roofline", 100.0 * r.frac_roofline) +
                       (r.ratio ? num(", %.2fx eager", *r.ratio) : std::string()) + " (target " + r.target + ")");
    }
    if (r.peer && r.peer->ms < r.ms && r.log2n == 26) wins.push_back(key(r) + ": " + peer_text(r.peer, r.ms));
    if (r.check != "ok") failures.push_back(key(r) + ": " + r.check);
  }
  for (const ChainResult& c : chains) {
    if (c.verdict == "PASS") ++pass;
    if (c.verdict == "MISS") {
      ++miss;
      misses.push_back(chain_key(c) + ": " + num("%.3f us/node", c.us_per_node) + " (target " + c.target + ")");
    }
    if (c.peer && c.peer->ms < c.us_per_node)
      wins.push_back(chain_key(c) + ": " + peer_text(c.peer, c.us_per_node));
  }
  return {{"judged", pass + miss}, {"pass", pass}, {"miss", miss}, {"misses", misses}, {"peer_wins", wins},
          {"check_failures", failures}};
}

}  // namespace tapewise::bench
