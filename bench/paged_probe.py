#!/usr/bin/env python3
"""Where a paged K/V cache's time goes at one decode shape: graph-replay µs per call of flashjit on
a contiguous cache and on page pools laid out three ways, for fixed tile configs (the spec's `tune`
lists hold one config each) and split counts.

Layouts: `contiguous`; `shuffled` (a random permutation of pages, as bench_serving.py's paged suite
and a serving allocator); `in order` (page i of a sequence is page i of the pool: the same bytes as
`contiguous` plus the table lookups, so its gap is the kernel's paging cost and the rest of the
shuffled gap is where the pages lie).

    python3 bench/paged_probe.py [--shape 1,32,8,1,32768] [--pages 16,256] [--splits 0,16]
        [--configs 64,128,4,2:64,128,4,3]
"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import flashjit_ctypes as fj  # noqa: E402
from graph_timing import graph_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="1,32,8,1,32768", help="batch,heads_q,heads_kv,seq_q,seq_kv")
    ap.add_argument("--pages", default="16,256")
    ap.add_argument("--splits", default="0")
    ap.add_argument("--configs", default="64,128,4,2", help="block_m,block_n,warps,stages, ':' between configs")
    ap.add_argument("--d", type=int, default=128)
    args = ap.parse_args()
    b, hq, hkv, sq, skv = (int(x) for x in args.shape.split(","))
    d = args.d
    nbytes = 2 * b * hkv * skv * d * 2
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(b, sq, hq, d, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, skv, hkv, d, device="cuda", dtype=torch.bfloat16, generator=g)
    rt = fj.Runtime(0)
    layouts = [("contiguous", None, None)]
    for page in (int(p) for p in args.pages.split(",")):
        per_seq = (skv + page - 1) // page
        for name, perm in (("shuffled", torch.randperm(b * per_seq, generator=torch.Generator().manual_seed(page))),
                           ("in order", torch.arange(b * per_seq))):
            table = perm.to(torch.int32).view(b, per_seq).cuda()
            kp = torch.zeros(b, per_seq * page, hkv, d, device="cuda", dtype=torch.bfloat16)
            vp = torch.zeros_like(kp)
            kp[:, :skv], vp[:, :skv] = k, v
            pool_k, pool_v = torch.empty_like(kp).view(-1, page, hkv, d), torch.empty_like(vp).view(-1, page, hkv, d)
            pool_k[table.long().view(-1)] = kp.view(-1, page, hkv, d)
            pool_v[table.long().view(-1)] = vp.view(-1, page, hkv, d)
            layouts.append((f"page {page} {name}", table, (pool_k, pool_v)))
    print(f"shape b={b} h={hq}/{hkv} sq={sq} skv={skv} d={d}; µs per call by graph replay (TB/s)", flush=True)
    rows = []
    for cfg in args.configs.split(":"):
        bm, bn, w, s = (int(x) for x in cfg.split(","))
        spec = (f"name: probe\ndtype: bf16\nhead_dim: {d}\ntune:\n  block_m: [{bm}]\n  block_n: [{bn}]\n"
                f"  num_warps: [{w}]\n  num_stages: [{s}]\n")
        kern = rt.compile(spec)
        for splits in (int(x) for x in args.splits.split(",")):
            line = [f"bm{bm}_bn{bn}_w{w}_s{s} splits {splits or 'auto'}"]
            for name, table, pools in layouts:
                o = torch.empty_like(q)
                if table is None:
                    build = lambda: kern.prepare(q, k, v, o, num_splits=splits)  # noqa: E731
                else:
                    build = lambda: kern.prepare(q, pools[0], pools[1], o, block_table=table, seq_kv=skv,  # noqa: E731
                                                 num_splits=splits)
                ms = graph_ms(torch, [build])
                line.append(f"{name}: {ms * 1e3:6.1f} ({nbytes / ms / 1e9:4.2f})")
            rows.append(line)
            print("  " + " | ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
