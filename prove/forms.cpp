// prove/forms.cpp — the forms (forms.hpp), the symbolic backend that extracts their graphs from
// the library's own code, and the real-backend environment that replays them on given bits.
#include "sym.hpp"  // first: std::signbit's overload for Sym before the kernels' templates

#include "forms.hpp"

#include <cstdlib>
#include <cstring>

#include "backends/engine.hpp"
#include "kernels/dispatch.hpp"
#include "kernels/interpreter.hpp"  // run_steps_at
#include "sym_kernels.hpp"          // after the kernels: Sym16 takes their 16-bit branches

namespace tapewise::prove {
namespace {

// Calls fn.template operator()<T>() with the symbolic T of the dtype.
template <class Fn>
Result<void> with_sym(DType d, Fn&& fn) {
  switch (d) {
    case DType::float32: return fn.template operator()<Sym<float>>();
    case DType::float64: return fn.template operator()<Sym<double>>();
    case DType::bfloat16: return fn.template operator()<SymBF16>();
    case DType::float16: return fn.template operator()<SymF16>();
  }
  return fail(ErrorCode::InvalidArgument, "the prover has no symbolic type for this dtype");
}

// Runs a per-element functor (ForwardFn, VjpFn, PrimFn with a symbolic T) on every element, exploring
// both outcomes of each comparison: each output element becomes the join of all paths.
struct SymRunner {
  std::size_t* paths;
  template <class Fn, class T>
  [[nodiscard]] Result<void> run(const Fn& fn, std::int64_t n, const T* const* in, T* const* out, const char*) {
    for (std::int64_t i = 0; i < n; ++i) {
      Explorer explorer;
      const std::vector<NodeId> joined = explorer.run([&] {
        T x[Fn::nin > 0 ? Fn::nin : 1];
        T y[Fn::nout];
        for (int k = 0; k < Fn::nin; ++k) x[k] = in[k][i];
        fn(x, y);
        std::vector<NodeId> result;
        for (int k = 0; k < Fn::nout; ++k) result.push_back(y[k].node());
        return result;
      });
      for (int k = 0; k < Fn::nout; ++k) out[k][i] = T::of(joined[static_cast<std::size_t>(k)]);
      *paths += explorer.paths_explored();
    }
    return {};
  }
};

class SymbolicBackend final : public detail::Engine {
 public:
  // every_step_runs: the interpreter's variant for pieces whose every step covers every element
  // (compiled pieces, the CPU backend's full groups of lanes), on one lane.
  SymbolicBackend(int lanes, std::size_t* paths, bool every_step_runs = false)
      : lanes_(lanes), every_step_runs_(every_step_runs), paths_(paths) {}
  BackendKind kind() const override { return BackendKind::cpu; }
  // Either mode: exp, log, sin, cos and tanh are uninterpreted here, so what is proven holds in both.
  MathMode math() const override { return MathMode::aten; }
  std::string describe() const override { return "symbolic (prove)"; }

