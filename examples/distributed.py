#!/usr/bin/env python3
"""examples/distributed.py — tapewise under torch.distributed: each rank differentiates the same small
graph on its shard of a tensor with its own tape; rank 0 gathers the gradients and checks them bit for
bit against one rank's run over the whole tensor on the same kind of backend.

    torchrun --nproc-per-node 2 examples/distributed.py [--backend nccl|gloo|shared-gpu]
                                                        [--elements N] [--dtype float32|float64]

--backend nccl: one GPU per rank (cuda:LOCAL_RANK), NCCL; the default when every rank has a GPU.
--backend gloo: CPUs only, tapewise.cpu() on every rank, gloo; the default where there is no GPU.
--backend shared-gpu: every rank on cuda:0, each with its own CUDA stream and tapewise backend on it,
  gradients gathered through the host with gloo (NCCL refuses two ranks on one GPU); the default with
  one GPU and several ranks.

Every variant gathers the int view of the gradients (int32 for float32, int64 for float64): a gather
only moves bytes, but as integers no library on the way may treat them as floats (canonicalise a NaN,
flush a subnormal), so every bit, signed zeros included, arrives as sent. The device-to-host copy of
shared-gpu is a byte copy too.

Prints one PASS/FAIL line on rank 0; exit status 1 on FAIL (on every rank).
"""

import argparse
import contextlib
import datetime
import os
import sys

import torch
import torch.distributed as dist

import tapewise

VARIANTS = ("nccl", "gloo", "shared-gpu")


def make_inputs(n, dtype, device):
    """The whole tensors a, b and the seed g, the same on every rank (a fixed seed): b ties a at every
    third element, and a few zeros of both signs, so max/min ties are exercised."""
    gen = torch.Generator().manual_seed(20261130)
    a = torch.randn(n, generator=gen, dtype=torch.float64) * 2
    b = torch.randn(n, generator=gen, dtype=torch.float64) * 2
    b[::3] = a[::3]
    a[1::101], b[1::101] = 0.0, -0.0
    g = torch.rand(n, generator=gen, dtype=torch.float64) + 0.5
    return [t.to(dtype=dtype, device=device) for t in (a, b, g)]


def graph_gradients(backend, a, b, g):
    """The graph on one tape: y = clamp(max(a, b) * min(a, b), -2, 3) / (exp(max(a, b)) + 1.5 sin(b) + 2)
    (the denominator stays above 0.5); returns (y, da, db) as torch tensors (gradients zero-copy)."""
    tape = tapewise.Tape(backend)
    ta, tb = tape.leaf(a), tape.leaf(b)
    m, n = tape.max(ta, tb), tape.min(ta, tb)
    num = tape.clamp(tape.mul(m, n), -2.0, 3.0)
    den = tape.add(tape.exp(m), tape.scale(tape.sin(tb), 1.5))
    y = tape.div(num, tape.add(den, tape.leaf(torch.full_like(a, 2.0), requires_grad=False)))
    grads = tape.backward(y, g)
    # On CUDA, values and gradients are on the backend's stream, the caller's: ordered before later torch work.
    return torch.from_dlpack(tape.value(y)).clone(), torch.from_dlpack(grads[ta]), torch.from_dlpack(grads[tb])


def int_view(x):
    return x.contiguous().view(torch.int32 if x.dtype == torch.float32 else torch.int64)


def same_bits(x, y):
    return x.shape == y.shape and torch.equal(int_view(x), int_view(y))


def default_variant(world):
    gpus = torch.cuda.device_count()
    return "nccl" if gpus >= world else "shared-gpu" if gpus >= 1 else "gloo"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=VARIANTS, default=None,
                        help="nccl (a GPU per rank), gloo (CPUs), shared-gpu (every rank on cuda:0); "
                             "default: nccl with a GPU per rank, else shared-gpu with a GPU, else gloo")
    parser.add_argument("--elements", type=int, default=(1 << 20) + 6)  # not a multiple of the world size
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a collective may wait for the other ranks before failing")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    variant = args.backend or default_variant(int(os.environ.get("WORLD_SIZE", 1)))
    timeout = datetime.timedelta(seconds=args.timeout)

    if variant == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, timeout=timeout)
        collective_device = device
    else:
        device = torch.device("cuda", 0) if variant == "shared-gpu" else torch.device("cpu")
        dist.init_process_group("gloo", timeout=timeout)
        collective_device = torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()

    if device.type == "cuda":
        # The rank's own stream: its torch work and its tapewise backend are ordered on it, and ranks
        # sharing a GPU never wait on each other's queue.
        stream = torch.cuda.Stream(device)
        backend = tapewise.cuda(device=device.index, stream=stream)
    else:
        stream = None
        backend = tapewise.cpu()
    reference = {"nccl": "a one-GPU run", "shared-gpu": "a one-rank run on the same GPU",
                 "gloo": "a one-process CPU run"}[variant]

    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        a, b, g = make_inputs(args.elements, dtype, device)
        # Shards of unequal length (the last ones take the remainder), padded for gather.
        bounds = [args.elements * r // world for r in range(world + 1)]
        lo, hi = bounds[rank], bounds[rank + 1]
        _, da, db = graph_gradients(backend, a[lo:hi].contiguous(), b[lo:hi].contiguous(), g[lo:hi].contiguous())

        longest = max(bounds[r + 1] - bounds[r] for r in range(world))
        padded = torch.zeros(2, longest, dtype=dtype, device=device)
        padded[0, : hi - lo], padded[1, : hi - lo] = da, db
        sent = int_view(padded).to(collective_device)  # shared-gpu: a device-to-host byte copy
        gathered = [torch.empty_like(sent) for _ in range(world)] if rank == 0 else None
        dist.gather(sent, gathered, dst=0)

        ok = torch.ones(1, device=collective_device)
        if rank == 0:
            gathered = [t.to(device).view(dtype) for t in gathered]
            da_all = torch.cat([gathered[r][0, : bounds[r + 1] - bounds[r]] for r in range(world)])
            db_all = torch.cat([gathered[r][1, : bounds[r + 1] - bounds[r]] for r in range(world)])
            _, da_one, db_one = graph_gradients(backend, a, b, g)  # one rank, the whole tensor
            same_a, same_b = same_bits(da_all, da_one), same_bits(db_all, db_one)
            ties = int((a == b).sum())
            verdict = "PASS" if same_a and same_b else "FAIL"
            print(f"{verdict}: {world} ranks ({variant}) x tapewise on {backend.describe()}: gradients of "
                  f"{args.elements} {args.dtype} elements ({ties} max/min ties) "
                  f"{'equal' if verdict == 'PASS' else 'DIFFER FROM'} {reference} bit for bit "
                  f"(da {'ok' if same_a else 'differs'}, db {'ok' if same_b else 'differs'})", flush=True)
            ok.fill_(1.0 if verdict == "PASS" else 0.0)
        dist.broadcast(ok, src=0)
    dist.destroy_process_group()
    return 0 if ok.item() == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
