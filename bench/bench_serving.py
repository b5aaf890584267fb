"""Serving suites side by side in one process on the GPU machine: packed (varlen) batches and paged
K/V caches. The decode suite is bench_decode.py.

varlen: 16k tokens packed from documents of random lengths (seeded), bf16, d 64 and 128 with
  hidden 2048 (heads = 2048 / d), attention within each document, not causal and causal.
  flashjit: its varlen API (cu_seqlens) on the packed tokens;
  flex: compiled FlexAttention on the packed sequence with the document mask (doc[q] == doc[kv],
        and q >= kv when causal), its block mask built once outside the timing;
  sdpa-cudnn / sdpa-flash: SDPA on the padded batch [documents, longest, heads, d] (the padding
        copies are not timed). Causal on the padded batch is exact for the real rows; not causal,
        the padded keys are not masked (a key-padding mask would push SDPA off these backends),
        so the work is that of a masked run and its time a lower bound for one.
  TFLOP/s counts the visible pairs only: 4 · d · heads · sum over documents of visible pairs.
paged: the decode shapes of bench_decode.py with the K/V cache in pages of 16 and 256 rows under a
  shuffled block table, against flashjit on the same cache contiguous (the issue's bar: within 5%)
  and SDPA cuDNN on the contiguous cache. Bandwidth = bytes of K and V / time.

Every flashjit run is first checked against an fp32 computation on sampled rows (max error <= 2 x
the same computation's in bf16 + 1e-5; NaN fails); a failed check is recorded and not timed.
Timing: triton.testing.do_bench, median, L2 flushed between reps; with --graph the paged suite is
also timed by graph replay (bench/graph_timing.py; one K/V set, the same for every backend).

  python3 bench/bench_serving.py --suite varlen,paged --out DIR     (on the GPU machine)
  python3 bench/bench_serving.py --dry-run                          (anywhere: the shapes)
"""
import argparse
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOKENS = 16384
HIDDEN = 2048
DOC_COUNTS = (8, 32)
PAGE_SIZES = (16, 256)
# (batch, heads_q, heads_kv, seq_q, seq_kv), d = 128: bench_decode.py's shapes.
PAGED_SHAPES = [(1, 32, 8, 1, 32768), (8, 32, 8, 1, 8192), (64, 32, 8, 1, 4096), (16, 32, 8, 4, 8192)]
PAGED_D = 128


def doc_lengths(n, total, seed):
    """n non-empty documents of random lengths summing to total (seeded)."""
    cuts = sorted(random.Random(seed * 1000003 + total).sample(range(1, total), n - 1))
    bounds = [0] + cuts + [total]
    return [bounds[i + 1] - bounds[i] for i in range(n)]