  [[nodiscard]] Result<void> forward(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                     Buffer& out) override {
    return with_sym(out.dtype(), [&]<class T>() -> Result<void> {
      const T* in[2] = {};
      for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = static_cast<const T*>(inputs[i]->data());
      T* o[1] = {static_cast<T*>(out.data())};
      SymRunner runner{paths_};
      return detail::dispatch_forward<T>(runner, op, s, out.numel(), in, o);
    });
  }
  [[nodiscard]] Result<void> vjp_fused(Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                       const Buffer& g, std::span<Buffer* const> grads) override {
    return with_sym(g.dtype(), [&]<class T>() -> Result<void> {
      const T* in[3] = {};
      for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = static_cast<const T*>(inputs[i]->data());
      in[inputs.size()] = static_cast<const T*>(g.data());
      T* o[2] = {};
      for (std::size_t i = 0; i < grads.size(); ++i) o[i] = static_cast<T*>(grads[i]->data());
      SymRunner runner{paths_};
      return detail::dispatch_vjp<T>(runner, op, s, g.numel(), in, o);
    });
  }
  [[nodiscard]] Result<void> prim(Prim p, double c, std::span<const Buffer* const> inputs, Buffer& out) override {
    if (static_cast<int>(inputs.size()) != prim_arity(p))
      return fail(ErrorCode::InvalidArgument, std::string(prim_name(p)) + ": wrong number of inputs");
    return with_sym(out.dtype(), [&]<class T>() -> Result<void> {
      const T* in[3] = {};
      for (std::size_t i = 0; i < inputs.size(); ++i) in[i] = static_cast<const T*>(inputs[i]->data());
      T* o[1] = {static_cast<T*>(out.data())};
      SymRunner runner{paths_};
      return detail::dispatch_prim<T>(runner, p, c, static_cast<int>(inputs.size()), out.numel(), in, o);
    });
  }
  // The interpreter itself (program.hpp: run_steps_at), piece by piece as the real runners cut them,
  // re-executed once per outcome of its comparisons; every slot a step writes becomes the join.
  [[nodiscard]] Result<void> run_sealed_program(const detail::Program& program) override {
    for (std::size_t first = 0; first < program.steps.size();) {
      const detail::Piece piece = detail::piece_at(program, first, detail::kStepsPerLaunch);
      first += static_cast<std::size_t>(piece.count);
      if (piece.numel != 1) return fail(ErrorCode::InvalidArgument, "symbolic programs are one element long");
      auto ok = with_sym(piece.dtype, [&]<class T>() -> Result<void> {
        std::vector<T*> slots;
        for (int k = 0; k < piece.count; ++k)
          for (void* p : piece.steps[k].out)
            if (p && std::find(slots.begin(), slots.end(), static_cast<T*>(p)) == slots.end())
              slots.push_back(static_cast<T*>(p));
        std::vector<T> before;
        for (T* s : slots) before.push_back(*s);
        Explorer explorer;
        const std::vector<NodeId> joined = explorer.run([&] {
          for (std::size_t k = 0; k < slots.size(); ++k) *slots[k] = before[k];
          if (every_step_runs_)
            detail::run_steps_at<T, std::int32_t, 1, true>(piece.steps, piece.count, 0, 128);
          else if (lanes_ == 1)
            detail::run_steps_at<T, std::int32_t, 1>(piece.steps, piece.count, 0, 128);
          else
            detail::run_steps_at<T, std::int64_t, 4>(piece.steps, piece.count, 0, 1);
          std::vector<NodeId> result;
          for (T* s : slots) result.push_back(s->node());
          return result;
        });
        for (std::size_t k = 0; k < slots.size(); ++k) *slots[k] = T::of(joined[k]);
        *paths_ += explorer.paths_explored();
        return {};
      });
      TAPEWISE_CHECK(ok);
    }
    return {};
  }
  [[nodiscard]] Result<void> synchronize() override { return {}; }
  int dlpack_device_type() const override { return 1; }
  int device_id() const override { return 0; }

 protected:
  // Room for symbolic elements (8 bytes where the dtype has 2 or 4, 16 where it has 8), zeroed: a
  // constant +0.
  [[nodiscard]] Result<void*> raw_allocate(std::size_t bytes) override {
    void* p = std::calloc(1, bytes * 4 + 64);
    if (!p) return fail(ErrorCode::OutOfMemory, "symbolic allocation failed");
    return p;
  }
  void raw_release(void* p) override { std::free(p); }
  [[nodiscard]] Result<void> copy_to_device(void*, const void*, std::size_t) override {
    return fail(ErrorCode::InvalidArgument, "the symbolic backend holds no host data");
  }
  [[nodiscard]] Result<void> copy_to_host(void*, const void*, std::size_t) override {
    return fail(ErrorCode::InvalidArgument, "the symbolic backend holds no host data");
  }
  [[nodiscard]] Result<void> check_caller_memory(const void*) const override { return {}; }

