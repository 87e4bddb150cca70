"""conform/frameworks/forms.py — each node as a user of PyTorch or JAX would write it, keyed by the node's
name (spec/ops.def): the one registry of framework forms, which the audit's adapters (adapters.py) run
under autograd and the benchmark's peers (bench/bench_torch.py) time. Not tapewise's formulas: the
frameworks' own ops. test_frameworks.py checks the keys against tapewise.op_table().

Every form takes the node's tensors, then the scalars as a dict {scalar name: Python float}. The
framework modules are parameters, so the tables can be built (and their keys read) without importing
a framework: no form touches its module until it is called.
"""


def torch_forms(torch, F):
    """PyTorch's natural op per node; `torch` is the module, `F` torch.nn.functional."""
    return {
        "add": lambda a, b, s: torch.add(a, b),
        "sub": lambda a, b, s: torch.sub(a, b),
        "mul": lambda a, b, s: torch.mul(a, b),
        "neg": lambda x, s: torch.neg(x),
        "scale": lambda x, s: x * s["c"],
        "abs": lambda x, s: torch.abs(x),
        "sqrt": lambda x, s: torch.sqrt(x),
        "clamp": lambda x, s: torch.clamp(x, s["lo"], s["hi"]),
        "max": lambda a, b, s: torch.maximum(a, b),
        "min": lambda a, b, s: torch.minimum(a, b),
        "div": lambda a, b, s: torch.div(a, b),
        "relu": lambda x, s: torch.relu(x),
        "exp": lambda x, s: torch.exp(x),
        "sin": lambda x, s: torch.sin(x),
        "cos": lambda x, s: torch.cos(x),
        "log": lambda x, s: torch.log(x),
        "inv": lambda x, s: torch.reciprocal(x),
        "safeLog": lambda x, s: torch.log(F.softplus(x) + s["eps"]),
        "sigmoid": lambda x, s: torch.sigmoid(x),
        "tanh": lambda x, s: torch.tanh(x),
        "silu": lambda x, s: F.silu(x),
        "gelu": lambda x, s: F.gelu(x, approximate="tanh"),
        "softplus": lambda x, s: F.softplus(x),
    }


def jax_forms(jax, jnp):
    """JAX's natural op per node; `jax` is the module, `jnp` jax.numpy."""
    return {
        "add": lambda a, b, s: jnp.add(a, b),
        "sub": lambda a, b, s: jnp.subtract(a, b),
        "mul": lambda a, b, s: jnp.multiply(a, b),
        "neg": lambda x, s: jnp.negative(x),
        "scale": lambda x, s: x * s["c"],
        "abs": lambda x, s: jnp.abs(x),
        "sqrt": lambda x, s: jnp.sqrt(x),
        "clamp": lambda x, s: jnp.clip(x, s["lo"], s["hi"]),
        "max": lambda a, b, s: jnp.maximum(a, b),
        "min": lambda a, b, s: jnp.minimum(a, b),
        "div": lambda a, b, s: jnp.divide(a, b),
        "relu": lambda x, s: jax.nn.relu(x),
        "exp": lambda x, s: jnp.exp(x),
        "sin": lambda x, s: jnp.sin(x),
        "cos": lambda x, s: jnp.cos(x),
        "log": lambda x, s: jnp.log(x),
        "inv": lambda x, s: jnp.reciprocal(x),
        "safeLog": lambda x, s: jnp.log(jax.nn.softplus(x) + s["eps"]),
        "sigmoid": lambda x, s: jax.nn.sigmoid(x),
        "tanh": lambda x, s: jnp.tanh(x),
        "silu": lambda x, s: jax.nn.silu(x),
        "gelu": lambda x, s: jax.nn.gelu(x, approximate=True),
        "softplus": lambda x, s: jax.nn.softplus(x),
    }


# Each framework's registry, by the name the audit gives the framework.
REGISTRIES = {"torch": torch_forms, "jax": jax_forms}


def missing_forms(framework, node_names):
    """The nodes of `node_names` (the op table's) that `framework`'s registry has no form for."""
    keys = REGISTRIES[framework](None, None).keys()
    return sorted(set(node_names) - set(keys))