def visible_pairs(lengths, causal):
    return sum(n * (n + 1) // 2 if causal else n * n for n in lengths)


class Records:
    def __init__(self, out):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.rows = []

    def add(self, case, who, ms=None, status="ok", **kw):
        r = dict(case=case, backend=who, ms=ms, status=status, **kw)
        self.rows.append(r)
        fig = ""
        if ms and "flops" in kw:
            r["tflops"] = kw["flops"] / (ms * 1e-3) / 1e12
            fig = f"{r['tflops']:.1f} TFLOP/s"
        if ms and "bytes" in kw:
            r["tb_per_s"] = kw["bytes"] / (ms * 1e-3) / 1e12
            fig = f"{r['tb_per_s']:.2f} TB/s"
            if kw.get("graph_ms"):
                r["graph_tb_per_s"] = kw["bytes"] / (kw["graph_ms"] * 1e-3) / 1e12
                fig += f"   graph {kw['graph_ms'] * 1e3:9.1f} us {r['graph_tb_per_s']:.2f} TB/s"
            elif kw.get("graph_error"):
                fig += "   graph failed: " + kw["graph_error"]
        print(f"  {who:18s} {status:12s} " + (f"{ms * 1e3:9.1f} us {fig}" if ms else ""), flush=True)
        (self.out / "serving.json").write_text(json.dumps(self.rows, indent=1))


def kernel(ctx, key, spec_yaml):
    """One compiled kernel per spec for the whole run (its tunings then carry over between cases)."""
    if key not in ctx["kernels"]:
        ctx["kernels"][key] = ctx["rt"].compile(spec_yaml)
    return ctx["kernels"][key]


def rule_check(out_rows, ref_rows, low_rows):
    err = (out_rows.float() - ref_rows).abs().max().item()
    base = (low_rows.float() - ref_rows).abs().max().item()
    ok = err <= 2 * base + 1e-5 and not math.isnan(err)
    return ok, f"max err {err:.2e} vs 2 x {base:.2e} + 1e-5"


def rows_attention(torch, q, k, v, rows, causal, dtype):
    """Attention of query rows `rows` (indices into q [S, H, D]) over k, v [S, H, D] in `dtype`."""
    qs = q[rows].to(dtype).transpose(0, 1)                         # [H, R, D]
    s = (qs @ k.to(dtype).permute(1, 2, 0)) / math.sqrt(q.shape[-1])  # [H, R, S]
    if causal:
        kv = torch.arange(k.shape[0], device=q.device)
        s = s.masked_fill(kv[None, None, :] > rows[None, :, None], float("-inf"))
    return (torch.softmax(s, -1) @ v.to(dtype).transpose(0, 1)).transpose(0, 1)  # [R, H, D]


def run_varlen(ctx, rec, d, n_docs, causal):
    torch, F, fj, do_bench = ctx["torch"], ctx["F"], ctx["fj"], ctx["do_bench"]
    heads = HIDDEN // d
    lengths = doc_lengths(n_docs, TOKENS, seed=n_docs)
    case = f"varlen d={d} docs={n_docs} {'causal' if causal else 'none'}"
    print(f"[{case}] lengths {lengths}", flush=True)
    flops = 4 * d * heads * visible_pairs(lengths, causal)
    g = torch.Generator(device="cuda").manual_seed(d * 100 + n_docs)
    q, k, v = (torch.randn(TOKENS, heads, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    cu = torch.tensor(offsets, dtype=torch.int32, device="cuda")
    kern = kernel(ctx, (d, causal), f"name: varlen_d{d}\ndtype: bf16\nhead_dim: {d}\n" + ("mask: causal\n" if causal else ""))
    o = torch.full_like(q, float("nan"))
    launch = kern.prepare(q, k, v, o, cu_seqlens_q=cu, cu_seqlens_kv=cu, max_seqlen_q=max(lengths),
                          max_seqlen_kv=max(lengths))
    launch()
    torch.cuda.synchronize()
    ok, msg = True, ""
    for b, n in enumerate(lengths):  # the first, last and 30 spread rows of every document
        lo = offsets[b]
        local = sorted({0, n - 1} | {int(i * (n - 1) / 29) for i in range(30)})
        rows = torch.tensor(local, device="cuda")
        qd, kd, vd = q[lo:lo + n], k[lo:lo + n], v[lo:lo + n]
        ref = rows_attention(torch, qd, kd, vd, rows, causal, torch.float32)
        low = rows_attention(torch, qd, kd, vd, rows, causal, torch.bfloat16)
        good, m = rule_check(o[lo + rows], ref, low)
        if not good or not msg:
            msg = f"document {b}: {m}"
        ok = ok and good
        if not good:
            break
    if ok:
        rec.add(case, "flashjit", do_bench(launch, rep=ctx["rep"], return_mode="median"), flops=flops, check=msg)
    else:
        rec.add(case, "flashjit", status="FAILED", flops=flops, check=msg)
    # FlexAttention on the packed sequence with the document mask.
    try:
        import torch._dynamo
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        torch._dynamo.reset()
        flex = torch.compile(flex_attention, dynamic=False)
        doc = torch.repeat_interleave(torch.arange(n_docs, device="cuda"), torch.tensor(lengths, device="cuda"))
        if causal:
            mm = lambda b, h, qi, ki: (doc[qi] == doc[ki]) & (qi >= ki)
        else:
            mm = lambda b, h, qi, ki: doc[qi] == doc[ki]
        bm = create_block_mask(mm, None, None, TOKENS, TOKENS, device="cuda")
        qt, kt, vt = (t.transpose(0, 1).unsqueeze(0) for t in (q, k, v))
        fn = lambda: flex(qt, kt, vt, block_mask=bm)
        with torch.no_grad():
            fn()
        rec.add(case, "flex", do_bench(fn, rep=ctx["rep"], return_mode="median"), flops=flops)
    except Exception as e:  # noqa: BLE001 — recorded, never replaced
        rec.add(case, "flex", status="unsupported", flops=flops, error=" ".join(str(e).split())[:200])
    # SDPA on the padded batch.
    longest = max(lengths)
    pad = [torch.zeros(n_docs, heads, longest, d, device="cuda", dtype=torch.bfloat16) for _ in range(3)]
    for b, n in enumerate(lengths):
        for p, t in zip(pad, (q, k, v)):
            p[b, :, :n] = t[offsets[b]:offsets[b] + n].transpose(0, 1)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for who, backend in (("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION), ("sdpa-flash", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel([backend]):
                fn = lambda: F.scaled_dot_product_attention(*pad, is_causal=causal)
                fn()
                torch.cuda.synchronize()
                rec.add(case, who + " padded", do_bench(fn, rep=ctx["rep"], return_mode="median"), flops=flops)
        except Exception as e:  # noqa: BLE001
            rec.add(case, who + " padded", status="unsupported", flops=flops, error=" ".join(str(e).split())[:200])
    del pad, q, k, v, o
    torch.cuda.empty_cache()


def run_paged(ctx, rec, shape):
    torch, F, fj, do_bench = ctx["torch"], ctx["F"], ctx["fj"], ctx["do_bench"]
    b, hq, hkv, sq, skv = shape
    d = PAGED_D
    case = f"paged b={b} h={hq}/{hkv} sq={sq} skv={skv}"
    print(f"[{case}]", flush=True)
    nbytes = 2 * b * hkv * skv * d * 2
    g = torch.Generator(device="cuda").manual_seed(skv + b)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    group = hq // hkv
    rows = torch.arange(sq, device="cuda")
    checks = []
    for bi in sorted({0, b - 1}):  # reference rows of the first and last sequence, bottom-right causal-free
        ref = rows_attention(torch, q[bi], k[bi].repeat_interleave(group, 1), v[bi].repeat_interleave(group, 1),
                             rows, False, torch.float32)
        low = rows_attention(torch, q[bi], k[bi].repeat_interleave(group, 1), v[bi].repeat_interleave(group, 1),
                             rows, False, torch.bfloat16)
        checks.append((bi, ref, low))
    kern = kernel(ctx, ("decode", d), f"name: decode_d{d}\ndtype: bf16\nhead_dim: {d}\n")

    def graph(build):
        if not ctx["graph"]:
            return {}
        try:
            return dict(graph_ms=ctx["graph_ms"](torch, [build]))
        except Exception as e:  # noqa: BLE001 — recorded: this run's graph time is missing
            return dict(graph_error=" ".join(str(e).split())[:200])

    def timed(name, build, o):
        launch = build()
        launch()
        torch.cuda.synchronize()
        for bi, ref, low in checks:
            ok, msg = rule_check(o[bi], ref, low)
            if not ok:
                rec.add(case, name, status="FAILED", bytes=nbytes, check=f"sequence {bi}: {msg}")
                return
        rec.add(case, name, do_bench(launch, rep=ctx["rep"], return_mode="median"), bytes=nbytes, check=msg,
                **graph(build))

    o = torch.full_like(q, float("nan"))
    timed("flashjit contiguous", lambda: kern.prepare(q, k, v, o), o)
    for page in PAGE_SIZES:
        per_seq = (skv + page - 1) // page
        perm = torch.randperm(b * per_seq, generator=torch.Generator().manual_seed(page)).to(torch.int32)
        table = perm.view(b, per_seq).cuda()
        pool_k = torch.full((b * per_seq, page, hkv, d), float("nan"), device="cuda", dtype=torch.bfloat16)
        pool_v = torch.full_like(pool_k, float("nan"))
        padded = per_seq * page
        kp = torch.zeros(b, padded, hkv, d, device="cuda", dtype=torch.bfloat16)
        vp = torch.zeros_like(kp)
        kp[:, :skv], vp[:, :skv] = k, v
        pool_k[table.long().view(-1)] = kp.view(b * per_seq, page, hkv, d)
        pool_v[table.long().view(-1)] = vp.view(b * per_seq, page, hkv, d)
        del kp, vp
        o = torch.full_like(q, float("nan"))
        timed(f"flashjit page {page}",
              lambda: kern.prepare(q, pool_k, pool_v, o, block_table=table, seq_kv=skv), o)
        del pool_k, pool_v
    from torch.nn.attention import SDPBackend, sdpa_kernel
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    try:
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            fn = lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=group > 1)
            fn()
            torch.cuda.synchronize()
            rec.add(case, "sdpa-cudnn contiguous", do_bench(fn, rep=ctx["rep"], return_mode="median"), bytes=nbytes,
                    **graph(lambda: fn))
    except Exception as e:  # noqa: BLE001
        rec.add(case, "sdpa-cudnn contiguous", status="unsupported", bytes=nbytes, error=" ".join(str(e).split())[:200])
    del q, k, v
    torch.cuda.empty_cache()


def print_tables(rows):
    for suite, metric, unit in (("varlen", "tflops", "TFLOP/s"), ("paged", "tb_per_s", "TB/s"),
                                ("paged", "graph_tb_per_s", "TB/s by graph replay")):
        mine = [r for r in rows if r["case"].startswith(suite)]
        if not mine or not any(r.get(metric) for r in mine):
            continue
        names = list(dict.fromkeys(r["backend"] for r in mine))
        cases = list(dict.fromkeys(r["case"] for r in mine))
        print(f"\n{suite}: {unit}")
        print("%-34s" % "case" + "".join("%22s" % n for n in names))
        for c in cases:
            line = "%-34s" % c
            for n in names:
                r = next((r for r in mine if r["case"] == c and r["backend"] == n), None)
                line += "%22s" % ("%.2f" % r[metric] if r and r.get(metric) else (r["status"] if r else "-"))
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", default="varlen,paged")
    ap.add_argument("--out", default="bench-serving")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--graph", action="store_true", help="paged: also time by CUDA graph replay")
    args = ap.parse_args()
    suites = args.suite.split(",")
    dims = [int(x) for x in args.dims.split(",")]
    if args.dry_run:
        for n in DOC_COUNTS:
            print(f"varlen docs={n}: lengths {doc_lengths(n, TOKENS, seed=n)}")
        for s in PAGED_SHAPES:
            print("paged b=%d h=%d/%d sq=%d skv=%d" % s)
        return 0
    import torch
    import torch._dynamo
    import torch.nn.functional as F
    from triton.testing import do_bench
    import flashjit_ctypes as fj
    from graph_timing import graph_ms
    torch._dynamo.config.recompile_limit = 1000
    torch.empty(1, device="cuda")
    ctx = dict(torch=torch, F=F, fj=fj, do_bench=do_bench, rt=fj.Runtime(0), rep=args.rep, kernels={},
               graph=args.graph, graph_ms=graph_ms)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, flashjit {fj.version()}", flush=True)
    rec = Records(args.out)
    if "varlen" in suites:
        for d in dims:
            for n in DOC_COUNTS:
                for causal in (False, True):
                    run_varlen(ctx, rec, d, n, causal)
    if "paged" in suites:
        for shape in PAGED_SHAPES:
            run_paged(ctx, rec, shape)
    print_tables(rec.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
