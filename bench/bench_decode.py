"""Decode (seq_q ≪ seq_kv) side by side in one process: flashjit (split-KV, automatic and forced
counts) against PyTorch SDPA's cuDNN and FlashAttention-2 backends, bf16, no mask, GQA through
SDPA's enable_gqa (a backend that refuses it is recorded as unsupported, never replaced).

Each flashjit run is first checked against SDPA's math backend in fp32 on every row (the
FlashAttention rule: max error <= 2 x the same computation's in bf16 + 1e-5; NaN fails), then
everything is timed with triton.testing.do_bench (median, L2 flushed between reps) and, with
--graph, also by graph replay (bench/graph_timing.py: 24 launches in one CUDA graph, consecutive
launches on different K/V sets; no per-call event overhead). The figure is achieved bandwidth: the
bytes of K and V (each read once at least) / time; H200 copy ceiling 4.26 TB/s.

  python3 bench/bench_decode.py --out DIR          (on the GPU machine)
  python3 bench/bench_decode.py --dry-run          (anywhere: the shapes)

Writes DIR/decode.json and prints the table last.
"""
import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (batch, heads_q, heads_kv, seq_q, seq_kv): the shapes of the serving issue's table, d = 128.
SHAPES = [(1, 32, 8, 1, 32768), (8, 32, 8, 1, 8192), (64, 32, 8, 1, 4096), (1, 32, 32, 1, 32768),
          (16, 32, 8, 4, 8192), (1, 64, 8, 1, 131072)]
D = 128


def kv_bytes(b, hkv, skv, d=D):
    return 2 * b * hkv * skv * d * 2


