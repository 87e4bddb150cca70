#!/usr/bin/env python3
"""examples/distributed.py — tapewise under torch.distributed (NCCL): each rank differentiates the same
small graph on its shard of a tensor with its own tape on its own GPU; rank 0 gathers the gradients and
checks them bit for bit against a one-GPU run over the whole tensor.

    torchrun --nproc-per-node 2 examples/distributed.py [--elements N] [--dtype float32|float64]

Prints one PASS/FAIL line on rank 0; exit status 1 on FAIL (on every rank).
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist

import tapewise


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
    # Values and gradients are on the backend's stream, the caller's: ordered before later torch work.
    return torch.from_dlpack(tape.value(y)).clone(), torch.from_dlpack(grads[ta]), torch.from_dlpack(grads[tb])


def same_bits(x, y):
    int_type = torch.int32 if x.dtype == torch.float32 else torch.int64
    return x.shape == y.shape and torch.equal(x.contiguous().view(int_type), y.contiguous().view(int_type))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=(1 << 20) + 6)  # not a multiple of the world size
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank)

    a, b, g = make_inputs(args.elements, dtype, device)
    # Shards of unequal length (the last ones take the remainder), padded for all_gather.
    bounds = [args.elements * r // world for r in range(world + 1)]
    lo, hi = bounds[rank], bounds[rank + 1]
    backend = tapewise.cuda(device=local_rank, stream=torch.cuda.current_stream().cuda_stream)
    _, da, db = graph_gradients(backend, a[lo:hi].contiguous(), b[lo:hi].contiguous(), g[lo:hi].contiguous())

    longest = max(bounds[r + 1] - bounds[r] for r in range(world))
    padded = torch.zeros(2, longest, dtype=dtype, device=device)
    padded[0, : hi - lo], padded[1, : hi - lo] = da, db
    gathered = [torch.empty_like(padded) for _ in range(world)] if rank == 0 else None
    dist.gather(padded, gathered, dst=0)

    ok = torch.ones(1, device=device)
    if rank == 0:
        da_all = torch.cat([gathered[r][0, : bounds[r + 1] - bounds[r]] for r in range(world)])
        db_all = torch.cat([gathered[r][1, : bounds[r + 1] - bounds[r]] for r in range(world)])
        _, da_one, db_one = graph_gradients(backend, a, b, g)  # one GPU, the whole tensor
        same_a, same_b = same_bits(da_all, da_one), same_bits(db_all, db_one)
        ties = int((a == b).sum())
        verdict = "PASS" if same_a and same_b else "FAIL"
        print(f"{verdict}: {world} ranks x tapewise on {backend.describe()}: gradients of {args.elements} "
              f"{args.dtype} elements ({ties} max/min ties) {'equal' if verdict == 'PASS' else 'DIFFER FROM'} "
              f"a one-GPU run bit for bit (da {'ok' if same_a else 'differs'}, db {'ok' if same_b else 'differs'})",
              flush=True)
        ok.fill_(1.0 if verdict == "PASS" else 0.0)
    dist.broadcast(ok, src=0)
    dist.destroy_process_group()
    return 0 if ok.item() == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
