// prove/prover.cpp — the prover: extraction (forms.cpp), normalisation by hash-consing, lemmas for
// the subterms that differ (sent to the solver process, prove/solver.py), composition by
// congruence, and replay of refutations on the real kernels.
#include "sym.hpp"

#include "prover.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "../conform/library/files.hpp"
#include "eval.hpp"
#include "forms.hpp"
#include "frameworks.hpp"

namespace tapewise::prove {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Sort sort_of_dtype(DType d) {
  switch (d) {
    case DType::float32: return Sort::f32;
    case DType::float64: return Sort::f64;
    case DType::bfloat16: return Sort::bf16;
    case DType::float16: return Sort::f16;
  }
  return Sort::f64;
}

std::string hex_bits(std::uint64_t bits, Sort s) {
  std::ostringstream o;
  o << "0x" << std::hex << std::setfill('0') << std::setw(sort_width(s) / 4) << bits;
  return o.str();
}
// The shortest decimal digits that name every value of the sort.
int digits_of(Sort s) { return s == Sort::f64 ? 17 : s == Sort::f32 ? 9 : 5; }
std::string describe_bits(std::uint64_t bits, Sort s) {
  std::ostringstream o;
  o << hex_bits(bits, s) << " (" << std::setprecision(digits_of(s)) << sort_value(s, bits) << ")";
  return o.str();
}
// v rounded to the dtype, as its bits.
std::uint64_t bits_in(DType d, double v) {
  switch (d) {
    case DType::float32: return bits_of(static_cast<float>(v));
    case DType::float64: return bits_of(v);
    case DType::bfloat16: return bfloat16(v).bits;
    case DType::float16: return float16(v).bits;
  }
  return 0;
}
bool agree_up_to_nan(std::uint64_t a, std::uint64_t b, DType d) {
  if (a == b) return true;
  const Sort s = sort_of_dtype(d);
  return std::isnan(sort_value(s, a)) && std::isnan(sort_value(s, b));
}

// --- the solver process -------------------------------------------------------------------------

class Solver {
 public:
  Solver(std::string python, std::string script) : python_(std::move(python)), script_(std::move(script)) {}
  ~Solver() { stop(); }

  // One query; the answer's JSON, or an {"result": "error"} one with the reason. An answer must come
  // within the query's own time limit and a grace period, and must name the query it answers: a
  // solver that stops answering is stopped, and one that answers another query is not believed.
  json ask(const json& query) {
    if (!start()) return error(reason_);
    const std::string line = query.dump() + "\n";
    if (!write_all(line)) {
      stop();
      return error(reason_);
    }
    const double limit_s = query.value("timeout_ms", std::int64_t{0}) / 1000.0;
    const double wait_s = limit_s + std::max(kGraceSeconds, limit_s);
    std::string answer;
    switch (read_line(wait_s, &answer)) {
      case Read::line: break;
      case Read::timeout: {
        std::ostringstream why;
        why << "the solver did not answer within " << wait_s << " s (the query's limit " << limit_s
            << " s, and as long again, at least " << kGraceSeconds << " s); it was stopped";
        reason_ = why.str();
        stop();
        return error(reason_);
      }
      case Read::ended:
        stop();
        return error(reason_);
    }
    json a = json::parse(answer, nullptr, false);
    if (a.is_discarded() || !a.is_object()) return error("unreadable answer: " + answer.substr(0, 200));
    const json id = a.value("id", json());
    if (id == -1) {  // the solver could not start (no bitwuzla)
      reason_ = a.value("reason", "the solver failed");
      stop();
      return error(reason_);
    }
    if (id != query["id"]) {
      // Its answers and our queries no longer pair up: stopped, and every later query says why.
      reason_ = "the solver answered query " + id.dump() + ", not query " + query["id"].dump() + "; not believed";
      stop();
      return error(reason_);
    }
    return a;
  }

 private:
  static constexpr double kGraceSeconds = 5;
  enum class Read { line, timeout, ended };
  static json error(const std::string& reason) { return json{{"result", "error"}, {"reason", reason}}; }

