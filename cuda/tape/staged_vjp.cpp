// cuda/tape/staged_vjp.cpp — every node's VJP in the spec's staged form (spec/ops.def, `staged`), and its
// forward as spec/conventions.md stages it: each stage is one primitive buffer op with one rounding
// per element, intermediates live in workspace buffers that are released (RAII) before the call
// returns. Backend-agnostic: runs on CPU and CUDA. Rows marked `native` in the spec (and the select
// forwards of sqrt and relu) are a single native kernel in TorchLean, and so here too.
#include <initializer_list>

#include <tapewise/tape.hpp>

#include "backends/engine.hpp"

namespace tapewise {
namespace {

// Runs primitive buffer ops shaped like `like`, allocating workspace for intermediates.
class Stager {
 public:
  Stager(Backend& be, const Buffer& like) : be_(detail::engine_of(be)), like_(like) {}

  // A new workspace buffer holding p(inputs, c).
  [[nodiscard]] Result<Buffer> ws(Prim p, std::initializer_list<const Buffer*> inputs, double c = 0.0) {
    auto out = be_.allocate(like_.shape(), like_.dtype(), AllocTag::workspace);
    if (!out) return out;
    TAPEWISE_CHECK(into(*out, p, inputs, c));
    return out;
  }
  // Writes p(inputs, c) into an existing buffer (a returned gradient).
  [[nodiscard]] Result<void> into(Buffer& out, Prim p, std::initializer_list<const Buffer*> inputs, double c = 0.0) {
    return be_.prim(p, c, std::span<const Buffer* const>(inputs.begin(), inputs.size()), out);
  }

