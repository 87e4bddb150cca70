"""conform/frameworks/adapters.py — answers a `tapewise-conform vectors` folder with a framework's own
ops and autograd (PyTorch eager, torch.compile, JAX), never with tapewise's formulas, so that
`tapewise-conform check` and diff.py can show where each framework's conventions differ from the spec.

Each node is written the way a user of that framework would write it (forms.py); the
gradient is the framework's VJP with upstream g = g.npy. Scalars are passed as Python floats, as a
user would pass them; what the framework then does with them (round to the dtype, or not) is probed
and recorded in implementation.json. The CLI is answer.py.
"""

import os
import platform
import sys
import time

import numpy as np

import forms
import suites

FRAMEWORKS = ("torch", "torch-compile", "jax", "jax-jit")


# --- the op tables: each framework's natural op per node (forms.py, shared with bench/bench_torch.py) ----

def torch_op_table():
    import torch
    import torch.nn.functional as F

    return forms.torch_forms(torch, F)


def jax_op_table():
    import jax
    import jax.numpy as jnp

    return forms.jax_forms(jax, jnp)


def natural_op(table, framework, op):
    """The framework's op for node `op`; a node of the spec's table that this file does not map yet is
    an error naming it (answer_folder reports it for that suite), never a silent skip."""
    if op not in table:
        raise KeyError(f"{framework}: conform/frameworks/forms.py has no form for node {op!r} yet")
    return table[op]


# --- adapters ----------------------------------------------------------------------------------------

class TorchAdapter:
    """PyTorch autograd: eager, or torch.compile of the same function (forward and backward)."""

    def __init__(self, device="cpu", compiled=False):
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch: --device cuda but torch.cuda.is_available() is False")
        self.torch = torch
        self.device = device
        self.compiled = compiled
        self.name = "torch-compile" if compiled else "torch"
        self.ops = torch_op_table()

    def function(self, op, scalars):
        plain = natural_op(self.ops, self.name, op)
        fn = lambda *tensors: plain(*tensors, scalars)  # noqa: E731 (a closure per suite)
        if not self.compiled:
            return fn
        # A fresh compile per suite: dynamo caches per code object, and every suite shares this
        # lambda's code, so without a reset it would recompile, hit its cache limit and silently
        # fall back to eager. fullgraph=True turns a graph break into an error instead of eager code.
        self.torch._dynamo.reset()
        return self.torch.compile(fn, fullgraph=True, dynamic=False)

    def tensor(self, a, dtype):
        """A suite's array as a tensor of its dtype on the device (bfloat16: from its uint16 bits)."""
        if dtype == "bfloat16":
            return self.torch.from_numpy(a.view(np.int16).copy()).view(self.torch.bfloat16).to(self.device)
        return self.torch.tensor(a, device=self.device)

    def array(self, t, dtype):
        """A tensor back as the suite's numpy array (bfloat16: its uint16 bits)."""
        t = t.detach().cpu()
        return t.view(self.torch.int16).numpy().view(np.uint16) if dtype == "bfloat16" else t.numpy()

    def evaluate(self, op, scalars, same, inputs, g, dtype):
        """[y, grads...] as numpy arrays; `same` feeds one leaf as both operands (total gradient)."""
        torch = self.torch
        fn = self.function(op, scalars)
        leaves = [self.tensor(a, dtype).requires_grad_() for a in inputs]
        args = [leaves[0], leaves[0]] if same else leaves
        y = fn(*args)
        grads = torch.autograd.grad(y, leaves, grad_outputs=self.tensor(g, dtype), allow_unused=True)
        grads = [torch.zeros_like(leaf) if d is None else d for leaf, d in zip(leaves, grads)]
        return [self.array(t, dtype) for t in [y, *grads]]

    def info(self):
        torch = self.torch
        out = {"framework": self.name, "version": torch.__version__, "device": self.device,
               "natural_ops": "torch.* / torch.nn.functional.*; autograd.grad with grad_outputs = g"}
        if self.device == "cuda":
            out["device_name"] = torch.cuda.get_device_name(0)
            out["cuda"] = torch.version.cuda
        if self.compiled:
            out["compile"] = "torch.compile(fn, fullgraph=True, dynamic=False), one compile per suite"
        return out


class JaxAdapter:
    """JAX: jax.vjp of the natural jnp / jax.nn function, op by op (eager) or under jax.jit."""

    def __init__(self, device="cpu", jit=False):
        import jax

        # float64 suites need x64; float32 arrays stay float32 with it (Python floats are weakly typed).
        jax.config.update("jax_enable_x64", True)
        self.jax = jax
        self.device = device
        self.jax_device = jax.devices(device)[0]
        self.jit = jit
        self.name = "jax-jit" if jit else "jax"
        self.ops = jax_op_table()

    def evaluate(self, op, scalars, same, inputs, g, dtype):
        jax = self.jax
        plain = natural_op(self.ops, self.name, op)
        f = (lambda a: plain(a, a, scalars)) if same else (lambda *xs: plain(*xs, scalars))

        def vjp(*xs_and_g):
            *xs, seed = xs_and_g
            y, pull = jax.vjp(f, *xs)
            return (y, *pull(seed))

        if self.jit:
            vjp = jax.jit(vjp)
        # bfloat16 arrives and leaves as its uint16 bits (numpy has no bfloat16): bitcasts, no rounding.
        bits = dtype == "bfloat16"
        bitcast = jax.lax.bitcast_convert_type
        args = [jax.device_put(a, self.jax_device) for a in (*inputs, g)]
        if bits:
            args = [bitcast(a, jax.numpy.bfloat16) for a in args]
        return [np.asarray(bitcast(v, jax.numpy.uint16) if bits else v) for v in vjp(*args)]

    def info(self):
        import jaxlib

        return {"framework": self.name, "version": self.jax.__version__, "jaxlib": jaxlib.__version__,
                "device": self.device, "device_name": str(self.jax_device), "x64": True,
                "natural_ops": "jnp.* / jax.nn.*; jax.vjp" + (" under jax.jit" if self.jit else ", op by op")}


