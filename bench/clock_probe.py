"""Throughput beside the card's SM clock and power draw, per backend, in one process.

bench.py's medians say which kernel is faster; they do not say whether the two ran at the same clock.
A kernel that moves more bytes through the L2 draws more power and can be clocked down under the
card's power limit, so a gap in TFLOP/s can be a gap in clock as well as in work per cycle. This runs
each backend back to back for a few seconds per window, alternating backends over rounds, while
nvidia-smi samples clocks.sm and power.draw every 100 ms, and prints TFLOP/s, the window's median
clock and power, and TFLOP/s per GHz.

  python3 bench/clock_probe.py [--dims 64,128] [--seqs 16384] [--masks none,causal] [--rounds 2]
                               [--window-s 3]

--masks takes bench.py's mask names (none, causal, swa1024, doc8, doc8r). The peer is cuDNN for
none and causal and compiled FlexAttention for the others, with its block mask built once outside
the windows, as flashjit's block map is; FLOPs count only the visible pairs, as in bench.py.

Needs what bench/run_gpu.sh needs (.device/ from scripts/gpu_bundle.sh, torch, nvidia-smi), with
its environment: from the repository root, `source scripts/gpu_env.sh` (the loader path) and
FLASHJIT_LIB=$PWD/.device/libflashjit.so.0.
"""
import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOKENS, HIDDEN = 16384, 2048  # bench.py's standard shapes: batch = TOKENS / seq, heads = HIDDEN / d


class Sampler:
    """nvidia-smi's SM clock (MHz) and power (W) every 100 ms, kept with the host time of each line."""

    def __init__(self):
        self.samples = []
        self.proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "100"],
            stdout=subprocess.PIPE, text=True)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                clk, pw = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), clk, pw))

    def between(self, t0, t1):
        got = [(c, p) for t, c, p in self.samples if t0 <= t <= t1]
        if not got:
            return float("nan"), float("nan"), 0
        return statistics.median(c for c, _ in got), statistics.median(p for _, p in got), len(got)

    def close(self):
        self.proc.terminate()


def peer_for(case, q, k, v):
    """(name, call) of the peer: cuDNN's SDPA for none and causal, compiled FlexAttention otherwise."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import bench
    if case.mask.name in ("none", "causal"):
        def cudnn():
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=case.causal)
        return "cudnn", cudnn
    return "flex", bench.flex_call(case, q, k, v, case.mask.torch_fn(case.s, "cuda"), "cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dims", default="64")
    ap.add_argument("--seqs", default="16384")
    ap.add_argument("--masks", default="none,causal")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--window-s", type=float, default=3.0)
    a = ap.parse_args()

    import torch
    import bench
    import flashjit_ctypes as fj

    torch.empty(1, device="cuda")
    rt = fj.Runtime(0)
    sampler = Sampler()
    time.sleep(0.5)
    print(f"{torch.cuda.get_device_name()}, flashjit {fj.version()}", flush=True)
    rows = []
    for d in (int(x) for x in a.dims.split(",")):
        for s in (int(x) for x in a.seqs.split(",")):
            for mask in a.masks.split(","):
                b, h = TOKENS // s, HIDDEN // d
                case = bench.Case("probe", b, h, s, d, bench.MASKS[mask])
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
                o = torch.empty_like(q)
                kern = rt.compile(case.spec_yaml())
                kern.wait_full()  # time the full kernel, not a tiered compile's quick form
                buffers = case.mask.buffers(s, "cuda")
                tr = lambda t: t.transpose(1, 2)
                fj_launch = kern.prepare(tr(q), tr(k), tr(v), tr(o), buffers=buffers or None,
                                         block_map=bool(buffers) and bench.has_block_map(kern))
                peer_name, peer = peer_for(case, q, k, v)
                fj_launch()
                ref = peer()
                torch.cuda.synchronize()
                err = (o.float() - ref.float()).abs().max().item()  # the two agree (bench.py does the fp32 check)
                flops = case.flops()
                for r in range(a.rounds):
                    pair = (("flashjit", fj_launch), (peer_name, peer))
                    for name, fn in pair if r % 2 == 0 else pair[::-1]:
                        with torch.no_grad():
                            for _ in range(5):
                                fn()
                            torch.cuda.synchronize()
                            n, t0 = 0, time.time()
                            while time.time() - t0 < a.window_s:
                                for _ in range(20):
                                    fn()
                                n += 20
                                torch.cuda.synchronize()
                            t1 = time.time()
                        clk, pw, ns = sampler.between(t0 + 0.5, t1)
                        tf = flops * n / (t1 - t0) / 1e12
                        rows.append((d, s, mask, r, name, tf, clk, pw, ns))
                        print(f"d={d} s={s} {mask:7s} round {r} {name:8s} {tf:7.1f} TFLOP/s  SM {clk:6.0f} MHz  "
                              f"{pw:5.0f} W  ({ns} samples)  {tf / clk * 1000:6.1f} TFLOP/s per GHz", flush=True)
                print(f"d={d} s={s} {mask}: max |flashjit - {peer_name}| = {err:.3e}", flush=True)
                kern.close()
                del q, k, v, o, ref, peer
                torch.cuda.empty_cache()
    sampler.close()
    print("\n  d     s  mask     backend   TFLOP/s   MHz     W  TFLOP/s/GHz  flashjit/peer (mean of rounds)")
    keys = sorted({(r[0], r[1], r[2], r[4]) for r in rows})
    mean = lambda d, s, mask, name, i: statistics.mean(r[i] for r in rows if (r[0], r[1], r[2], r[4]) == (d, s, mask, name))
    for d, s, mask, name in keys:
        tf, clk, pw = (mean(d, s, mask, name, i) for i in (5, 6, 7))
        ratio = ""
        if name != "flashjit":
            ratio = f"{mean(d, s, mask, 'flashjit', 5) / tf:6.3f}"
        print(f"{d:3d} {s:5d}  {mask:7s}  {name:8s} {tf:7.1f} {clk:5.0f} {pw:5.0f}  {tf / clk * 1000:6.1f}       {ratio}")


if __name__ == "__main__":
    main()
