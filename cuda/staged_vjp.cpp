// cuda/staged_vjp.cpp — every node's VJP in the spec's staged form (spec/ops.def, `staged`): each
// stage is one primitive buffer op with one rounding per element, intermediates live in workspace
// buffers that are released (RAII) before the VJP returns. Backend-agnostic: runs on CPU and CUDA.
// Rows marked `native` in the spec are a single native kernel in TorchLean, and so here too.
#include <initializer_list>

#include <tapewise/tape.hpp>

namespace tapewise {
namespace {

// Runs primitive buffer ops shaped like `like`, allocating workspace for intermediates.
class Stager {
 public:
  Stager(Backend& be, const Buffer& like) : be_(be), like_(like) {}

  // A new workspace buffer holding p(inputs, c).
  Result<Buffer> ws(Prim p, std::initializer_list<const Buffer*> inputs, double c = 0.0) {
    auto out = be_.allocate(like_.shape(), like_.dtype(), AllocTag::workspace);
    if (!out) return out;
    if (auto ok = into(*out, p, inputs, c); !ok) return tl::unexpected(ok.error());
    return out;
  }
  // Writes p(inputs, c) into an existing buffer (a returned gradient).
  Result<void> into(Buffer& out, Prim p, std::initializer_list<const Buffer*> inputs, double c = 0.0) {
    return be_.prim(p, c, std::span<const Buffer* const>(inputs.begin(), inputs.size()), out);
  }