 private:
  int lanes_;
  bool every_step_runs_;
  std::size_t* paths_;
};

std::size_t g_unused_paths = 0;

Scalars scalars_for(Op op, double s0, double s1) {
  const int n = op_info(op).scalar_count();
  return {n > 0 ? s0 : 0.0, n > 1 ? s1 : 0.0};
}

class SymEnv final : public Env {
 public:
  SymEnv(std::shared_ptr<Backend> be, Op op) : be_(std::move(be)), op_(op) {}
  std::shared_ptr<Backend> backend() override { return be_; }
  Result<Buffer> input(const std::string& name, DType dtype, AllocTag tag) override {
    TAPEWISE_TRY(b, be_->allocate(Shape{1}, dtype, tag));
    TAPEWISE_CHECK(with_sym(dtype, [&]<class T>() -> Result<void> {
      *static_cast<T*>(b.data()) = T::of(graph().var(name, T::sort));
      return {};
    }));
    return b;
  }
  Scalars scalars() override { return scalars_for(op_, scalar_sentinel(0), scalar_sentinel(1)); }
  Result<void> output(const std::string& name, const Buffer& buffer) override {
    return with_sym(buffer.dtype(), [&]<class T>() -> Result<void> {
      outputs[name] = static_cast<const T*>(buffer.data())->node();
      return {};
    });
  }
  std::map<std::string, std::uint32_t> outputs;

 private:
  std::shared_ptr<Backend> be_;
  Op op_;
};

class RealEnv final : public Env {
 public:
  RealEnv(std::shared_ptr<Backend> be, Op op, const Bits& in) : be_(std::move(be)), op_(op), in_(in) {}
  std::shared_ptr<Backend> backend() override { return be_; }
  Result<Buffer> input(const std::string& name, DType dtype, AllocTag tag) override {
    const auto it = in_.find(name);
    const std::uint64_t bits = it == in_.end() ? 0 : it->second;
    HostArray h;
    h.shape = Shape{1};
    h.dtype = dtype;
    h.bytes.resize(dtype_size(dtype));
    std::memcpy(h.bytes.data(), &bits, h.bytes.size());  // the low bytes: little-endian
    return be_->upload(h, tag);
  }
  Scalars scalars() override {
    const ScalarSets& sets = op_info(op_).run_scalars;
    double s[2] = {sets.empty() ? 0.0 : sets[0].s0, sets.empty() ? 0.0 : sets[0].s1};
    for (int k = 0; k < 2; ++k)
      if (auto it = in_.find(k == 0 ? "s0" : "s1"); it != in_.end()) s[k] = std::bit_cast<double>(it->second);
    return scalars_for(op_, s[0], s[1]);
  }
  Result<void> output(const std::string& name, const Buffer& buffer) override {
    TAPEWISE_TRY(h, be_->download(buffer));
    std::uint64_t bits = 0;
    std::memcpy(&bits, h.bytes.data(), h.bytes.size() < 8 ? h.bytes.size() : 8);
    outputs[name] = bits;
    return {};
  }
  Bits outputs;