 private:
  detail::Engine& be_;
  const Buffer& like_;
};


// TorchLean's softplusBuf, stage by stage: max(x, 0) + log(1 + exp(-|x|)).
[[nodiscard]] Result<Buffer> staged_softplus(Stager& st, const Buffer& x) {
  TAPEWISE_TRY(zeros, st.ws(Prim::fill, {}, 0.0));
  TAPEWISE_TRY(ones, st.ws(Prim::fill, {}, 1.0));
  TAPEWISE_TRY(m, st.ws(Prim::fmax, {&x, &zeros}));
  TAPEWISE_TRY(ax, st.ws(Prim::abs, {&x}));
  TAPEWISE_TRY(na, st.ws(Prim::mul_scalar, {&ax}, -1.0));
  TAPEWISE_TRY(e, st.ws(Prim::exp, {&na}));
  TAPEWISE_TRY(one_plus_e, st.ws(Prim::add, {&ones, &e}));
  TAPEWISE_TRY(l, st.ws(Prim::log, {&one_plus_e}));
  return st.ws(Prim::add, {&m, &l});
}

// gelu's t = tanh((x + ((x*c)*x)*x) * k), stage by stage (6 workspace buffers while it is formed).
constexpr double kGeluC = 0.044715, kGeluK = 0.79788456080286535588;
[[nodiscard]] Result<Buffer> staged_gelu_t(Stager& st, const Buffer& x) {
  TAPEWISE_TRY(xc, st.ws(Prim::mul_scalar, {&x}, kGeluC));
  TAPEWISE_TRY(xcx, st.ws(Prim::mul, {&xc, &x}));
  TAPEWISE_TRY(x3c, st.ws(Prim::mul, {&xcx, &x}));
  TAPEWISE_TRY(u, st.ws(Prim::add, {&x, &x3c}));
  TAPEWISE_TRY(uk, st.ws(Prim::mul_scalar, {&u}, kGeluK));
  return st.ws(Prim::tanh, {&uk});
}

}  // namespace

[[nodiscard]] Result<void> staged_forward(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
                                          Buffer& out) {
  const OpInfo& info = op_info(op);
  if (static_cast<int>(inputs.size()) != info.arity)
    return fail(ErrorCode::InvalidArgument, std::string(info.name) + " staged forward: wrong number of inputs");
  Stager st(be, out);
  const Buffer& x = *inputs[0];
  const Buffer& b = *inputs[inputs.size() - 1];
  switch (op) {
    case Op::add: return st.into(out, Prim::add, {&x, &b});
    case Op::sub: return st.into(out, Prim::sub, {&x, &b});
    case Op::mul: return st.into(out, Prim::mul, {&x, &b});
    case Op::div: return st.into(out, Prim::div, {&x, &b});
    case Op::neg: return st.into(out, Prim::neg, {&x});
    case Op::scale: return st.into(out, Prim::mul_scalar, {&x}, s.s0);
    case Op::abs: return st.into(out, Prim::abs, {&x});
    case Op::max: return st.into(out, Prim::fmax, {&x, &b});
    case Op::min: return st.into(out, Prim::fmin, {&x, &b});
    case Op::clamp: {
      TAPEWISE_TRY(lo, st.ws(Prim::fill, {}, s.s0));
      TAPEWISE_TRY(hi, st.ws(Prim::fill, {}, s.s1));
      TAPEWISE_TRY(above_lo, st.ws(Prim::fmax, {&x, &lo}));
      return st.into(out, Prim::fmin, {&above_lo, &hi});
    }
    case Op::sqrt:
    case Op::relu:
      return be.forward(op, s, inputs, out);  // native: a select, one kernel
    case Op::exp: return st.into(out, Prim::exp, {&x});
    case Op::sin: return st.into(out, Prim::sin, {&x});
    case Op::cos: return st.into(out, Prim::cos, {&x});
    case Op::log: return st.into(out, Prim::log, {&x});
    case Op::inv: return st.into(out, Prim::reciprocal, {&x});
    case Op::safeLog: {
      TAPEWISE_TRY(eps, st.ws(Prim::fill, {}, s.s0));
      TAPEWISE_TRY(sp, staged_softplus(st, x));
      TAPEWISE_TRY(den, st.ws(Prim::add, {&sp, &eps}));
      return st.into(out, Prim::log, {&den});
    }
    case Op::sigmoid: return st.into(out, Prim::sigmoid, {&x});
    case Op::tanh: return st.into(out, Prim::tanh, {&x});
    case Op::silu: {
      TAPEWISE_TRY(sg, st.ws(Prim::sigmoid_split, {&x}));
      return st.into(out, Prim::mul, {&x, &sg});
    }
    case Op::gelu: {
      TAPEWISE_TRY(t, staged_gelu_t(st, x));
      TAPEWISE_TRY(t1, st.ws(Prim::add_scalar, {&t}, 1.0));
      TAPEWISE_TRY(xt1, st.ws(Prim::mul, {&x, &t1}));
      return st.into(out, Prim::mul_scalar, {&xt1}, 0.5);
    }
    case Op::softplus: {
      TAPEWISE_TRY(sp, staged_softplus(st, x));
      return st.into(out, Prim::copy, {&sp});
    }
  }
  return fail(ErrorCode::InvalidArgument, "staged forward: no staged form for " + op_label(op));
}

[[nodiscard]] Result<void> staged_vjp(Backend& be, Op op, const Scalars& s, std::span<const Buffer* const> inputs,
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
      TAPEWISE_CHECK(st.into(dx, Prim::copy, {&g}));
      return st.into(*grads[1], Prim::copy, {&g});
    case Op::sub: {
      TAPEWISE_CHECK(st.into(dx, Prim::copy, {&g}));
      TAPEWISE_TRY(zeros, st.ws(Prim::fill, {}, 0.0));
      return st.into(*grads[1], Prim::sub, {&zeros, &g});
    }
    case Op::mul:
      TAPEWISE_CHECK(st.into(dx, Prim::mul, {&g, &b}));
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
      TAPEWISE_CHECK(st.into(dx, Prim::div, {&g, &b}));
      TAPEWISE_TRY(q1, st.ws(Prim::div, {&x, &b}));
      TAPEWISE_TRY(q2, st.ws(Prim::div, {&q1, &b}));
      TAPEWISE_TRY(t, st.ws(Prim::mul, {&g, &q2}));
      TAPEWISE_TRY(zeros, st.ws(Prim::fill, {}, 0.0));
      return st.into(*grads[1], Prim::sub, {&zeros, &t});
    }
    case Op::exp: {
      TAPEWISE_TRY(e, st.ws(Prim::exp, {&x}));
      return st.into(dx, Prim::mul, {&g, &e});
    }
    case Op::sin: {
      TAPEWISE_TRY(c, st.ws(Prim::cos, {&x}));
      return st.into(dx, Prim::mul, {&c, &g});
    }
    case Op::cos: {
      TAPEWISE_TRY(sn, st.ws(Prim::sin, {&x}));
      TAPEWISE_TRY(d, st.ws(Prim::mul_scalar, {&sn}, -1.0));
      return st.into(dx, Prim::mul, {&d, &g});
    }
    case Op::log: {
      TAPEWISE_TRY(r, st.ws(Prim::reciprocal, {&x}));
      return st.into(dx, Prim::mul, {&g, &r});
    }
    case Op::inv: {
      TAPEWISE_TRY(r, st.ws(Prim::reciprocal, {&x}));
      TAPEWISE_TRY(r2, st.ws(Prim::mul, {&r, &r}));
      TAPEWISE_TRY(p, st.ws(Prim::mul, {&g, &r2}));
      return st.into(dx, Prim::mul_scalar, {&p}, -1.0);
    }
    case Op::safeLog: {
      TAPEWISE_TRY(eps, st.ws(Prim::fill, {}, s.s0));
      TAPEWISE_TRY(sp, staged_softplus(st, x));
      TAPEWISE_TRY(den, st.ws(Prim::add, {&sp, &eps}));
      TAPEWISE_TRY(sig, st.ws(Prim::sigmoid, {&x}));
      TAPEWISE_TRY(dl, st.ws(Prim::div, {&sig, &den}));
      return st.into(dx, Prim::mul, {&g, &dl});
    }
    case Op::sigmoid: {
      TAPEWISE_TRY(y, st.ws(Prim::sigmoid, {&x}));
      TAPEWISE_TRY(ones, st.ws(Prim::fill, {}, 1.0));
      TAPEWISE_TRY(one_minus_y, st.ws(Prim::sub, {&ones, &y}));
      TAPEWISE_TRY(dy, st.ws(Prim::mul, {&y, &one_minus_y}));
      return st.into(dx, Prim::mul, {&g, &dy});
    }
    case Op::tanh: {
      TAPEWISE_TRY(y, st.ws(Prim::tanh, {&x}));
      TAPEWISE_TRY(ones, st.ws(Prim::fill, {}, 1.0));
      TAPEWISE_TRY(y2, st.ws(Prim::mul, {&y, &y}));
      TAPEWISE_TRY(dy, st.ws(Prim::sub, {&ones, &y2}));
      return st.into(dx, Prim::mul, {&g, &dy});
    }
    case Op::silu: {
      TAPEWISE_TRY(sg, st.ws(Prim::sigmoid_split, {&x}));
      TAPEWISE_TRY(xs, st.ws(Prim::mul, {&x, &sg}));
      TAPEWISE_TRY(ones, st.ws(Prim::fill, {}, 1.0));
      TAPEWISE_TRY(one_minus_s, st.ws(Prim::sub, {&ones, &sg}));
      TAPEWISE_TRY(t, st.ws(Prim::mul, {&xs, &one_minus_s}));
      TAPEWISE_TRY(d, st.ws(Prim::add, {&sg, &t}));
      return st.into(dx, Prim::mul, {&g, &d});
    }
    case Op::gelu: {
      const double c3 = 3.0 * round_to(g.dtype(), kGeluC);  // R(3 * R(c)) once the prim rounds it
      TAPEWISE_TRY(t, staged_gelu_t(st, x));
      TAPEWISE_TRY(tt, st.ws(Prim::mul, {&t, &t}));
      TAPEWISE_TRY(sech, st.ws(Prim::rsub_scalar, {&tt}, 1.0));
      TAPEWISE_TRY(xc3, st.ws(Prim::mul_scalar, {&x}, c3));
      TAPEWISE_TRY(q, st.ws(Prim::mul, {&xc3, &x}));
      TAPEWISE_TRY(q1, st.ws(Prim::add_scalar, {&q}, 1.0));
      TAPEWISE_TRY(inner_derivative, st.ws(Prim::mul_scalar, {&q1}, kGeluK));
      TAPEWISE_TRY(xsech, st.ws(Prim::mul, {&x, &sech}));
      TAPEWISE_TRY(dt, st.ws(Prim::mul, {&xsech, &inner_derivative}));
      TAPEWISE_TRY(t1, st.ws(Prim::add_scalar, {&t}, 1.0));
      TAPEWISE_TRY(num, st.ws(Prim::add, {&t1, &dt}));
      TAPEWISE_TRY(half_num, st.ws(Prim::mul_scalar, {&num}, 0.5));
      return st.into(dx, Prim::mul, {&half_num, &g});
    }
    case Op::softplus: {
      TAPEWISE_TRY(sg, st.ws(Prim::sigmoid, {&x}));
      return st.into(dx, Prim::mul, {&g, &sg});
    }
  }
  return fail(ErrorCode::InvalidArgument, "staged vjp: no staged form for " + op_label(op));
}

}  // namespace tapewise
