# evidence/memory/kept_gradients.py — memory held by kept small buffers: 300 tapes, each a chain of 20
# nodes at 2^16 float32 elements (more than one 4 MiB slab) plus a 1-element leaf whose gradient is
# kept. Prints the process's resident memory growth and, where the build has them, the backend's held
# bytes before and after trim(). Usage: python3 kept_gradients.py LABEL
import gc
import sys

import numpy as np

import tapewise

MiB = 1 << 20


def resident_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


backend = tapewise.cpu()
start = resident_bytes()
kept = []
for _ in range(300):
    tape = tapewise.Tape(backend)
    tape.program_threshold = 0
    x = tape.leaf(np.full(1 << 16, 0.5, dtype=np.float32), copy=True)
    for _ in range(20):
        x = tape.neg(x)
    small = tape.leaf(np.array([0.25], dtype=np.float32), copy=True)
    kept.append(tape.backward(tape.sin(small), np.ones(1, dtype=np.float32))[small])
    del tape
gc.collect()
print(f"{sys.argv[1]}: resident memory grew {(resident_bytes() - start) / MiB:.1f} MiB; "
      f"live gradients {backend.stats()['gradient']}")
if hasattr(backend, "memory_stats"):
    print(f"  memory_stats (MiB): { {k: round(v / MiB, 3) for k, v in backend.memory_stats().items()} }")
    print(f"  trim gave back {backend.trim() / MiB:.1f} MiB; resident memory grew "
          f"{(resident_bytes() - start) / MiB:.1f} MiB; memory_stats (MiB): "
          f"{ {k: round(v / MiB, 3) for k, v in backend.memory_stats().items()} }")