  bool write_all(const std::string& text) {
    for (std::size_t done = 0; done < text.size();) {
      const ssize_t n = ::write(to_, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }
  // One line from the solver, waiting at most `wait_s` seconds for it.
  Read read_line(double wait_s, std::string* line) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(wait_s);
    while (true) {
      if (const auto eol = pending_.find('\n'); eol != std::string::npos) {
        *line = pending_.substr(0, eol);
        pending_.erase(0, eol + 1);
        return Read::line;
      }
      const double left_ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
      if (left_ms <= 0) return Read::timeout;
      pollfd fd{from_, POLLIN, 0};
      const int ready = ::poll(&fd, 1, static_cast<int>(std::min(left_ms + 1, 3.6e6)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) continue;  // the deadline decides, at the loop's head
      char buffer[4096];
      const ssize_t n = ::read(from_, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Read::ended;
      pending_.append(buffer, static_cast<std::size_t>(n));
    }
  }
  bool start() {
    if (pid_ > 0) return true;
    if (dead_) return false;
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) {
      reason_ = "pipe failed";
      dead_ = true;
      return false;
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
      ::execlp(python_.c_str(), python_.c_str(), script_.c_str(), static_cast<char*>(nullptr));
      std::fprintf(stderr, "prove: cannot run %s: %s\n", python_.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    if (pid_ < 0) {
      ::close(in[1]);
      ::close(out[0]);
      reason_ = "fork failed";
      dead_ = true;
      return false;
    }
    to_ = in[1];
    from_ = out[0];
    ::signal(SIGPIPE, SIG_IGN);
    return true;
  }
  // Ends the solver process (killed: it may be busy, or hung) and refuses every later query with the
  // reason it ended.
  void stop() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    dead_ = true;
    pending_.clear();
    if (reason_.empty()) reason_ = "the solver process ended (" + python_ + " " + script_ + ")";
  }
  std::string python_, script_, reason_, pending_;
  pid_t pid_ = -1;
  bool dead_ = false;
  int to_ = -1, from_ = -1;
};

// --- queries ------------------------------------------------------------------------------------

// The DAG below u and v as a query. `abstract`: every node both reach (other than variables and
// constants) becomes a fresh variable of its sort, cutting the shared context out of the lemma; a
// lemma proven so is proven outright (the abstraction only adds behaviours).
json make_query(NodeId u, NodeId v, bool abstract, int id, double timeout_s, std::size_t* size) {
  const Graph& g = graph();
  auto reach = [&](NodeId root) {
    std::set<NodeId> seen;
    std::vector<NodeId> stack{root};
    while (!stack.empty()) {
      const NodeId n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      const Node& node = g[n];
      const NodeId ch[3] = {node.a, node.b, node.c};
      for (int i = 0; i < kind_arity(node.k); ++i) stack.push_back(ch[i]);
    }
    return seen;
  };
  std::set<NodeId> shared;
  if (abstract) {
    const std::set<NodeId> ru = reach(u), rv = reach(v);
    for (NodeId n : ru)
      if (rv.count(n) && g[n].k != NodeKind::var && g[n].k != NodeKind::cst) shared.insert(n);
  }
  std::map<NodeId, int> local;
  json nodes = json::array();
  // Post-order from both roots, stopping at abstracted nodes.
  std::vector<std::pair<NodeId, bool>> stack{{v, false}, {u, false}};
  while (!stack.empty()) {
    auto [n, expanded] = stack.back();
    stack.pop_back();
    if (local.count(n)) continue;
    const Node& node = g[n];
    const bool cut = shared.count(n) > 0;
    const NodeId ch[3] = {node.a, node.b, node.c};
    if (!expanded && !cut) {
      stack.push_back({n, true});
      for (int i = kind_arity(node.k) - 1; i >= 0; --i)
        if (!local.count(ch[i])) stack.push_back({ch[i], false});
      continue;
    }
    json children = json::array();
    std::string kind = kind_name(node.k), name;
    if (cut) {
      kind = "var";
      name = "w" + std::to_string(n);
    } else {
      for (int i = 0; i < kind_arity(node.k); ++i) children.push_back(local.at(ch[i]));
      if (node.k == NodeKind::var) name = g.name(n);
    }
    local[n] = static_cast<int>(nodes.size());
    nodes.push_back(json::array({kind, sort_name(node.s), children, std::to_string(node.k == NodeKind::cst ? node.bits : 0), name}));
  }
  if (size) *size = nodes.size();
  return json{{"id", id}, {"nodes", nodes}, {"goal", json::array({local.at(u), local.at(v)})},
              // At least 1 ms: Bitwuzla reads 0 as no limit at all.
              {"timeout_ms", std::max<std::int64_t>(1, static_cast<std::int64_t>(timeout_s * 1000))}};
}

// --- the engine ---------------------------------------------------------------------------------

enum class Status { same, congruent, proven, refuted, unknown, error };
const char* status_name(Status s) {
  static const char* n[] = {"same", "congruent", "proven", "refuted", "unknown", "error"};
  return n[static_cast<int>(s)];
}
bool holds(Status s) { return s == Status::same || s == Status::congruent || s == Status::proven; }

struct Lemma {
  std::string lhs, rhs;  // short descriptions
  std::string result;
  double seconds = 0;
  std::size_t size = 0;
  bool abstracted = false;
  std::string reason;  // the solver's, when it failed
};

struct Verdict {
  Status status = Status::same;
  std::vector<Lemma> lemmas;
  json model;  // the root query's model when refuted
  std::string reason;
};

std::string show(NodeId n, int depth = 3) {
  const Graph& g = graph();
  const Node& node = g[n];
  if (node.k == NodeKind::var) return g.name(n);
  if (node.k == NodeKind::cst) {
    std::ostringstream o;
    o << std::setprecision(digits_of(node.s)) << sort_value(node.s, node.bits);
    return o.str();
  }
  if (depth == 0) return "…";
  std::string s = std::string(kind_name(node.k)) + "(";
  const NodeId ch[3] = {node.a, node.b, node.c};
  for (int i = 0; i < kind_arity(node.k); ++i) s += (i ? ", " : "") + show(ch[i], depth - 1);
  return s + ")";
}

class Engine {
 public:
  Engine(Solver& solver, double timeout_s) : solver_(solver), timeout_s_(timeout_s) {}

  // u (a form's output) against v (the staged form's): hash-consed identity, else congruence over
  // children proven equal, else a lemma for the pair (first with the context both share cut into
  // free variables, then whole), each with a short time limit. A pair that does not hold keeps the
  // first model a lemma gave (seed), from which the caller looks for a real counterexample before
  // asking the solver about the whole output (root).
  Verdict prove(NodeId u, NodeId v) {
    Verdict verdict;
    lemmas_ = &verdict.lemmas;
    seed_ = &verdict.model;
    verdict.status = match(u, v);
    return verdict;
  }
  // The whole output pair, with the full time limit: it may still agree (a difference masked higher
  // up), or the model says where it does not.
  void root(NodeId u, NodeId v, Verdict& verdict) {
    lemmas_ = &verdict.lemmas;
    json answer;
    verdict.status = solve(u, v, false, &answer, timeout_s_);
    verdict.model = verdict.status == Status::refuted ? answer.value("model", json::object()) : json::object();
    if (verdict.status == Status::error || verdict.status == Status::unknown) verdict.reason = answer.value("reason", "");
  }
  double solver_seconds() const { return solver_seconds_; }

 private:
  Status match(NodeId u, NodeId v) {
    if (u == v) return Status::same;
    const auto key = std::minmax(u, v);
    if (auto it = memo_.find(key); it != memo_.end()) {
      if (!holds(it->second) && seed_->empty())
        if (auto seed = seeds_.find(key); seed != seeds_.end()) *seed_ = seed->second;
      return it->second;
    }
    const Graph& g = graph();
    const Node &a = g[u], &b = g[v];
    Status s = Status::refuted;
    const bool same_shape = a.k == b.k && a.s == b.s && a.k != NodeKind::var && a.k != NodeKind::cst;
    bool child_failed = false;
    if (same_shape) {
      const NodeId ca[3] = {a.a, a.b, a.c}, cb[3] = {b.a, b.b, b.c};
      bool all = true;
      for (int i = 0; i < kind_arity(a.k) && all; ++i) all = holds(match(ca[i], cb[i]));
      if (all) s = Status::congruent;  // every operation respects AgreeUpToNaN (sym.hpp: signbit)
      child_failed = !all;
    }
    json model;
    if (s != Status::congruent) {
      if (a.s == Sort::b || b.s == Sort::b) {
        s = Status::refuted;  // predicates are compared through the values they select
      } else {
        // A pair whose operands already differ gets the quick abstracted lemma only (it may mask the
        // difference); the whole query is left to the root.
        const double limit = std::min(timeout_s_, kLemmaSeconds);
        json answer;
        s = solve(u, v, true, &answer, limit);
        model = answer.value("model", json::object());
        if (s != Status::proven && s != Status::error && !child_failed) {
          s = solve(u, v, false, &answer, limit);
          if (s == Status::refuted) model = answer.value("model", json::object());
        }
      }
    }
    memo_[key] = s;
    if (!holds(s)) {
      if (!model.empty()) seeds_[key] = model;
      if (seed_->empty())
        if (auto it = seeds_.find(key); it != seeds_.end()) *seed_ = it->second;
    }
    return s;
  }
  static constexpr double kLemmaSeconds = 5;

  Status solve(NodeId u, NodeId v, bool abstract, json* answer, double limit_s) {
    std::size_t size = 0;
    const json q = make_query(u, v, abstract, ++queries_, limit_s, &size);
    const auto start = Clock::now();
    if (std::getenv("TAPEWISE_PROVE_DEBUG")) std::cerr << "lemma " << show(u, 6) << "\n   == " << show(v, 6) << "\n";
    *answer = solver_.ask(q);
    const double t = seconds_since(start);
    solver_seconds_ += t;
    const std::string r = answer->value("result", "error");
    lemmas_->push_back({show(u), show(v), r, answer->value("seconds", t), size, abstract, answer->value("reason", "")});
    if (std::getenv("TAPEWISE_PROVE_DEBUG")) std::cerr << "   " << answer->dump() << " (" << size << " nodes)\n";
    if (r == "unsat") return Status::proven;
    if (r == "sat") return Status::refuted;
    if (r == "unknown") return Status::unknown;
    return Status::error;
  }

  Solver& solver_;
  double timeout_s_;
  std::map<std::pair<NodeId, NodeId>, Status> memo_;
  std::map<std::pair<NodeId, NodeId>, json> seeds_;  // a model of each pair that did not hold
  std::vector<Lemma>* lemmas_ = nullptr;
  json* seed_ = nullptr;
  int queries_ = 0;
  double solver_seconds_ = 0;
};

// --- replays ------------------------------------------------------------------------------------

struct Replay {
  bool ran = false, differ = false;
  std::string how;  // "the solver's model" or "a search near it"
  Bits inputs, lhs, rhs;
  std::string error;
};

Bits model_inputs(const json& model) {
  Bits b;
  for (auto it = model.begin(); it != model.end(); ++it)
    if (it.key().rfind("w", 0) != 0) b[it.key()] = std::stoull(it.value().get<std::string>());
  return b;
}

bool outputs_differ(const Bits& l, const Bits& r, DType d) {
  for (const auto& [name, bits] : l) {
    auto it = r.find(name);
    if (it != r.end() && !agree_up_to_nan(bits, it->second, d)) return true;
  }
  return false;
}

// Runs the claim's two forms on `backend` at the solver's inputs; where the real libm does not give
// the values the solver chose for its uninterpreted functions and the paths agree, tries nearby
// inputs and random bit patterns until the paths' bits differ (or gives up).
Replay replay_claim(const std::shared_ptr<Backend>& backend, const Claim& c, Op op, DType d, const json& model,
                    int attempts) {
  Replay r;
  r.inputs = model_inputs(model);
  // Every input of the node gets a value (a model names only the variables its query had).
  const int arity = op_info(op).arity;
  for (const char* name : {arity == 1 ? "x" : "a", arity == 1 ? "g" : "b", "g"}) r.inputs.emplace(name, 0);
  const ScalarSets& sets = op_info(op).run_scalars;
  for (int k = 0; k < op_info(op).scalar_count(); ++k)
    r.inputs.emplace(k == 0 ? "s0" : "s1", std::bit_cast<std::uint64_t>(k == 0 ? sets[0].s0 : sets[0].s1));
  auto run_both = [&](const Bits& in, Bits& lhs, Bits& rhs) -> bool {
    auto a = replay(backend, c.lhs, op, d, in);
    auto b = replay(backend, c.rhs, op, d, in);
    if (!a || !b) {
      r.error = !a ? a.error().message : b.error().message;
      return false;
    }
    lhs = *a;
    rhs = *b;
    return true;
  };
  if (!run_both(r.inputs, r.lhs, r.rhs)) return r;
  r.ran = true;
  r.how = "the solver's model";
  if ((r.differ = outputs_differ(r.lhs, r.rhs, d))) return r;
  std::mt19937_64 rng(0x7a9e5eedull);
  const int width = sort_width(sort_of_dtype(d));
  const std::int64_t near = width == 16 ? 100 : 1000;  // ulps: 100 of a 16-bit format span a binade
  for (int attempt = 0; attempt < attempts; ++attempt) {
    Bits in = r.inputs;
    for (auto& [name, bits] : in) {
      if (name == "s0" || name == "s1") continue;
      const int kind = (attempt + static_cast<int>(rng() % 2)) % 4;
      if (kind == 0 || kind == 1) {
        const std::int64_t step = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(2 * near + 1)) - near;
        bits = static_cast<std::uint64_t>(static_cast<std::int64_t>(bits) + step);
      } else if (kind == 2) {
        bits = rng();
      } else {  // a value of moderate size, either sign
        const double v = std::ldexp(static_cast<double>(rng() % 1000000) / 1e6 + 1.0, static_cast<int>(rng() % 17) - 8) *
                         ((rng() & 1) ? -1.0 : 1.0);
        bits = bits_in(d, v);
      }
      if (width < 64) bits &= (std::uint64_t{1} << width) - 1;
    }
    Bits lhs, rhs;
    if (!run_both(in, lhs, rhs)) return r;
    if (outputs_differ(lhs, rhs, d)) {
      r.inputs = in;
      r.lhs = lhs;
      r.rhs = rhs;
      r.differ = true;
      r.how = "a search from the solver's model (its libm values are not the real ones)";
      return r;
    }
  }
  r.how = "the solver's model and " + std::to_string(attempts) + " nearby and random inputs: the real kernels agree there";
  return r;
}

// --- the model check ----------------------------------------------------------------------------

// Every scalar set the op table gives the node (run, graded, edge), or one empty set.
std::vector<Scalars> scalar_sets(Op op) {
  std::vector<Scalars> sets;
  for (const ScalarSets* column : {&op_info(op).run_scalars, &op_info(op).graded_scalars, &op_info(op).edge_scalars})
    for (const Scalars& s : *column) sets.push_back(s);
  if (sets.empty()) sets.push_back(Scalars{});
  return sets;
}

// Input bits for sample i: special values, random bit patterns and values of moderate size.
Bits sample_inputs(Op op, DType d, int i, std::mt19937_64& rng) {
  static const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.5, 1e-3, 1e30, 1e-40, INFINITY, -INFINITY, NAN};
  const int width = sort_width(sort_of_dtype(d));
  Bits in;
  const std::vector<const char*> names =
      op_info(op).arity == 1 ? std::vector<const char*>{"x", "g"} : std::vector<const char*>{"a", "b", "g"};
  for (const char* name : names) {
    const std::uint64_t pick = rng() % 3;
    if (pick == 0) in[name] = bits_in(d, specials[rng() % std::size(specials)]);
    else if (pick == 1) in[name] = width == 64 ? rng() : rng() & ((std::uint64_t{1} << width) - 1);
    else in[name] = bits_in(d, std::ldexp(static_cast<double>(rng() % 1000000) / 1e6 + 1.0, static_cast<int>(rng() % 13) - 6) *
                                    ((rng() & 1) ? -1.0 : 1.0));
  }
  const std::vector<Scalars> sets = scalar_sets(op);
  const Scalars& s = sets[static_cast<std::size_t>(i) % sets.size()];
  if (op_info(op).scalar_count() > 0) in["s0"] = std::bit_cast<std::uint64_t>(s.s0);
  if (op_info(op).scalar_count() > 1) in["s1"] = std::bit_cast<std::uint64_t>(s.s1);
  return in;
}

constexpr int kModelSamples = 256;

// The extracted graphs compute what the code computes: each form's outputs, evaluated on the host
// (eval.hpp, exact mode's functions, as the CPU backend's) at sample inputs, equal the CPU backend's
// bits from the same form, up to NaN. Not a proof; it catches a symbolic type recording other operations than the
// code runs (sym_kernels.hpp's sigmoid, say, after the kernels' 16-bit branch changed). "" or what
// differed.
std::string check_model(const Extracted& ex, Op op, DType d, const std::shared_ptr<Backend>& cpu, int samples) {
  std::mt19937_64 rng(0x6d6f64656cull + static_cast<std::uint64_t>(op) * 8 + static_cast<std::uint64_t>(d));
  const Sort sort = sort_of_dtype(d);
  for (int i = 0; i < samples; ++i) {
    const Bits in = sample_inputs(op, d, i, rng);
    std::map<std::string, double> values;
    for (const auto& [name, bits] : in)
      values[name] = name[0] == 's' ? std::bit_cast<double>(bits) : sort_value(sort, bits);
    std::unordered_map<NodeId, double> memo;
    std::map<std::string, Bits> real;  // by form, without the lanes suffix
    for (const auto& [form_name, outputs] : ex) {
      const std::string base = form_name.substr(0, form_name.find('@'));
      if (!real.count(base)) {
        auto r = replay(cpu, base, op, d, in);
        if (!r) return base + " on the CPU backend: " + r.error().message;
        real[base] = *r;
      }
      for (const auto& [output, node] : outputs) {
        const std::uint64_t model = bits_in(d, evaluate(node, values, memo)), code = real[base].at(output);
        if (agree_up_to_nan(model, code, d)) continue;
        std::ostringstream o;
        o << form_name << " " << output << " at";
        for (const auto& [name, bits] : in) o << " " << name << "=" << hex_bits(bits, name[0] == 's' ? Sort::f64 : sort);
        o << ": the graph gives " << hex_bits(model, sort) << ", the code " << hex_bits(code, sort);
        return o.str();
      }
    }
  }
  return "";
}

// The node's graphs (forms.hpp: extract), checked against the code at sample inputs (check_model)
// before anything is proved of them; a model error where either fails. *check_s: the check's time.
Result<Extracted> extract_checked(Op op, DType d, const std::shared_ptr<Backend>& cpu, std::size_t* paths,
                                  double* check_s) {
  try {
    Result<Extracted> extracted = extract(op, d, 0, paths);
    if (!extracted) return extracted;
    const auto t = Clock::now();
    const std::string differ = check_model(*extracted, op, d, cpu, kModelSamples);
    *check_s = seconds_since(t);
    if (!differ.empty()) return fail(ErrorCode::InvalidArgument, "model check: " + differ);
    return extracted;
  } catch (const ModelError& e) {
    return fail(ErrorCode::InvalidArgument, std::string("model: ") + e.what());
  }
}

// --- the command --------------------------------------------------------------------------------

std::string find_solver(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto p = exe.parent_path().parent_path() / "share" / "tapewise" / "prove_solver.py";
    if (std::filesystem::is_regular_file(p, ec)) return p.string();
  }
  return "prove/solver.py";
}

std::shared_ptr<Backend> replay_backend(const std::string& choice, std::string* note) {
  if (choice == "cuda" || (choice == "auto" && cuda_available())) {
    auto be = make_cuda_backend();
    if (be) return *be;
    *note = be.error().message;
    if (choice == "cuda") return nullptr;
  }
  return make_cpu_backend();
}

struct ClaimResult {
  const Claim* claim;
  std::string output;
  Verdict verdict;
  double seconds = 0;
  Replay replay;
};

std::string column_status(const std::vector<ClaimResult>& rs, const std::string& column, double* seconds,
                          std::size_t* lemmas, bool* any) {
  std::string worst = "proven";
  *any = false;
  for (const ClaimResult& r : rs) {
    if (r.claim->column != column) continue;
    *any = true;
    *seconds += r.seconds;
    *lemmas += r.verdict.lemmas.size();
    if (!holds(r.verdict.status)) worst = status_name(r.verdict.status);
  }
  return worst;
}

}  // namespace