 private:
  Backend& be_;
  const Buffer& like_;
};

#define TW_STAGE(var, expr)                                    \
  auto var##_result = (expr);                                  \
  if (!var##_result) return tl::unexpected(var##_result.error()); \
  Buffer var = std::move(*var##_result)
#define TW_STEP(expr) \
  if (auto step_ok = (expr); !step_ok) return step_ok

// TorchLean's softplusBuf, stage by stage: max(x, 0) + log(1 + exp(-|x|)).
Result<Buffer> staged_softplus(Stager& st, const Buffer& x) {
  TW_STAGE(zeros, st.ws(Prim::fill, {}, 0.0));
  TW_STAGE(ones, st.ws(Prim::fill, {}, 1.0));
  TW_STAGE(m, st.ws(Prim::fmax, {&x, &zeros}));
  TW_STAGE(ax, st.ws(Prim::abs, {&x}));
  TW_STAGE(na, st.ws(Prim::mul_scalar, {&ax}, -1.0));
  TW_STAGE(e, st.ws(Prim::exp, {&na}));
  TW_STAGE(one_plus_e, st.ws(Prim::add, {&ones, &e}));
  TW_STAGE(l, st.ws(Prim::log, {&one_plus_e}));
  return st.ws(Prim::add, {&m, &l});
}

}  // namespace

Result<void> staged_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                        const Buffer& g, std::span<Buffer* const> grads) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity || static_cast<int>(grads.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + " staged vjp: wrong number of operands");
  Stager st(be, g);
  const Buffer& x = *inputs[0];
  const Buffer& b = *inputs[inputs.size() - 1];
  Buffer& dx = *grads[0];
  switch (op) {
    case Op::add:
      TW_STEP(st.into(dx, Prim::copy, {&g}));
      return st.into(*grads[1], Prim::copy, {&g});
    case Op::sub: {
      TW_STEP(st.into(dx, Prim::copy, {&g}));
      TW_STAGE(zeros, st.ws(Prim::fill, {}, 0.0));
      return st.into(*grads[1], Prim::sub, {&zeros, &g});
    }
    case Op::mul:
      TW_STEP(st.into(dx, Prim::mul, {&g, &b}));
      return st.into(*grads[1], Prim::mul, {&g, &x});
    case Op::neg:
      return st.into(dx, Prim::neg, {&g});
    case Op::scale:
      return st.into(dx, Prim::mul_scalar, {&g}, s.s0);
    case Op::abs:
    case Op::sqrt:
    case Op::clamp:
    case Op::max:
    case Op::min:
    case Op::relu:
      return be.vjp_fused(op, s, inputs, g, grads);  // native: one kernel, no workspace
    case Op::div: {
      TW_STEP(st.into(dx, Prim::div, {&g, &b}));
      TW_STAGE(q1, st.ws(Prim::div, {&x, &b}));
      TW_STAGE(q2, st.ws(Prim::div, {&q1, &b}));
      TW_STAGE(t, st.ws(Prim::mul, {&g, &q2}));
      TW_STAGE(zeros, st.ws(Prim::fill, {}, 0.0));
      return st.into(*grads[1], Prim::sub, {&zeros, &t});
    }
    case Op::exp: {
      TW_STAGE(e, st.ws(Prim::exp, {&x}));
      return st.into(dx, Prim::mul, {&g, &e});
    }
    case Op::sin: {
      TW_STAGE(c, st.ws(Prim::cos, {&x}));
      return st.into(dx, Prim::mul, {&c, &g});
    }
    case Op::cos: {
      TW_STAGE(sn, st.ws(Prim::sin, {&x}));
      TW_STAGE(d, st.ws(Prim::mul_scalar, {&sn}, -1.0));
      return st.into(dx, Prim::mul, {&d, &g});
    }
    case Op::log: {
      TW_STAGE(r, st.ws(Prim::reciprocal, {&x}));
      return st.into(dx, Prim::mul, {&g, &r});
    }
    case Op::inv: {
      TW_STAGE(r, st.ws(Prim::reciprocal, {&x}));
      TW_STAGE(r2, st.ws(Prim::mul, {&r, &r}));
      TW_STAGE(p, st.ws(Prim::mul, {&g, &r2}));
      return st.into(dx, Prim::mul_scalar, {&p}, -1.0);
    }
    case Op::safeLog: {
      TW_STAGE(eps, st.ws(Prim::fill, {}, s.s0));
      TW_STAGE(sp, staged_softplus(st, x));
      TW_STAGE(den, st.ws(Prim::add, {&sp, &eps}));
      TW_STAGE(sig, st.ws(Prim::sigmoid, {&x}));
      TW_STAGE(dl, st.ws(Prim::div, {&sig, &den}));
      return st.into(dx, Prim::mul, {&g, &dl});
    }
    case Op::sigmoid: {
      TW_STAGE(y, st.ws(Prim::sigmoid, {&x}));
      TW_STAGE(ones, st.ws(Prim::fill, {}, 1.0));
      TW_STAGE(one_minus_y, st.ws(Prim::sub, {&ones, &y}));
      TW_STAGE(dy, st.ws(Prim::mul, {&y, &one_minus_y}));
      return st.into(dx, Prim::mul, {&g, &dy});
    }
    case Op::tanh: {
      TW_STAGE(y, st.ws(Prim::tanh, {&x}));
      TW_STAGE(ones, st.ws(Prim::fill, {}, 1.0));
      TW_STAGE(y2, st.ws(Prim::mul, {&y, &y}));
      TW_STAGE(dy, st.ws(Prim::sub, {&ones, &y2}));
      return st.into(dx, Prim::mul, {&g, &dy});
    }
    case Op::silu: {
      TW_STAGE(sg, st.ws(Prim::sigmoid_split, {&x}));
      TW_STAGE(xs, st.ws(Prim::mul, {&x, &sg}));
      TW_STAGE(ones, st.ws(Prim::fill, {}, 1.0));
      TW_STAGE(one_minus_s, st.ws(Prim::sub, {&ones, &sg}));
      TW_STAGE(t, st.ws(Prim::mul, {&xs, &one_minus_s}));
      TW_STAGE(d, st.ws(Prim::add, {&sg, &t}));
      return st.into(dx, Prim::mul, {&g, &d});
    }
    case Op::gelu: {
      const double c = 0.044715, k = 0.79788456080286535588;
      const double c3 = 3.0 * round_to(g.dtype(), c);  // R(3 * R(c)) once the prim rounds it
      TW_STAGE(xc, st.ws(Prim::mul_scalar, {&x}, c));
      TW_STAGE(xcx, st.ws(Prim::mul, {&xc, &x}));
      TW_STAGE(x3c, st.ws(Prim::mul, {&xcx, &x}));
      TW_STAGE(u, st.ws(Prim::add, {&x, &x3c}));
      TW_STAGE(uk, st.ws(Prim::mul_scalar, {&u}, k));
      TW_STAGE(t, st.ws(Prim::tanh, {&uk}));
      TW_STAGE(tt, st.ws(Prim::mul, {&t, &t}));
      TW_STAGE(sech, st.ws(Prim::rsub_scalar, {&tt}, 1.0));
      TW_STAGE(xc3, st.ws(Prim::mul_scalar, {&x}, c3));
      TW_STAGE(q, st.ws(Prim::mul, {&xc3, &x}));
      TW_STAGE(q1, st.ws(Prim::add_scalar, {&q}, 1.0));
      TW_STAGE(inner_derivative, st.ws(Prim::mul_scalar, {&q1}, k));
      TW_STAGE(xsech, st.ws(Prim::mul, {&x, &sech}));
      TW_STAGE(dt, st.ws(Prim::mul, {&xsech, &inner_derivative}));
      TW_STAGE(t1, st.ws(Prim::add_scalar, {&t}, 1.0));
      TW_STAGE(num, st.ws(Prim::add, {&t1, &dt}));
      TW_STAGE(half_num, st.ws(Prim::mul_scalar, {&num}, 0.5));
      return st.into(dx, Prim::mul, {&half_num, &g});
    }
    case Op::softplus: {
      TW_STAGE(sg, st.ws(Prim::sigmoid, {&x}));
      return st.into(dx, Prim::mul, {&g, &sg});
    }
  }
  return fail(ErrorCode::InvalidArgument, "staged vjp: unknown op");
}

}  // namespace tapewise
