"""tapewise.torch._native — the C++ nodes: native/torch_nodes.cpp (the same two Functions as _nodes'
in C++), built against the installed torch on first use and cached (TAPEWISE_TORCH_NATIVE,
TAPEWISE_TORCH_NATIVE_DIR), then loaded once per process. Which nodes run (C++ or Python) is chosen
in _ops, beside the ops that call them."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import torch

import tapewise

from ._nodes import _OP_INDEX, _check_same, _dtype_code, backend_for

# The native nodes: the same two Functions in C++ (tapewise/native/torch_nodes.cpp), built against the
# installed torch on the first node call and cached, so that PyTorch's autograd runs a node with no
# Python. _ops' first node call binds the ops to these C++ nodes or to _nodes' Python Functions
# (TAPEWISE_TORCH_NATIVE, node_path()). The sources are the package's native/ folder
# (python/tapewise/native), one level above this file's.
_NATIVE_SOURCES = Path(__file__).resolve().parent.parent / "native"
_STALE_LOCK_SECONDS = 15 * 60  # a build takes under a minute; an older lock was left by a killed one


def _native_mode() -> str:
    mode = os.environ.get("TAPEWISE_TORCH_NATIVE", "auto").strip().lower() or "auto"
    if mode not in ("auto", "1", "0"):
        raise ValueError(f"tapewise.torch: TAPEWISE_TORCH_NATIVE={os.environ['TAPEWISE_TORCH_NATIVE']!r} is not "
                         "auto (the default: the C++ nodes, else the Python ones with a warning), 1 (the C++ nodes, "
                         "or an error) or 0 (the Python nodes)")
    return mode


def _native_build_dir() -> tuple[str, Path]:
    """The extension's module name and build folder: one per (source, torch build, Python), so that a
    new torch or tapewise builds afresh and never loads a library built against another."""
    digest = hashlib.sha256()
    for part in (_NATIVE_SOURCES / "torch_nodes.cpp", _NATIVE_SOURCES / "node_kernels.h"):
        digest.update(part.read_bytes())
    for part in (torch.__version__, getattr(torch.version, "git_version", ""), sys.version,
                 str(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", ""))):
        digest.update(part.encode())
    name = f"tapewise_torch_nodes_{digest.hexdigest()[:16]}"
    root = os.environ.get("TAPEWISE_TORCH_NATIVE_DIR")
    if not root:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(cache, "tapewise", "torch_nodes")
    return name, Path(root) / name


_native_module = None  # (module, library path) once loaded: a process loads the library once


def _load_native():
    """The C++ nodes' module, initialised, and its library's path: imported from the cache, or built
    there first (18-50 s, once per torch build). Raises whatever stops either."""
    global _native_module
    if _native_module is not None:
        return _native_module
    name, build_dir = _native_build_dir()
    library = build_dir / f"{name}{'.pyd' if sys.platform == 'win32' else '.so'}"  # cpp_extension's LIB_EXT
    if library.is_file():
        spec = importlib.util.spec_from_file_location(name, library)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        from torch.utils import cpp_extension  # only to build: importing it costs a fresh process 0.1-0.5 s

        build_dir.mkdir(parents=True, exist_ok=True)
        lock = build_dir / "lock"
        if lock.exists() and time.time() - lock.stat().st_mtime > _STALE_LOCK_SECONDS:
            lock.unlink()  # older torch waits on a lock file's mere existence, for ever
        print(f"tapewise.torch: building its C++ autograd nodes against torch {torch.__version__}, once "
              f"(cached in {build_dir}; TAPEWISE_TORCH_NATIVE=0 skips this)", file=sys.stderr, flush=True)
        module = cpp_extension.load(name, [str(_NATIVE_SOURCES / "torch_nodes.cpp")],
                                    extra_include_paths=[str(_NATIVE_SOURCES)], extra_cflags=["-O2"],
                                    build_directory=str(build_dir), verbose=False)
    module.init(tapewise._tapewise._node_kernels(), _refuse, _OP_INDEX["max"], _OP_INDEX["min"])
    # The custom ops' C++ kernels (tapewise.torch._custom_ops defines the ops): compiled code calls them.
    module.register_op_kernels([(row["name"], _OP_INDEX[row["name"]], row["arity"], len(row["scalars"]))
                                for row in tapewise.op_table()])
    _native_module = (module, str(library))
    return _native_module


def _refuse(op_index, a, b):
    """Raises the Python path's error for inputs the C++ nodes do not take (they call this)."""
    node = tapewise.NODE_NAMES[op_index]
    _dtype_code(a, "x" if b is None else "a")
    if b is not None:
        _check_same(a, b, node)
    backend_for(a)  # a device other than cpu or cuda
    raise RuntimeError(f"tapewise.torch.{node}: the C++ node refused inputs that the Python node takes")