int prove_command(const ProveOptions& o) {
  // Bitwuzla reads a limit of 0 ms as none at all: below 1 ms, a query could run forever.
  if (!(std::isfinite(o.timeout_s) && o.timeout_s >= 0.001 && o.timeout_s <= 3600)) {
    std::cerr << o.program_name << ": --timeout: " << o.timeout_s
              << " is not from 0.001 (1 ms) to 3600 seconds\n";
    return 2;
  }
  if (o.frameworks && std::none_of(o.dtypes.begin(), o.dtypes.end(),
                                   [](DType d) { return d == DType::float32 || d == DType::float64; })) {
    std::cerr << o.program_name << ": --frameworks holds PyTorch's formulas in float32 and float64; "
              << "--dtype names neither, so there would be nothing to audit\n";
    return 2;
  }
  if (!o.json_path.empty())
    if (auto ok = conform::check_output(o.json_path, "--json"); !ok) {
      std::cerr << o.program_name << ": " << ok.error().message << "\n";
      return 2;
    }
  const auto start = Clock::now();
  std::string python = o.python;
  if (python.empty()) {
    const char* env = std::getenv("TAPEWISE_PYTHON");
    python = env && *env ? env : "python3";
  }
  const std::string solver_script = find_solver(o.solver);
  if (std::error_code ec; !std::filesystem::is_regular_file(solver_script, ec)) {
    std::cerr << o.program_name << ": --solver: " << solver_script << " is not a file\n";
    return 2;
  }
  Solver solver(python, solver_script);
  std::string backend_note;
  auto backend = replay_backend(o.backend, &backend_note);
  if (!backend) {
    std::cerr << o.program_name << ": --backend cuda: " << backend_note << "\n";
    return 2;
  }
  json report = {{"schema", "tapewise-conform.prove/1"},
                 {"replay_backend", backend->describe()},
                 {"solver", "bitwuzla (PyPI), via " + python + " " + solver_script},
                 {"equality", "AgreeUpToNaN: equal bits, or both NaN"},
                 {"nodes", json::array()}};
  const std::shared_ptr<Backend> cpu = make_cpu_backend();  // the model check's: exact mode's functions, as eval.hpp's
  // A refuted claim is a violation (exit 1); one the solver gave no answer for (unknown, an error, no
  // solver at all) is no verdict (exit 2), never a pass and never a violation.
  int proven = 0, refuted = 0, undecided = 0, model_errors = 0;
  std::string first_reason;
  std::cout << std::left << std::setw(9) << "node" << std::setw(10) << "dtype" << std::setw(11) << "forward"
            << std::setw(11) << "vjp" << std::setw(11) << "tape" << std::setw(11) << "repeated" << std::setw(10)
            << "time" << "lemmas\n";
  for (Op op : o.ops) {
    for (DType d : o.dtypes) {
      const auto t0 = Clock::now();
      graph().clear();
      std::size_t paths = 0;
      json node = {{"op", op_info(op).name}, {"dtype", dtype_name(d)}, {"claims", json::array()}};
      std::vector<ClaimResult> results;
      double check_s = 0;
      Result<Extracted> extracted = extract_checked(op, d, cpu, &paths, &check_s);
      const double extract_s = seconds_since(t0) - check_s;
      if (!extracted) {
        ++model_errors;
        node["error"] = extracted.error().message;
        std::cout << std::setw(9) << op_info(op).name << std::setw(10) << dtype_name(d) << "ERROR "
                  << extracted.error().message << "\n";
        report["nodes"].push_back(node);
        continue;
      }
      Engine engine(solver, o.timeout_s);
      for (const Claim& c : claims()) {
        auto l = extracted->find(c.lhs), r = extracted->find(c.rhs);
        if (l == extracted->end() || r == extracted->end()) continue;
        for (const auto& [name, u] : l->second) {
          auto it = r->second.find(name);
          if (it == r->second.end()) continue;
          const auto tc = Clock::now();
          ClaimResult cr{&c, name, engine.prove(u, it->second), 0, {}};
          if (!holds(cr.verdict.status)) {
            // First the real kernels, from a lemma's model; then, if they agree there, the solver on
            // the whole output.
            cr.replay = replay_claim(backend, c, op, d, cr.verdict.model, 4000);
            if (cr.replay.differ) {
              cr.verdict.status = Status::refuted;
            } else {
              engine.root(u, it->second, cr.verdict);
              if (cr.verdict.status == Status::refuted)
                cr.replay = replay_claim(backend, c, op, d, cr.verdict.model, 20000);
            }
          }
          cr.seconds = seconds_since(tc);
          if (holds(cr.verdict.status)) {
            ++proven;
          } else if (cr.verdict.status == Status::refuted) {
            ++refuted;
          } else {
            ++undecided;
            if (first_reason.empty()) first_reason = cr.verdict.reason.empty() ? status_name(cr.verdict.status) : cr.verdict.reason;
          }
          results.push_back(std::move(cr));
        }
      }
      const double total_s = seconds_since(t0);
      std::size_t lemma_count = 0;
      std::cout << std::setw(9) << op_info(op).name << std::setw(10) << dtype_name(d);
      json columns = json::object();
      for (const char* column : {"forward", "vjp", "tape", "repeated"}) {
        double s = 0;
        std::size_t lemmas = 0;
        bool any = false;
        const std::string st = column_status(results, column, &s, &lemmas, &any);
        lemma_count += lemmas;
        std::cout << std::setw(11) << (any ? st : "-");
        if (any) columns[column] = {{"status", st}, {"seconds", s}, {"lemmas", lemmas}};
      }
      std::ostringstream t;
      t << std::fixed << std::setprecision(2) << total_s << " s";
      std::cout << std::setw(10) << t.str() << lemma_count << "\n";
      for (const ClaimResult& cr : results) {
        json j = {{"column", cr.claim->column},  {"lhs", cr.claim->lhs},
                  {"rhs", cr.claim->rhs},        {"output", cr.output},
                  {"status", status_name(cr.verdict.status)}, {"seconds", cr.seconds},
                  {"lemmas", json::array()}};
        for (const Lemma& lm : cr.verdict.lemmas) {
          j["lemmas"].push_back({{"lhs", lm.lhs}, {"rhs", lm.rhs}, {"result", lm.result}, {"seconds", lm.seconds},
                                 {"nodes", lm.size}, {"abstracted", lm.abstracted}});
          if (!lm.reason.empty()) j["lemmas"].back()["reason"] = lm.reason;
        }
        if (!cr.verdict.reason.empty()) j["reason"] = cr.verdict.reason;
        if (cr.verdict.status == Status::refuted) {
          const Sort s = sort_of_dtype(d);
          json inputs = json::object(), lhs = json::object(), rhs = json::object();
          for (const auto& [name, bits] : cr.replay.inputs)
            inputs[name] = (name == "s0" || name == "s1") ? hex_bits(bits, Sort::f64) : hex_bits(bits, s);
          for (const auto& [name, bits] : cr.replay.lhs) lhs[name] = hex_bits(bits, s);
          for (const auto& [name, bits] : cr.replay.rhs) rhs[name] = hex_bits(bits, s);
          j["counterexample"] = {{"inputs", inputs}, {"replayed", cr.replay.ran}, {"differ", cr.replay.differ},
                                 {"found_by", cr.replay.how}, {"backend", backend->describe()},
                                 {cr.claim->lhs, lhs}, {cr.claim->rhs, rhs}};
          if (!cr.replay.error.empty()) j["counterexample"]["error"] = cr.replay.error;
          std::cout << "  REFUTED " << cr.claim->lhs << " != " << cr.claim->rhs << " on " << cr.output << " at";
          for (const auto& [name, bits] : cr.replay.inputs)
            std::cout << " " << name << "="
                      << describe_bits(bits, (name == "s0" || name == "s1") ? Sort::f64 : s);
          std::cout << "\n    replayed on " << backend->describe() << " (" << cr.replay.how << "): ";
          if (!cr.replay.ran) std::cout << "could not run: " << cr.replay.error;
          else {
            auto li = cr.replay.lhs.find(cr.output), ri = cr.replay.rhs.find(cr.output);
            if (li != cr.replay.lhs.end() && ri != cr.replay.rhs.end())
              std::cout << cr.claim->lhs << " " << describe_bits(li->second, s) << ", " << cr.claim->rhs << " "
                        << describe_bits(ri->second, s) << (cr.replay.differ ? " — the real paths differ" : " — the same bits");
          }
          std::cout << "\n";
        } else if (!holds(cr.verdict.status)) {
          std::cout << "  " << status_name(cr.verdict.status) << " " << cr.claim->lhs << " vs " << cr.claim->rhs << " on "
                    << cr.output << (cr.verdict.reason.empty() ? "" : ": " + cr.verdict.reason) << "\n";
        }
        node["claims"].push_back(j);
      }
      node["columns"] = columns;
      node["seconds"] = total_s;
      node["extract_seconds"] = extract_s;
      node["model_check"] = {{"samples", kModelSamples}, {"seconds", check_s}};
      node["paths_explored"] = paths;
      node["graph_nodes"] = graph().size();
      node["lemmas"] = lemma_count;
      report["nodes"].push_back(node);
    }
  }
  if (o.frameworks) {
    json audit = frameworks_audit(o.dtypes, [&](NodeId u, NodeId v, json* out) {
      Engine engine(solver, o.timeout_s);
      const auto t = Clock::now();
      Verdict verdict = engine.prove(u, v);
      if (!holds(verdict.status)) engine.root(u, v, verdict);
      (*out)["status"] = status_name(verdict.status);
      if (verdict.status == Status::unknown || verdict.status == Status::error) {
        ++undecided;  // an audit row without an answer is no verdict either
        if (first_reason.empty()) first_reason = verdict.reason.empty() ? status_name(verdict.status) : verdict.reason;
      }
      (*out)["seconds"] = seconds_since(t);
      (*out)["lemmas"] = verdict.lemmas.size();
      if (verdict.status == Status::refuted) (*out)["model"] = verdict.model;
      return holds(verdict.status);
    });
    report["frameworks"] = audit;
    std::cout << "\nPyTorch ATen backward formulas against the spec's staged VJP:\n";
    for (const json& row : audit) {
      std::cout << "  " << std::left << std::setw(27) << row.value("formula", "") << std::setw(8) << row.value("dtype", "")
                << std::setw(10) << row.value("status", "");
      if (row.contains("random_inputs_differing"))
        std::cout << row["random_inputs_differing"].get<int>() << " of " << row["random_inputs"].get<int>()
                  << " random inputs differ, " << row["special_inputs_differing"].size() << " special";
      if (row.contains("first_random_difference"))
        std::cout << "; first: x=" << row["first_random_difference"]["x"].get<std::string>()
                  << " g=" << row["first_random_difference"]["g"].get<std::string>();
      else if (row.contains("special_inputs_differing") && !row["special_inputs_differing"].empty())
        std::cout << "; first: x=" << row["special_inputs_differing"][0]["x"].get<std::string>()
                  << " g=" << row["special_inputs_differing"][0]["g"].get<std::string>();
      std::cout << "\n";
    }
  }
  const double total = seconds_since(start);
  const int failed = refuted + undecided;
  report["summary"] = {{"claims_proven", proven}, {"claims_not_proven", failed}, {"claims_refuted", refuted},
                       {"without_verdict", undecided}, {"model_errors", model_errors}, {"seconds", total}};
  std::cout << "prove: " << proven << " of " << (proven + failed) << " claims proven";
  if (refuted) std::cout << ", " << refuted << " refuted";
  if (undecided) std::cout << ", " << undecided << " without a verdict";
  if (model_errors) std::cout << ", " << model_errors << " node(s) outside the model";
  std::cout << " (" << std::fixed << std::setprecision(1) << total << " s)\n";
  if (!o.json_path.empty())
    if (auto ok = conform::write_output_text(o.json_path, "--json", report.dump(2) + "\n"); !ok) {
      std::cerr << o.program_name << ": " << ok.error().message << "\n";
      return 2;
    }
  if (refuted) return 1;
  if (undecided) {
    std::cerr << o.program_name << ": no verdict for " << undecided << " claim(s) or audit row(s): " << first_reason << "\n";
    return 2;
  }
  return model_errors ? 2 : 0;
}

}  // namespace tapewise::prove