def print_kernels(torch, launch, n=20):
    """The GPU kernels of `n` launches and their mean times (where the time goes: main vs combine)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            launch()
        torch.cuda.synchronize()
    for e in prof.key_averages():
        t = getattr(e, "device_time", 0)
        if t:
            print(f"      kernel {e.key[:60]:60s} x{e.count // n:<3d} {t:8.1f} us", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-decode")
    ap.add_argument("--splits", default="0,1", help="flashjit num_splits values to time (0 = automatic)")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--profile", action="store_true", help="also print each flashjit run's kernels (torch.profiler)")
    ap.add_argument("--shapes", default="", help="indices into the shape list to run (default: all)")
    ap.add_argument("--graph", action="store_true", help="also time every backend by CUDA graph replay")
    ap.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compile takes a while per shape)")
    args = ap.parse_args()
    splits = [int(s) for s in args.splits.split(",")]
    if args.dry_run:
        for s in SHAPES:
            print("b=%d h=%d/%d sq=%d skv=%d: %.1f MB of K and V" % (*s, kv_bytes(s[0], s[2], s[4]) / 1e6))
        return 0
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    import flashjit_ctypes as fj
    from graph_timing import graph_ms, input_sets
    torch.empty(1, device="cuda")
    rt = fj.Runtime(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, flashjit {fj.version()}", flush=True)
    kern = rt.compile(f"name: decode_d{D}\ndtype: bf16\nhead_dim: {D}\n")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []

    def add(shape, who, ms=None, status="ok", builders=None, **kw):
        """Records one run; `builders` (one launch builder per K/V set): also timed by graph replay."""
        b, hq, hkv, sq, skv = shape
        r = dict(shape=list(shape), backend=who, ms=ms, status=status, **kw)
        if ms:
            r["tb_per_s"] = kv_bytes(b, hkv, skv) / (ms * 1e-3) / 1e12
        if ms and builders:
            try:
                r["graph_ms"] = graph_ms(torch, builders)
                r["graph_tb_per_s"] = kv_bytes(b, hkv, skv) / (r["graph_ms"] * 1e-3) / 1e12
            except Exception as e:  # noqa: BLE001 — recorded: this backend's graph time is missing
                r["graph_error"] = " ".join(str(e).split())[:200]
        records.append(r)
        line = f"  {who:18s} {status:12s} " + (f"{ms * 1e3:8.1f} us {r['tb_per_s']:.2f} TB/s" if ms else "")
        if "graph_ms" in r:
            line += f"   graph {r['graph_ms'] * 1e3:8.1f} us {r['graph_tb_per_s']:.2f} TB/s"
        elif "graph_error" in r:
            line += "   graph failed: " + r["graph_error"]
        print(line, flush=True)
        (out / "decode.json").write_text(json.dumps(records, indent=1))

    shapes = [SHAPES[int(i)] for i in args.shapes.split(",")] if args.shapes else SHAPES
    for shape in shapes:
        b, hq, hkv, sq, skv = shape
        print(f"[b={b} h={hq}/{hkv} sq={sq} skv={skv}]", flush=True)
        g = torch.Generator(device="cuda").manual_seed(skv + 7 * b + hq)
        q = torch.randn(b, hq, sq, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(b, hkv, skv, D, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(b, hkv, skv, D, device="cuda", dtype=torch.bfloat16, generator=g)
        group = hq // hkv
        # Further K/V sets for graph replay, so consecutive launches do not find theirs in L2.
        sets = [(k, v)] + ([(torch.randn_like(k), torch.randn_like(v))
                            for _ in range(input_sets(kv_bytes(b, hkv, skv)) - 1)] if args.graph else [])
        # Reference on every row: fp32 math, and bf16 math as the baseline of the rule.
        kx, vx = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        ref = torch.softmax((q.float() @ kx.float().transpose(-1, -2)) / math.sqrt(D), -1) @ vx.float()
        low = (torch.softmax((q @ kx.transpose(-1, -2)) / math.sqrt(D), -1) @ vx).float()
        err_ref = (low - ref).abs().max().item()
        del kx, vx, low
        tr = lambda t: t.transpose(1, 2)
        for s in splits:
            o = torch.full_like(q, float("nan"))
            launch = kern.prepare(tr(q), tr(k), tr(v), tr(o), num_splits=s)
            launch()
            torch.cuda.synchronize()
            err = (o.float() - ref).abs().max().item()
            ok = err <= 2 * err_ref + 1e-5 and not math.isnan(err)
            msg = f"max err {err:.2e} vs 2 x {err_ref:.2e} + 1e-5"
            name = "flashjit auto" if s == 0 else f"flashjit splits={s}"
            if not ok:
                add(shape, name, status="FAILED", check=msg)
                continue
            build = [lambda ks=ks, vs=vs: kern.prepare(tr(q), tr(ks), tr(vs), tr(o), num_splits=s) for ks, vs in sets]
            add(shape, name, do_bench(launch, rep=args.rep, return_mode="median"), check=msg,
                builders=build if args.graph else None)
            if args.profile:
                print_kernels(torch, launch)
        if not args.no_flex:
            try:  # FlexAttention's decoding path (seq_q small): compiled per shape
                import torch._dynamo
                from torch.nn.attention.flex_attention import flex_attention
                torch._dynamo.reset()
                flex = torch.compile(flex_attention, dynamic=False)
                fn = lambda: flex(q, k, v, enable_gqa=group > 1)
                with torch.no_grad():
                    fn()
                    build = [lambda ks=ks, vs=vs: (lambda: flex(q, ks, vs, enable_gqa=group > 1)) for ks, vs in sets]
                    add(shape, "flex", do_bench(fn, rep=args.rep, return_mode="median"),
                        builders=build if args.graph else None)
            except Exception as e:  # noqa: BLE001 — recorded, never replaced by another backend
                add(shape, "flex", status="unsupported", error=" ".join(str(e).split())[:200])
        for who, backend in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel([backend]):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=group > 1)
                    fn()
                    torch.cuda.synchronize()
                    build = [lambda ks=ks, vs=vs: (lambda: F.scaled_dot_product_attention(q, ks, vs, enable_gqa=group > 1))
                             for ks, vs in sets]
                    add(shape, who, do_bench(fn, rep=args.rep, return_mode="median"),
                        builders=build if args.graph else None)
                    if args.profile:
                        print_kernels(torch, fn)
            except Exception as e:  # noqa: BLE001 — recorded, never replaced by another backend
                add(shape, who, status="unsupported", error=" ".join(str(e).split())[:200])
        del q, k, v, ref, sets
        torch.cuda.empty_cache()

    names = sorted({r["backend"] for r in records}, key=lambda n: (not n.startswith("flashjit"), n))
    for key, title in (("tb_per_s", "do_bench, median"), ("graph_tb_per_s", "graph replay, median of 15 x 24 launches")):
        if key == "graph_tb_per_s" and not args.graph:
            continue
        print(f"\nTB/s of K and V (bf16, d=128, no mask; {title})")
        print("%-26s" % "b, h q/kv, sq, skv" + "".join("%18s" % n for n in names))
        for shape in shapes:
            row = "%-26s" % ("%d, %d/%d, %d, %d" % tuple(shape))
            for n in names:
                r = next((r for r in records if r["shape"] == list(shape) and r["backend"] == n), None)
                row += "%18s" % ("%.2f" % r[key] if r and r.get(key) else (r["status"] if r and r["status"] != "ok" else "-"))
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
