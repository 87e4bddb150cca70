#!/usr/bin/env python3
"""examples/python_quickstart.py — record a few tapewise nodes on numpy arrays, differentiate them, and
read values and gradients back without copies (CPU backend; pass --cuda for the GPU)."""

import sys

import numpy as np

import tapewise

backend = tapewise.cuda() if "--cuda" in sys.argv else tapewise.cpu()
print(backend.describe())

tape = tapewise.Tape(backend)
a = tape.leaf(np.array([-1.0, 0.5, 2.0, 3.0]), copy=True)  # copy=True also moves host data to a GPU
b = tape.leaf(np.array([0.5, 0.5, -1.0, 4.0]), copy=True)
m = tape.max(a, b)                                          # a tie at index 1: each side gets g/2
y = tape.div(tape.clamp(tape.mul(tape.sin(a), m), -1.0, 1.0), tape.exp(b))

grads = tape.backward(y, np.ones(4))                        # the seed: dy = 1 at every element
print("y  =", tape.host(y))
print("da =", grads.host(a))                                # host copies; grads[a] is a zero-copy
print("db =", grads.host(b))                                # DLPack array (torch.from_dlpack(...))

try:
    tape.add(a, tape.leaf(np.ones(3)))
except tapewise.ShapeMismatchError as e:                    # every failure: a TapewiseError with .code
    print("error:", e.code, "-", e.message)

# staged (the spec's stages, one buffer op each) gives the fused path's bits
staged = tape.backward(y, np.ones(4), path="staged")
assert (grads.host(a).view(np.uint64) == staged.host(a).view(np.uint64)).all()
print("fused == staged, bit for bit; live buffers:", backend.stats())