 private:
  std::shared_ptr<Backend> be_;
  Op op_;
  Bits in_;
};

const char* input_name(int arity, int k) { return arity == 1 ? "x" : (k == 0 ? "a" : "b"); }
const char* grad_name(int arity, int k) { return arity == 1 ? "dx" : (k == 0 ? "da" : "db"); }

// The node's inputs as buffers (x, or a and b; op(a, a) when `same`).
Result<std::vector<Buffer>> node_inputs(Env& env, Op op, DType d, bool same) {
  std::vector<Buffer> in;
  const int arity = op_info(op).arity;
  for (int k = 0; k < (same ? 1 : arity); ++k) {
    TAPEWISE_TRY(b, env.input(input_name(arity, k), d, AllocTag::value));
    in.push_back(std::move(b));
  }
  return in;
}

Result<void> kernel_forward(Env& env, Op op, DType d, bool staged) {
  auto be = env.backend();
  TAPEWISE_TRY(in, node_inputs(env, op, d, false));
  const Buffer* ptrs[2] = {&in[0], &in[in.size() - 1]};
  TAPEWISE_TRY(y, be->allocate(Shape{1}, d, AllocTag::value));
  const std::span<const Buffer* const> span(ptrs, in.size());
  TAPEWISE_CHECK(staged ? staged_forward(*be, op, env.scalars(), span, y) : be->forward(op, env.scalars(), span, y));
  return env.output("y", y);
}

Result<void> kernel_vjp(Env& env, Op op, DType d, bool staged) {
  auto be = env.backend();
  TAPEWISE_TRY(in, node_inputs(env, op, d, false));
  TAPEWISE_TRY(g, env.input("g", d, AllocTag::gradient));
  const int arity = op_info(op).arity;
  const Buffer* ptrs[2] = {&in[0], &in[in.size() - 1]};
  Buffer grads[2];
  Buffer* outs[2] = {&grads[0], &grads[1]};
  for (int k = 0; k < arity; ++k) {
    TAPEWISE_TRY(b, be->allocate(Shape{1}, d, AllocTag::gradient));
    grads[k] = std::move(b);
  }
  const std::span<const Buffer* const> in_span(ptrs, static_cast<std::size_t>(arity));
  const std::span<Buffer* const> out_span(outs, static_cast<std::size_t>(arity));
  TAPEWISE_CHECK(staged ? staged_vjp(*be, op, env.scalars(), in_span, g, out_span)
                        : be->vjp_fused(op, env.scalars(), in_span, g, out_span));
  for (int k = 0; k < arity; ++k) TAPEWISE_CHECK(env.output(grad_name(arity, k), grads[k]));
  return {};
}

// Through the tape: record the node on leaves (op(a, a) when `same`), then its value (forward_only)
// or a backward from it with seed g. threshold: the tape's program threshold
// (0: every node its own kernels; the default: one program per flush and per backward).
Result<void> through_tape(Env& env, Op op, DType d, bool same, std::int64_t threshold, VjpPath path, bool dense,
                          bool forward_only) {
  auto be = env.backend();
  Tape tape(be);
  TAPEWISE_CHECK(tape.set_options(TapeOptions{threshold, TapeOptions{}.max_pending_nodes}));
  TAPEWISE_TRY(in, node_inputs(env, op, d, same));
  ::tapewise::NodeId leaves[2] = {-1, -1};
  for (std::size_t k = 0; k < in.size(); ++k) {
    TAPEWISE_TRY(id, tape.leaf(std::move(in[k]), true));
    leaves[k] = id;
  }
  const int arity = op_info(op).arity;
  const ::tapewise::NodeId parents[2] = {leaves[0], same ? leaves[0] : leaves[arity - 1]};
  TAPEWISE_TRY(y, tape.apply(op, std::span<const ::tapewise::NodeId>(parents, static_cast<std::size_t>(arity)), env.scalars()));
  if (forward_only) {
    TAPEWISE_TRY(value, tape.value_buffer(y));
    return env.output("y", *value);
  }
  TAPEWISE_TRY(seed, env.input("g", d, AllocTag::gradient));
  TAPEWISE_TRY(grads, dense ? tape.backward_dense(y, seed, path) : tape.backward(y, seed, path));
  for (int k = 0; k < (same ? 1 : arity); ++k) {
    const Buffer* b = grads.get(leaves[k]);
    if (b == nullptr) return fail(ErrorCode::InvalidArgument, "a leaf received no gradient");
    TAPEWISE_CHECK(env.output(grad_name(arity, k), *b));
  }
  return {};
}

std::vector<Form> make_forms() {
  constexpr std::int64_t program = TapeOptions{}.program_threshold;
  std::vector<Form> f;
  f.push_back({"forward.kernel", "the forward kernel (ForwardFn: OpMath<op>::forward)", false,
               [](Env& e, Op op, DType d) { return kernel_forward(e, op, d, false); }});
  f.push_back({"forward.staged", "the spec's staged forward (staged_forward: one prim per stage)", false,
               [](Env& e, Op op, DType d) { return kernel_forward(e, op, d, true); }});
  f.push_back({"forward.program", "the forward as a tape program (Tape::flush, run_steps_at)", false,
               [](Env& e, Op op, DType d) {
                 return through_tape(e, op, d, false, program, VjpPath::fused, false, true);
               }});
  f.push_back({"vjp.fused", "the fused VJP kernel (VjpFn: OpMath<op>::vjp)", false,
               [](Env& e, Op op, DType d) { return kernel_vjp(e, op, d, false); }});
  f.push_back({"vjp.staged", "the spec's staged VJP (staged_vjp)", false,
               [](Env& e, Op op, DType d) { return kernel_vjp(e, op, d, true); }});
  for (const bool same : {false, true}) {
    for (const bool dense : {false, true}) {
      const std::string prefix = same ? "same" : "tape", suffix = dense ? ".dense" : "";
      const std::string node = same ? "op(a, a)" : "the node on leaves";
      const std::string how = dense ? "backward_dense" : "backward";
      f.push_back({prefix + ".program" + suffix, node + ", " + how + " as one tape program", same,
                   [=](Env& e, Op op, DType d) { return through_tape(e, op, d, same, program, VjpPath::fused, dense, false); }});
      f.push_back({prefix + ".kernels" + suffix, node + ", " + how + " node by node with the fused kernels", same,
                   [=](Env& e, Op op, DType d) { return through_tape(e, op, d, same, 0, VjpPath::fused, dense, false); }});
      f.push_back({prefix + ".staged" + suffix, node + ", " + how + " node by node with the staged VJPs", same,
                   [=](Env& e, Op op, DType d) { return through_tape(e, op, d, same, 0, VjpPath::staged, dense, false); }});
    }
  }
  return f;
}

std::vector<Claim> make_claims() {
  std::vector<Claim> c = {{"forward", "forward.kernel", "forward.staged"},
                          {"forward", "forward.program", "forward.staged"},
                          {"vjp", "vjp.fused", "vjp.staged"}};
  for (const char* prefix : {"tape", "same"}) {
    const std::string column = std::string(prefix) == "tape" ? "tape" : "repeated";
    for (const char* suffix : {"", ".dense"}) {
      const std::string staged = std::string(prefix) + ".staged" + suffix;
      c.push_back({column, std::string(prefix) + ".kernels" + suffix, staged});
      c.push_back({column, std::string(prefix) + ".program" + suffix, staged});
    }
  }
  // The interpreter on four lanes (CUDA's large pieces, the CPU backend's last elements of a piece)
  // as well as one, and its EveryStepRuns variant (compiled pieces) on one. The CPU backend's blocks of
  // 256 lanes run the same per-lane code, and no lane reads another's values, so the four-lane proof
  // covers them (docs/proof.md).
  const std::size_t n = c.size();
  for (std::size_t i = 0; i < n; ++i)
    if (c[i].lhs.find(".program") != std::string::npos)
      for (const char* variant : {"@4", "@1e"}) c.push_back({c[i].column, c[i].lhs + variant, c[i].rhs});
  return c;
}

}  // namespace

const std::vector<Form>& forms() {
  static const std::vector<Form> f = make_forms();
  return f;
}

const Form& form(const std::string& name) {
  const std::string base = name.substr(0, name.find('@'));
  for (const Form& f : forms())
    if (f.name == base) return f;
  throw std::invalid_argument("no form " + name);
}

const std::vector<Claim>& claims() {
  static const std::vector<Claim> c = make_claims();
  return c;
}

std::shared_ptr<Backend> make_symbolic_backend(int lanes) {
  return std::make_shared<SymbolicBackend>(lanes, &g_unused_paths);
}

Result<Extracted> extract(Op op, DType dtype, int lanes, std::size_t* paths_explored) {
  std::size_t paths = 0;
  Extracted out;
  struct Variant {
    int lanes;
    bool every_step_runs;
    const char* suffix;  // of the program forms' names; the other forms run on the first variant only
  };
  for (const Variant v : {Variant{1, false, ""}, Variant{4, false, "@4"}, Variant{1, true, "@1e"}}) {
    if (lanes != 0 && (v.lanes != lanes || v.every_step_runs)) continue;
    auto be = std::make_shared<SymbolicBackend>(v.lanes, &paths, v.every_step_runs);
    for (const Form& f : forms()) {
      if (f.binary_only && op_info(op).arity != 2) continue;
      const bool program = f.name.find(".program") != std::string::npos;
      if (*v.suffix && !program) continue;
      SymEnv env(be, op);
      if (auto ok = f.run(env, op, dtype); !ok)
        return fail(ok.error().code, f.name + ": " + ok.error().message);
      out[f.name + v.suffix] = env.outputs;
    }
  }
  if (paths_explored) *paths_explored = paths;
  return out;
}

Result<Bits> replay(const std::shared_ptr<Backend>& backend, const std::string& form_name, Op op, DType dtype,
                    const Bits& inputs) {
  RealEnv env(backend, op, inputs);
  TAPEWISE_CHECK(form(form_name).run(env, op, dtype));
  TAPEWISE_CHECK(backend->synchronize());
  return env.outputs;
}

}  // namespace tapewise::prove