def make_adapter(framework, device="cpu"):
    if framework in ("torch", "torch-compile"):
        return TorchAdapter(device, compiled=framework == "torch-compile")
    if framework in ("jax", "jax-jit"):
        return JaxAdapter(device, jit=framework == "jax-jit")
    raise ValueError(f"unknown framework {framework!r}; one of {', '.join(FRAMEWORKS)}")


# --- answering a folder --------------------------------------------------------------------------------

def probe_scalar_rounding(adapter):
    """What the framework does with a Python-float scalar on float32: the spec rounds c once to the
    dtype (R(1 + 2^-24) = 1, so 3 * c = 3); multiplying at higher precision gives 3 + 2^-22."""
    x = np.array([3.0], dtype=np.float32)
    g = np.array([1.0], dtype=np.float32)
    try:
        y = adapter.evaluate("scale", {"c": 1.0 + 2.0**-24}, False, [x], g, "float32")[0]
    except Exception as e:  # noqa: BLE001 (recorded, not fatal)
        return {"result": "probe failed", "error": repr(e)}
    if y[0] == np.float32(3.0):
        verdict = "rounded once to float32 before the multiply, like the spec's R(c)"
    elif y[0] == np.nextafter(np.float32(3.0), np.float32(4.0)):
        verdict = "not rounded to float32 first: the multiply used the double value (differs from R(c))"
    else:
        verdict = "unexpected value"
    return {"probe": "float32 x=3 * c=1+2^-24", "y": float(y[0]).hex(), "result": verdict}


def probe_bfloat16_scalar(adapter):
    """The same on bfloat16, x = 3 times c = 1 + 2^-8 + 2^-30: the spec's R(c) = R16(R32(c)) = 1 gives 3;
    multiplying by R32(c) = 1 + 2^-8 in float32 and rounding the product gives 3 + 2^-6; rounding c
    once to bfloat16 (1 + 2^-7) gives 3 + 2^-5."""
    x = np.array([0x4040], np.uint16)  # 3 (bfloat16 bits: the top half of float32's)
    g = np.array([0x3F80], np.uint16)  # 1
    try:
        y = int(adapter.evaluate("scale", {"c": 1.0 + 2.0**-8 + 2.0**-30}, False, [x], g, "bfloat16")[0][0])
    except Exception as e:  # noqa: BLE001 (recorded, not fatal)
        return {"result": "probe failed", "error": repr(e)}
    verdicts = {0x4040: "rounded to bfloat16 through float32 first, like the spec's R(c)",
                0x4041: "not rounded first: the product of x and R32(c), rounded once (differs from R(c))",
                0x4042: "rounded once to bfloat16 (1 + 2^-7; differs from R(c) = R16(R32(c)))"}
    return {"probe": "bfloat16 x=3 * c=1+2^-8+2^-30", "y_bits": f"0x{y:04x}", "result": verdicts.get(y, "unexpected value")}


def answer_suite(adapter, answered_dir, suite):
    """Answers one suite; returns None, or the error text (and leaves no outputs) when it fails."""
    suites.remove_outputs(answered_dir, suite)
    try:
        inputs, g = suites.load_inputs(answered_dir, suite)
        values = adapter.evaluate(suite["op"], suites.suite_scalars(suite), suite.get("same", False), inputs, g,
                                  suite["dtype"])
        suites.write_outputs(answered_dir, suite, dict(zip(suites.output_names(suite), values)))
        return None
    except Exception as e:  # noqa: BLE001 (a framework failure is reported per suite)
        suites.remove_outputs(answered_dir, suite)
        return f"{type(e).__name__}: {e}"


def answer_folder(adapter, answered_dir, command=None):
    """Answers every suite of a vectors folder in place; writes and returns implementation.json."""
    index = suites.read_index(answered_dir)
    start = time.time()
    errors = []
    for suite in index["suites"]:
        why = answer_suite(adapter, answered_dir, suite)
        if why:
            errors.append({"suite": suite["id"], "error": why})
    info = adapter.info()
    info.update({
        "schema": "tapewise-frameworks.implementation/1",
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "scalars": "passed as Python floats (double), as a user would",
        "scalar_rounding": probe_scalar_rounding(adapter),
        "scalar_rounding_bfloat16": probe_bfloat16_scalar(adapter),
        "suites": len(index["suites"]),
        "suites_answered": len(index["suites"]) - len(errors),
        "errors": errors,
        "elapsed_s": round(time.time() - start, 3),
        "command": command or sys.argv,
        "cwd": os.getcwd(),
    })
    suites.write_implementation(answered_dir, info)
    return info
