"""Where a tapewise.torch region's extra time over Tape goes on the GPU machine (run 27)."""
import cProfile, gc, pstats, sys, time
import torch, tapewise, tapewise.torch as twt
sys.path.insert(0, "tools/bench")
import bench_torch_nodes as b

N = 1000
dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
x = torch.rand(4096, device=dev, requires_grad=True); g = torch.rand(4096, device=dev)
v = b.chain_variants(N)
sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

def record_only_tape():
    t = tapewise.Tape(twt.backend_for(x)); l = t.leaf(x.detach())
    b.chain(t, l, N); t.flush()

def record_only_region():
    t = tapewise.Tape(twt.backend_for(x)); l = t.leaf(x.detach())
    reg = twt._Region(t, "r"); b.chain(twt, twt._Value(reg, l), N); t.flush()

region = twt.region(lambda u: b.chain(twt, u, N))
def region_forward_only():
    return region(x)

def region_no_grad_call():
    y = region(x); return torch.autograd.grad(y, x, g)[0]

def best(f, reps=30):
    f(); sync(); out = []
    for _ in range(reps):
        sync(); t0 = time.perf_counter(); f(); sync(); out.append(time.perf_counter() - t0)
    out.sort(); return out[0] / N * 1e6, out[len(out) // 2] / N * 1e6

cases = {"tape": lambda: v["tapewise.Tape"](x, g), "region": lambda: v["tapewise.torch region"](x, g),
         "record_only_tape": record_only_tape, "record_only_region": record_only_region,
         "region_forward_only": region_forward_only}
for gc_on in (True, False):
    (gc.enable if gc_on else gc.disable)()
    for name, f in cases.items():
        lo, med = best(f)
        print(f"gc {'on ' if gc_on else 'off'} {name:22s} best {lo:.3f}  median {med:.3f} us/node")
gc.enable()
pr = cProfile.Profile(); pr.enable()
for _ in range(20): cases["region"]()
sync(); pr.disable()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(18); st.sort_stats("cumtime").print_stats(25)
