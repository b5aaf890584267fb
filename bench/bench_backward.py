#!/usr/bin/env python3
"""Training-step benchmark: forward, backward and forward+backward of flashjit and its peers (SDPA
cuDNN, SDPA FlashAttention-2, compiled FlexAttention) side by side in one process, on the cases of
bench.py (same suites, shapes, masks and scores).

Times follow FlashAttention's convention: the backward is (forward+backward) - forward, both
timed with do_bench; TFLOP/s count 1x / 2.5x / 3.5x the forward FLOPs (bench.Case.flops, the mask's
density included). flashjit's backward is also timed alone (its kernels without the forward).
flashjit's gradients are compared with the first peer's that ran (max |diff| / max |peer|): a
sanity check, printed, not a verdict; tests/test_gpu_backward.cpp verifies against fp64.

    python3 bench/bench_backward.py --suite standard --dims 64,128 --out OUT
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", nargs="+", default=["standard"])
    ap.add_argument("--dims", type=lambda t: [int(x) for x in t.split(",")])
    ap.add_argument("--seqs", type=lambda t: [int(x) for x in t.split(",")])
    ap.add_argument("--filter", default="")
    ap.add_argument("--map-per-call", action="store_true",
                    help="rebuild flashjit's backward block maps before every launch instead of once")
    ap.add_argument("--backends", type=lambda t: t.split(","), default=["flashjit", "sdpa-cudnn", "sdpa-flash", "flex"])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("BENCH_BUDGET_S", "0")))
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    import flashjit_ctypes as fj
    torch.backends.cuda.matmul.allow_tf32 = False
    import torch._dynamo
    torch._dynamo.config.recompile_limit = 1000
    torch._dynamo.config.accumulated_recompile_limit = 10000
    dev = "cuda"
    torch.empty(1, device=dev)
    rt = fj.Runtime(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, flashjit {fj.version()}", flush=True)
    records = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def t(fn):
        return do_bench(fn, warmup=25, rep=100, return_mode="median")

    def record(case, name, fwd, fwdbwd, bwd_alone=None, **extra):
        f = case.flops()
        r = dict(name=name, suite=case.suite, b=case.b, h=case.h, s=case.s, d=case.d, mask=case.mask.name,
                 score=case.score.name if case.score.fj_score else None, fwd_ms=fwd, fwdbwd_ms=fwdbwd,
                 bwd_ms=fwdbwd - fwd, fwd_tflops=f / fwd / 1e9, bwd_tflops=2.5 * f / (fwdbwd - fwd) / 1e9,
                 fwdbwd_tflops=3.5 * f / fwdbwd / 1e9, **extra)
        if bwd_alone:
            r["bwd_alone_ms"] = bwd_alone
            r["bwd_alone_tflops"] = 2.5 * f / bwd_alone / 1e9
        records.append(r)
        print(f"  {name:11s} fwd {r['fwd_tflops']:6.1f}  bwd {r['bwd_tflops']:6.1f}  fwd+bwd {r['fwdbwd_tflops']:6.1f}"
              f" TFLOP/s" + (f"  (bwd alone {r['bwd_alone_tflops']:.1f})" if bwd_alone else ""), flush=True)
        with open(out / "bench_backward.json.tmp", "w") as fh:
            json.dump(records, fh, indent=1)
        os.replace(out / "bench_backward.json.tmp", out / "bench_backward.json")

    cases = [c for c in B.build_cases(args.suite, args.dims, args.seqs) if args.filter in c.id]
    t0 = time.time()
    for i, case in enumerate(cases):
        if args.budget_s and time.time() - t0 > args.budget_s:
            print(f"time budget spent: {len(cases) - i} case(s) not run")
            break
        print(f"\n[{i + 1}/{len(cases)}] {case.id}", flush=True)
        gen = torch.Generator(device=dev).manual_seed(hash((case.s, case.d, case.b)) & 0xFFFFFFFF)
        q, k, v, d_o = (torch.randn(case.b, case.h, case.s, case.d, device=dev, dtype=torch.bfloat16, generator=gen)
                        for _ in range(4))
        mask_fn = case.mask.torch_fn(case.s, dev)
        buffers = dict(case.mask.buffers(case.s, dev))
        buffers.update(case.score.buffers(case.h, dev))
        ref_grads = None

        def peer(name, attn):
            nonlocal ref_grads
            qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))

            def fb():
                o = attn(qg, kg, vg)
                return torch.autograd.grad(o, (qg, kg, vg), d_o)
            try:
                grads = fb()
                torch.cuda.synchronize()
            except Exception as e:
                print(f"  {name:11s} unsupported: {B.short(e, 200)}", flush=True)
                return
            if ref_grads is None:
                ref_grads = (name, grads)
            with torch.no_grad():
                fwd = t(lambda: attn(q, k, v))
            record(case, name, fwd, t(fb))

        plain = case.score.fj_score is None and case.mask.name in ("none", "causal")
        for name in args.backends:
            if name in ("sdpa-cudnn", "sdpa-flash") and plain:
                be = SDPBackend.CUDNN_ATTENTION if name == "sdpa-cudnn" else SDPBackend.FLASH_ATTENTION

                def attn(a, b_, c, be=be):
                    with sdpa_kernel([be]):
                        return F.scaled_dot_product_attention(a, b_, c, is_causal=case.causal)
                peer(name, attn)
            elif name == "flex":
                from torch.nn.attention.flex_attention import create_block_mask, flex_attention
                torch._dynamo.reset()
                flex = torch.compile(flex_attention, dynamic=False)
                bm = None
                if mask_fn is not None:
                    mf = mask_fn
                    bm = create_block_mask(lambda b_, h, qi, ki: mf(qi, ki), None, None, case.s, case.s, device=dev)
                score_mod = case.score.flex_fn(dev, case.h)
                peer("flex", lambda a, b_, c: flex(a, b_, c, score_mod=score_mod, block_mask=bm))

        if "flashjit" in args.backends:
            tr = lambda x: x.transpose(1, 2)  # [b, h, s, d] storage seen as [b, s, h, d]
            try:
                kern = rt.compile(case.spec_yaml())
                kern.wait_full()  # time the full kernel, not a tiered compile's quick form
            except fj.FlashjitError as e:
                print(f"  flashjit    unsupported: {B.short(e.message, 300)}", flush=True)
                continue
            o = torch.empty_like(q)
            lse = torch.empty(case.b, case.h, case.s, device=dev, dtype=torch.float32)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            params = case.score.param_values or None
            # A mask reading tensors gets its block maps built once, forward and backward, as Flex's
            # block mask (kv_indices and q_indices) is.
            mapped = B.has_block_map(kern)
            fwd = kern.prepare(tr(q), tr(k), tr(v), tr(o), lse=lse, params=params, buffers=buffers or None,
                               block_map=mapped)
            bwd = kern.prepare_backward(tr(q), tr(k), tr(v), tr(o), tr(d_o), tr(dq), tr(dk), tr(dv), lse,
                                        params=params, buffers=buffers or None,
                                        block_map=mapped and not args.map_per_call)
            fwd()
            bwd()
            torch.cuda.synchronize()
            extra = {}
            if ref_grads is not None:
                diffs = [((g - r).abs().max() / r.abs().max()).item() for g, r in zip((dq, dk, dv), ref_grads[1])]
                extra["grad_vs"] = f"{ref_grads[0]}: " + ", ".join(f"{x:.2e}" for x in diffs)
                print(f"  flashjit gradients vs {extra['grad_vs']} (max |diff| / max |peer|)", flush=True)
            finite = all(torch.isfinite(g).all().item() for g in (dq, dk, dv))
            if not finite:
                print("  flashjit    non-finite gradients", flush=True)
                continue
            record(case, "flashjit", t(fwd), t(lambda: (fwd(), bwd())), bwd_alone=t(bwd), **extra)
            kern.close()
        del q, k, v, d_o
        torch.cuda.empty_cache()

    try:
        plot(records, out / "bench_backward.png")
    except Exception as e:  # a plot is a convenience: the JSON and the table are the record
        print(f"plot failed: {type(e).__name__}: {B.short(e, 200)}")
    print("\n| case | backend | fwd | bwd | fwd+bwd | bwd vs FA2 | bwd vs cuDNN | bwd vs Flex |")
    print("|---|---|---|---|---|---|---|---|")
    by_case = {}
    for r in records:
        by_case.setdefault((r["suite"], r["d"], r["s"], r["mask"], r["score"]), {})[r["name"]] = r
    for key, rs in by_case.items():
        for name, r in rs.items():
            rel = [f"{r['bwd_tflops'] / rs[p]['bwd_tflops']:.2f}" if p in rs and name == "flashjit" else ""
                   for p in ("sdpa-flash", "sdpa-cudnn", "flex")]
            print(f"| d={key[1]} s={key[2]} {key[3]}{' ' + key[4] if key[4] else ''} | {name} | "
                  f"{r['fwd_tflops']:.0f} | {r['bwd_tflops']:.0f} | {r['fwdbwd_tflops']:.0f} | " + " | ".join(rel) + " |")
    return 0


def plot(records, path):
    """Forward, backward and forward+backward TFLOP/s against the sequence length: a column per
    (head dim, mask, score), a row per pass."""
    plt = B.pyplot()
    if plt is None:
        return
    panels = {}
    for r in records:
        panels.setdefault((r["d"], r["mask"] + ("+" + r["score"] if r["score"] else "")), []).append(r)
    if not panels:
        return
    keys = sorted(panels)
    rows = (("fwd_tflops", "forward"), ("bwd_tflops", "backward"), ("fwdbwd_tflops", "forward+backward"))
    fig, axes = plt.subplots(len(rows), len(keys), figsize=(4.2 * len(keys), 3.4 * len(rows)), squeeze=False)
    for col, key in enumerate(keys):
        for row, (metric, what) in enumerate(rows):
            B.draw_series(axes[row][col], panels[key], metric, f"{what}: d={key[0]} mask={key[1]}")
    fig.suptitle("training step, bf16, 16k tokens, hidden 2048: useful TFLOP/s (backward = 2.5x forward FLOPs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


if __name__ == "__main__":
    sys.exit(main())
