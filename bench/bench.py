"""flashjit side by side with PyTorch SDPA (cuDNN, FlashAttention-2, efficient), compiled
FlexAttention and SDPA with a dense mask — one process, the same inputs, forward pass.

For each case: build bf16 inputs once; compile flashjit's spec through the C ABI (a compile error
is recorded as "unsupported: <message>", never replaced by something else); run flashjit once on
a NaN-poisoned output and check it against PyTorch SDPA's math backend in fp32 (FlashAttention
rule: max error <= 2 x that of the same computation in bf16 + 1e-5, NaN fails) BEFORE timing;
then time flashjit and every peer with triton.testing.do_bench (median, L2 flushed between reps,
as the peer figures in the project's issues were measured). FLOPs = 4*b*h*s*s*d * density, density being the exact
fraction of visible (q, kv) pairs of the case's mask.

  python3 bench/bench.py --suite standard masks --out DIR     (on the GPU machine)
  python3 bench/bench.py --suite all --dry-run                (anywhere: the case list, no torch)

Writes DIR/bench.json (a list, one record per measurement, rewritten after every case),
DIR/bench.png and prints the table last.
"""
import argparse
import json
import math
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TOKENS, HIDDEN = 16384, 2048  # the FlashAttention papers' shapes: batch*seq = 16k tokens, heads = 2048/d
DENSE_MASK_MAX_SEQ = 8192     # SDPA with a dense mask materialises b*h*s*s scores; the peer measurements stop at 8k
PEERS = ("sdpa-cudnn", "sdpa-flash", "sdpa-effic", "flex", "sdpa-dense-mask")


# ---- masks and score modifiers ----------------------------------------------------------------
# Each knows its flashjit DSL text, its exact visible count (pure Python, closed form per row),
# and its torch form (for the FlexAttention mask_mod, the dense mask and the reference).

class Mask:
    name = "none"
    fj_mask = "none"
    fj_tensors = {}          # name -> YAML flow text of the declaration

    def row_visible(self, q, s):  # number of kv visible from query row q
        return s

    def count(self, s):
        return sum(self.row_visible(q, s) for q in range(s))

    def density(self, s):
        return self.count(s) / float(s * s)

    def torch_fn(self, s, device):  # (qi, ki) index tensors -> bool tensor; None = every pair visible
        return None

    def buffers(self, s, device):  # name -> torch tensor, for the spec's tensors
        return {}

    def describe(self, s):
        return self.name


class Causal(Mask):
    name, fj_mask = "causal", "causal"

    def row_visible(self, q, s):
        return q + 1

    def count(self, s):
        return s * (s + 1) // 2

    def torch_fn(self, s, device):
        return lambda q, k: q >= k


class SlidingWindow(Mask):
    """kv in [q - (w - 1), q]: the peer measurements' swa1024 = (q >= k) & (q - k < 1024)."""

    def __init__(self, w):
        self.w = w
        self.name = f"swa{w}"
        self.fj_mask = f"window({w - 1}, 0) && causal"

    def row_visible(self, q, s):
        return min(q + 1, self.w)

    def count(self, s):
        w = min(self.w, s)
        return w * (w + 1) // 2 + (s - w) * self.w

    def torch_fn(self, s, device):
        w = self.w
        return lambda q, k: (q >= k) & (q - k < w)


class Documents(Mask):
    """doc[q] == doc[kv] (not causal), as the peer measurements' doc8. split="even":
    doc = arange(s) * n // s exactly as they do; split="random": n documents with random
    boundaries (seeded, every document non-empty)."""

    fj_tensors = {"doc": "{type: i32, dims: [seq_kv]}"}
    fj_mask = "document(doc)"

    def __init__(self, n, split="even", seed=0):
        self.n, self.split, self.seed = n, split, seed
        self.name = f"doc{n}" + ("" if split == "even" else "r")

    def lengths(self, s):
        if self.split == "even":
            ids = [i * self.n // s for i in range(s)]
            return [ids.count(j) for j in range(self.n)]
        cuts = sorted(random.Random(self.seed * 1000003 + s).sample(range(1, s), self.n - 1))
        bounds = [0] + cuts + [s]
        return [bounds[i + 1] - bounds[i] for i in range(self.n)]

    def ids(self, s):
        out = []
        for j, n in enumerate(self.lengths(s)):
            out += [j] * n
        return out

    def count(self, s):
        return sum(n * n for n in self.lengths(s))

    def doc(self, s, device):
        import torch
        return torch.tensor(self.ids(s), dtype=torch.int32, device=device)

    def torch_fn(self, s, device):
        doc = self.doc(s, device)
        return lambda q, k: doc[q] == doc[k]

    def buffers(self, s, device):
        return {"doc": self.doc(s, device)}

    def describe(self, s):
        return f"{self.name} lengths={self.lengths(s)}"


class Score:
    name = "score"
    fj_score = None
    fj_params = {}    # name -> YAML flow text
    fj_tensors = {}
    param_values = {}
    softcap = None    # reference: cap * tanh(s / cap) before the bias

    def flex_fn(self, device, h):
        return None

    def bias(self, h, heads, rows, kv):  # [len(heads), R, S] fp32 additive bias (h heads in all), or None
        return None

    def buffers(self, h, device):
        return {}


class Softcap(Score):
    def __init__(self, cap):
        self.cap = float(cap)
        self.name = f"softcap{cap:g}"
        self.fj_score = "softcap * tanh(score / softcap)"
        self.fj_params = {"softcap": f"{{type: f32, default: {self.cap}}}"}
        self.param_values = {"softcap": self.cap}
        self.softcap = self.cap

    def flex_fn(self, device, h):
        import torch
        cap = self.cap
        return lambda score, b, hh, q, k: cap * torch.tanh(score / cap)


class Alibi(Score):
    """score - slope[h] * |q - kv|, slope[h] = 2^(-8 (h + 1) / heads) (Press et al.)."""
    name = "alibi"
    fj_score = "score - slope[h] * abs(q - kv)"
    fj_tensors = {"slope": "{type: f32, dims: [heads_q]}"}

    def slopes(self, h, device):
        import torch
        return torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], dtype=torch.float32, device=device)

    def flex_fn(self, device, h):
        slope = self.slopes(h, device)
        return lambda score, b, hh, q, k: score - slope[hh] * (q - k).abs()

    def bias(self, h, heads, rows, kv):
        slope = self.slopes(h, rows.device)[heads]
        return -slope[:, None, None] * (rows[None, :, None] - kv[None, None, :]).abs().float()

    def buffers(self, h, device):
        return {"slope": self.slopes(h, device)}


MASKS = {"none": Mask(), "causal": Causal(), "swa1024": SlidingWindow(1024),
         "doc8": Documents(8, "even"), "doc8r": Documents(8, "random", seed=1)}


@dataclass
class Case:
    suite: str
    b: int
    h: int
    s: int
    d: int
    mask: Mask
    score: Score = field(default_factory=Score)

    @property
    def causal(self):
        return self.mask.name == "causal"

    @property
    def masked(self):  # records get `mask` and `density` (everything but plain none/causal)
        return self.suite != "standard" and self.suite != "quick-standard"

    @property
    def id(self):
        sc = "" if self.score.fj_score is None else f" score={self.score.name}"
        return f"{self.suite} d={self.d} s={self.s} b={self.b} h={self.h} mask={self.mask.name}{sc}"

    def density(self):
        return self.mask.density(self.s)

    def flops(self):
        return 4.0 * self.b * self.h * self.s * self.s * self.d * self.density()

    def spec_yaml(self):
        lines = [f"name: bench_{self.mask.name}_{self.score.name}_d{self.d}", "dtype: bf16", f"head_dim: {self.d}"]
        if self.mask.fj_mask != "none":  # no mask key = every key visible
            lines.append(f'mask: "{self.mask.fj_mask}"')
        if self.score.fj_score:
            lines.append(f'score: "{self.score.fj_score}"')
        if self.score.fj_params:
            lines.append("params:")
            lines += [f"  {n}: {t}" for n, t in self.score.fj_params.items()]
        tensors = dict(self.mask.fj_tensors)
        tensors.update(self.score.fj_tensors)
        if tensors:
            lines.append("tensors:")
            lines += [f"  {n}: {t}" for n, t in tensors.items()]
        return "\n".join(lines) + "\n"

    def peers(self):
        """The peer backends that apply to this case."""
        out = []
        plain = self.score.fj_score is None and self.mask.name in ("none", "causal")
        if plain:
            out += ["sdpa-cudnn", "sdpa-flash", "sdpa-effic"]
        out.append("flex")
        dense_ok = self.mask.name != "none" or type(self.score).bias is not Score.bias
        if self.masked and dense_ok and self.score.softcap is None and self.s <= DENSE_MASK_MAX_SEQ:
            out.append("sdpa-dense-mask")
        return out


def has_block_map(kern):
    """Whether the compiled kernel walks a block map (a mask that reads tensors): its launch can then
    take the map built once, outside the timing, as Flex's create_block_mask is."""
    return "+blockmap" in kern.info["description"]


def flex_call(case, q, k, v, mask_fn, device):
    """The case on compiled FlexAttention: a call whose block mask (from mask_fn, None = every pair
    visible) and score_mod are built once, here, outside any timing."""
    import torch._dynamo
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    torch._dynamo.reset()  # per shape: never hit the recompile limit and fall back to eager
    flex = torch.compile(flex_attention, dynamic=False)
    bm = None
    if mask_fn is not None:
        bm = create_block_mask(lambda b, h, qi, ki: mask_fn(qi, ki), None, None, case.s, case.s, device=device)
    score_mod = case.score.flex_fn(device, case.h)
    return lambda: flex(q, k, v, score_mod=score_mod, block_mask=bm)


def standard_shape(s, d):
    return TOKENS // s, HIDDEN // d


def build_cases(suites, dims=None, seqs=None):
    cases = []
    for suite in suites:
        if suite == "standard":
            for d in dims or (64, 128, 256):
                for s in seqs or (1024, 4096, 16384):
                    b, h = standard_shape(s, d)
                    for m in ("none", "causal"):
                        cases.append(Case("standard", b, h, s, d, MASKS[m]))
        elif suite == "masks":
            for d in dims or (64, 128):
                for s in seqs or (4096, 16384):
                    b, h = standard_shape(s, d)
                    for m in ("causal", "swa1024", "doc8", "doc8r"):
                        cases.append(Case("masks", b, h, s, d, MASKS[m]))
        elif suite == "scores":
            for d in dims or (128,):
                for s in seqs or (4096, 16384):
                    b, h = standard_shape(s, d)
                    for sc in (Softcap(30), Alibi()):
                        cases.append(Case("scores", b, h, s, d, MASKS["causal"], sc))
        elif suite == "quick":
            cases += [Case("quick-standard", 2, 8, 1024, 64, MASKS["none"]),
                      Case("quick-standard", 2, 8, 1024, 128, MASKS["causal"]),
                      Case("quick", 1, 8, 2048, 64, MASKS["swa1024"]),
                      Case("quick", 1, 8, 2048, 64, MASKS["doc8r"]),
                      Case("quick", 1, 8, 1024, 128, MASKS["causal"], Softcap(30)),
                      Case("quick", 1, 8, 1024, 128, MASKS["causal"], Alibi())]
        else:
            raise SystemExit(f"unknown suite {suite!r}; use standard, masks, scores, quick or all")
    return cases


# ---- results -----------------------------------------------------------------------------------

class Results:
    def __init__(self, out_dir):
        self.records = []
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def add(self, case, name, ms=None, status="ok", **extra):
        tf = case.flops() / (ms * 1e-3) / 1e12 if ms else None
        r = dict(name=name, mode="fwd", b=case.b, h=case.h, s=case.s, d=case.d, causal=case.causal,
                 ms=ms, tflops=tf)
        if case.masked:
            r["mask"] = case.mask.name
            r["density"] = case.density()
            if case.score.fj_score:
                r["score"] = case.score.name
        r["suite"] = case.suite
        r["status"] = status
        r.update(extra)
        self.records.append(r)
        shown = f"{ms:9.3f} ms {tf:7.1f} TFLOP/s" if ms else short(status, 150)
        print(f"  {name:16s} {shown}", flush=True)
        return r

    def save(self):
        tmp = self.out_dir / "bench.json.tmp"
        with open(tmp, "w") as f:
            json.dump(self.records, f, indent=1)
        os.replace(tmp, self.out_dir / "bench.json")


def short(text, n=300):
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 3] + "..."


# ---- the GPU part ------------------------------------------------------------------------------

class Bench:
    def __init__(self, args, results):
        import torch
        import torch._dynamo
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.SDPBackend, self.sdpa_kernel = torch, F, SDPBackend, sdpa_kernel
        torch.backends.cuda.matmul.allow_tf32 = False
        torch._dynamo.config.recompile_limit = 1000
        torch._dynamo.config.accumulated_recompile_limit = 10000
        self.dev = "cuda"
        torch.empty(1, device=self.dev)  # CUDA initialised: flashjit then uses torch's (primary) context
        self.args, self.results = args, results
        try:
            from triton.testing import do_bench
            self.do_bench = do_bench
        except Exception as e:  # CUDA events fallback
            print(f"triton unavailable ({e}); timing with CUDA events", flush=True)
            self.do_bench = None
        import flashjit_ctypes as fj
        self.fj = fj
        self.rt = fj.Runtime(0)
        print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), {torch.cuda.get_device_name()}, "
              f"flashjit {fj.version()} from {fj.library_path()}", flush=True)

    # -- timing --
    def time(self, fn):
        torch = self.torch
        with torch.no_grad():
            if self.do_bench is not None:
                return self.do_bench(fn, warmup=self.args.warmup, rep=self.args.rep, return_mode="median")
            for _ in range(5):
                fn()
            torch.cuda.synchronize()
            ts = []
            for _ in range(max(10, self.args.rep // 5)):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                ts.append(a.elapsed_time(b))
            ts.sort()
            return ts[len(ts) // 2]

    # -- the reference check --
    def attention_rows(self, q, k, v, rows, heads, mask_fn, score, dtype):
        """Attention output rows `rows` of heads `heads` (batch-1 slices [1, H, S, D]) in `dtype`.
        fp32 (the reference): SDPA's math backend on upcast inputs (the math written out when the
        score has a softcap, which SDPA cannot express). bf16 (the baseline of the FlashAttention
        rule): the straightforward computation with every intermediate rounded to bf16, written out
        because SDPA's math backend upcasts half types internally."""
        torch, F = self.torch, self.F
        s_kv = k.shape[2]
        kv = torch.arange(s_kv, device=self.dev)
        qs = q[:, heads][:, :, rows].to(dtype)
        ks, vs = k[:, heads].to(dtype), v[:, heads].to(dtype)
        vis = mask_fn(rows[:, None], kv[None, :]) if mask_fn else None
        bias = score.bias(q.shape[1], heads, rows, kv)
        scale = 1.0 / math.sqrt(q.shape[-1])
        if dtype == torch.float32 and score.softcap is None:
            attn_mask = vis
            if bias is not None:
                attn_mask = bias[None].to(dtype)
                if vis is not None:
                    attn_mask = attn_mask.masked_fill(~vis, float("-inf"))
            with self.sdpa_kernel([self.SDPBackend.MATH]):
                o = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=attn_mask, scale=scale)
        else:
            sc = (qs @ ks.transpose(-1, -2)) * scale
            if score.softcap is not None:
                sc = score.softcap * torch.tanh(sc / score.softcap)
            if bias is not None:
                sc = sc + bias[None].to(dtype)
            if vis is not None:
                sc = sc.masked_fill(~vis, float("-inf"))
            o = torch.softmax(sc, dim=-1).to(dtype) @ vs
        if vis is not None:  # a fully masked row is 0 by flashjit's definition (SDPA gives NaN)
            o = o.masked_fill(~vis.any(-1)[None, None, :, None], 0.0)
        return o

    def check(self, case, o, q, k, v, mask_fn):
        torch = self.torch
        if not torch.isfinite(o).all().item():
            bad = (~torch.isfinite(o)).sum().item()
            return False, f"{bad} non-finite output elements (NaN poison not overwritten, or NaN/inf computed)"
        s = case.s
        if s <= 2048:
            rows = list(range(s))
        else:  # both ends and a random sample in between (rows are independent)
            rnd = random.Random(s)
            rows = sorted(set(range(256)) | set(range(s - 256, s)) | set(rnd.sample(range(256, s - 256), 512)))
        rows = torch.tensor(rows, device=self.dev)
        err_fj = err_ref = 0.0
        for bi in sorted({0, case.b - 1}):
            for h0 in range(0, case.h, 8):
                heads = torch.arange(h0, min(h0 + 8, case.h), device=self.dev)
                sl = slice(bi, bi + 1)
                ref = self.attention_rows(q[sl], k[sl], v[sl], rows, heads, mask_fn, case.score, torch.float32)
                low = self.attention_rows(q[sl], k[sl], v[sl], rows, heads, mask_fn, case.score, q.dtype)
                got = o[sl][:, heads][:, :, rows].float()
                err_fj = max(err_fj, (got - ref).abs().max().item())
                err_ref = max(err_ref, (low.float() - ref).abs().max().item())
                del ref, low, got
        tol = 2 * err_ref + 1e-5
        ok = err_fj <= tol and not math.isnan(err_fj)
        return ok, f"max err {err_fj:.2e} {'<=' if ok else '>'} 2 x {err_ref:.2e} (bf16 reference) + 1e-5"

    # -- one case --
    def run_case(self, case):
        torch, F = self.torch, self.F
        R = self.results
        print(f"[{case.id}] density={case.density():.4f} {short(case.mask.describe(case.s), 120)}", flush=True)
        gen = torch.Generator(device=self.dev).manual_seed(hash((case.s, case.d, case.b)) & 0xFFFFFFFF)
        q, k, v = (torch.randn(case.b, case.h, case.s, case.d, device=self.dev, dtype=torch.bfloat16, generator=gen)
                   for _ in range(3))
        mask_fn = case.mask.torch_fn(case.s, self.dev)
        buffers = dict(case.mask.buffers(case.s, self.dev))
        buffers.update(case.score.buffers(case.h, self.dev))
        names = self.args.backends

        # flashjit: compile, check, time
        if "flashjit" in names:
            self.run_flashjit(case, q, k, v, mask_fn, buffers)

        # peers
        peers = [p for p in case.peers() if p in names]
        for name in peers:
            if name == "flex":
                self.run_flex(case, q, k, v, mask_fn)
                continue
            if name == "sdpa-dense-mask":
                qi = torch.arange(case.s, device=self.dev)
                vis = mask_fn(qi[:, None], qi[None, :])
                dense_count = vis.sum().item()
                if dense_count != case.mask.count(case.s):  # the closed form and the torch mask must agree
                    R.add(case, "sdpa-dense-mask", status=f"error: the dense mask has {dense_count} visible pairs, "
                          f"the closed form {case.mask.count(case.s)}: a harness bug")
                    continue
                attn = vis
                bias = case.score.bias(case.h, torch.arange(case.h, device=self.dev), qi, qi)
                if bias is not None:
                    attn = bias.to(q.dtype).masked_fill(~vis, float("-inf"))[None]
                fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=attn)
                self.time_peer(case, name, fn)
                del attn, vis
                continue
            be = {"sdpa-cudnn": self.SDPBackend.CUDNN_ATTENTION, "sdpa-flash": self.SDPBackend.FLASH_ATTENTION,
                  "sdpa-effic": self.SDPBackend.EFFICIENT_ATTENTION}[name]

            def fn(be=be):
                with self.sdpa_kernel([be]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=case.causal)
            self.time_peer(case, name, fn)
        del q, k, v
        torch.cuda.empty_cache()

    def time_peer(self, case, name, fn):
        torch = self.torch
        try:
            with torch.no_grad():
                fn()
            torch.cuda.synchronize()
        except Exception as e:
            self.results.add(case, name, status=f"unsupported: {type(e).__name__}: {short(e)}")
            return
        try:
            self.results.add(case, name, self.time(fn))
        except Exception as e:
            self.results.add(case, name, status=f"error: {type(e).__name__}: {short(e)}")

    def prebuilt_map(self, kern):
        return not self.args.map_per_call and has_block_map(kern)

    def run_flashjit(self, case, q, k, v, mask_fn, buffers):
        torch, fj, R = self.torch, self.fj, self.results
        spec = case.spec_yaml()
        t0 = time.time()
        try:
            kern = self.rt.compile(spec)
        except fj.FlashjitError as e:
            kind = "unsupported" if e.status in (fj.FJ_ERR_SPEC, fj.FJ_ERR_USAGE) else f"error ({e.status_name})"
            R.add(case, "flashjit", status=f"{kind}: {short(e.message, 500)}")
            return
        compile_s = time.time() - t0
        kern.wait_full()  # a tiered compile's quick form must not be what gets timed
        info = dict(config=kern.config, kernel=kern.info["key"], registers=kern.info["registers"],
                    spill_bytes=kern.info["spill_bytes"], compile_s=round(compile_s, 3),
                    full_s=round(time.time() - t0, 3))
        if has_block_map(kern):
            info["block_map"] = "built once" if self.prebuilt_map(kern) else "rebuilt per call"
        o = torch.full_like(q, float("nan"))  # poison: elements the kernel does not write stay NaN
        tr = lambda t: t.transpose(1, 2)      # [b, h, s, d] storage seen as [b, s, h, d]
        try:
            # A mask reading tensors gets its block map built once, outside the timing, as Flex's
            # create_block_mask is (kern.info says whether the kernel has one).
            launch = kern.prepare(tr(q), tr(k), tr(v), tr(o), params=case.score.param_values or None,
                                  buffers=buffers or None, block_map=bool(buffers) and self.prebuilt_map(kern))
            launch()
            torch.cuda.synchronize()
        except fj.FlashjitError as e:
            R.add(case, "flashjit", status=f"error ({e.status_name}): {short(e.message, 500)}", **info)
            return
        except Exception as e:  # the launch went through but the kernel failed (e.g. an illegal address)
            R.add(case, "flashjit", status=f"error: the kernel failed: {type(e).__name__}: {short(e)}", **info)
            raise
        ok, msg = self.check(case, o, q, k, v, mask_fn)
        info["check"] = msg
        print(f"  flashjit {kern.info['description']} ({kern.info['registers']} regs, "
              f"{kern.info['spill_bytes']} B spill, compile {compile_s:.2f} s): check {'ok' if ok else 'FAILED'}: {msg}",
              flush=True)
        if not ok and not self.args.time_wrong:
            R.add(case, "flashjit", status=f"failed check: {msg}", **info)
            kern.close()
            return
        try:
            R.add(case, "flashjit", self.time(launch), status="ok" if ok else f"failed check: {msg}", **info)
        finally:
            kern.close()

    def run_flex(self, case, q, k, v, mask_fn):
        torch = self.torch
        try:
            fn = flex_call(case, q, k, v, mask_fn, self.dev)
            t0 = time.time()
            with torch.no_grad():
                fn()
            torch.cuda.synchronize()
            cold = time.time() - t0
        except Exception as e:
            self.results.add(case, "flex", status=f"unsupported: {type(e).__name__}: {short(e)}")
            return
        try:
            self.results.add(case, "flex", self.time(fn), cold_s=round(cold, 2))
        except Exception as e:
            self.results.add(case, "flex", status=f"error: {type(e).__name__}: {short(e)}")


# ---- output ------------------------------------------------------------------------------------

def case_key(r):
    return (r["suite"], r.get("mask", "causal" if r["causal"] else "none"), r.get("score", ""), r["d"], r["s"], r["b"],
            r["h"])


def print_table(records):
    if not records:
        print("no results")
        return
    names = ["flashjit"] + [p for p in PEERS if any(r["name"] == p for r in records)]
    rows = {}
    for r in records:
        rows.setdefault(case_key(r), {})[r["name"]] = r
    hdr = f"{'suite':9s} {'mask':8s} {'score':9s} {'d':>3s} {'s':>5s} {'b':>3s} {'h':>3s} |" + \
          "".join(f" {n[:11]:>11s}" for n in names) + " | fj/flash fj/best"
    print()
    print("TFLOP/s (useful FLOPs: 4*b*h*s*s*d*density), forward, bf16; '-' = not run, "
          "'unsup' = backend/compile refused, 'WRONG' = failed the check, 'err' = other error")
    print(hdr)
    print("-" * len(hdr))
    for key in rows:  # in the order the cases ran
        cells = rows[key]
        suite, mask, score, d, s, b, h = key
        line = f"{suite[:9]:9s} {mask:8s} {score[:9]:9s} {d:3d} {s:5d} {b:3d} {h:3d} |"
        for n in names:
            r = cells.get(n)
            if r is None:
                txt = "-"
            elif r["tflops"]:
                txt = f"{r['tflops']:.1f}" + ("!" if r["status"] != "ok" else "")
            elif r["status"].startswith("unsupported"):
                txt = "unsup"
            elif r["status"].startswith("failed check"):
                txt = "WRONG"
            else:
                txt = "err"
            line += f" {txt:>11s}"
        fj = cells.get("flashjit", {}).get("tflops")
        flash = cells.get("sdpa-flash", {}).get("tflops")
        peers = [cells[n]["tflops"] for n in names[1:] if n in cells and cells[n]["tflops"]]
        line += " | " + (f"{fj / flash:8.2f}" if fj and flash else f"{'-':>8s}")
        line += " " + (f"{fj / max(peers):7.2f}" if fj and peers else f"{'-':>7s}")
        print(line)
    notes = [r for r in records if r["status"] != "ok"]
    if notes:
        print(f"\n{len(notes)} measurement(s) not ok (first 12; all in bench.json):")
        for r in notes[:12]:
            print(f"  {r['name']:15s} {r['suite']} d={r['d']} s={r['s']} {r.get('mask', '')}: {short(r['status'], 160)}")


def draw_series(ax, records, metric, title):
    """One panel: `metric` against the sequence length, a line per backend (flashjit bold)."""
    by = {}
    for r in records:
        if r.get(metric):
            by.setdefault(r["name"], {})[r["s"]] = r[metric]
    for name in sorted(by, key=lambda n: (n != "flashjit", n)):
        xs = sorted(by[name])
        color = f"C{(['flashjit'] + list(PEERS)).index(name)}" if name in PEERS or name == "flashjit" else None
        ax.plot(xs, [by[name][x] for x in xs], marker="o", lw=2.5 if name == "flashjit" else 1.2, label=name,
                color=color)
    ax.set_xscale("log", base=2)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("seq length")
    ax.set_ylabel("TFLOP/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def pyplot():
    """matplotlib.pyplot on the Agg back end, or None (said why) where it is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except Exception as e:
        print(f"no plot: {e}")
        return None


def plot(records, path):
    plt = pyplot()
    if plt is None:
        return
    panels = {}
    for r in records:
        if r["tflops"]:
            mask = r.get("mask", "causal" if r["causal"] else "none")
            if r.get("score"):
                mask += "+" + r["score"]
            panels.setdefault((r["d"], mask), []).append(r)
    if not panels:
        return
    keys = sorted(panels)
    ncol = min(4, len(keys))
    nrow = (len(keys) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow), squeeze=False)
    for ax, key in zip(axes.flat, keys):
        draw_series(ax, panels[key], "tflops", f"d={key[0]} mask={key[1]}")
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.suptitle("forward, bf16, 16k tokens, hidden 2048: useful TFLOP/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}")


# ---- main --------------------------------------------------------------------------------------

class Stop(BaseException):  # not an Exception: the per-backend `except Exception` must not swallow it
    pass


class Tee:
    """Copies what Python prints to a log file as well (the C++ and CUDA layers' own stderr is not)."""

    def __init__(self, stream, path):
        self.stream, self.file = stream, open(path, "a", buffering=1)

    def write(self, text):
        self.stream.write(text)
        self.file.write(text)
        return len(text)

    def flush(self):
        self.stream.flush()
        self.file.flush()

    def isatty(self):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", nargs="+", default=["quick"], help="standard masks scores quick all")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for bench.json and bench.png")
    ap.add_argument("--dry-run", action="store_true", help="print the cases and their specs; no torch, no GPU")
    ap.add_argument("--compile-ptx", action="store_true",
                    help="with --dry-run: also compile each spec to PTX through the C ABI (no GPU needed)")
    ap.add_argument("--dims", type=lambda t: [int(x) for x in t.split(",")], help="override head dims, e.g. 64,128")
    ap.add_argument("--seqs", type=lambda t: [int(x) for x in t.split(",")], help="override seq lengths")
    ap.add_argument("--filter", default="", help="only cases whose id contains this text")
    ap.add_argument("--backends", type=lambda t: t.split(","), default=["flashjit", *PEERS],
                    help="comma-separated subset of: flashjit," + ",".join(PEERS))
    ap.add_argument("--warmup", type=int, default=25, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=int, default=100, help="do_bench repetitions, ms")
    ap.add_argument("--time-wrong", action="store_true", help="also time a flashjit kernel that failed the check")
    ap.add_argument("--map-per-call", action="store_true",
                    help="rebuild flashjit's block map before every launch (default: once, like Flex's block mask)")
    ap.add_argument("--budget-s", type=float, default=float(os.environ.get("BENCH_BUDGET_S", "0")),
                    help="start no new case after this many seconds (0 = no limit); the table is still printed")
    ap.add_argument("--log", help="also write everything printed to this file")
    args = ap.parse_args()
    if args.log:
        sys.stdout = Tee(sys.stdout, args.log)
        sys.stderr = Tee(sys.stderr, args.log)
    suites = ["standard", "masks", "scores"] if "all" in args.suite else args.suite
    cases = [c for c in build_cases(suites, args.dims, args.seqs) if args.filter in c.id]

    if args.dry_run:
        for i, c in enumerate(cases):
            print(f"[{i + 1}/{len(cases)}] {c.id} density={c.density():.6f} GFLOP={c.flops() / 1e9:.1f} "
                  f"peers={','.join(c.peers())}")
            print(f"    {short(c.mask.describe(c.s), 150)}")
            print("    spec: " + c.spec_yaml().strip().replace("\n", " | "))
            if args.compile_ptx:
                import flashjit_ctypes as fj
                try:
                    t0 = time.time()
                    ptx, entry = fj.compile_ptx(c.spec_yaml(), "sm_90a")
                    print(f"    ptx: {entry}, {len(ptx)} bytes, {time.time() - t0:.2f} s")
                except fj.FlashjitError as e:
                    print(f"    ptx: unsupported: {short(e.message, 300)}")
        print(f"{len(cases)} cases")
        return 0

    results = Results(args.out)

    def on_term(signum, frame):
        raise Stop(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    rc = 0
    try:
        bench = Bench(args, results)
        t0 = time.time()
        for i, c in enumerate(cases):
            if args.budget_s and time.time() - t0 > args.budget_s:
                left = cases[i:]
                print(f"\ntime budget of {args.budget_s:.0f} s spent: {len(left)} case(s) not run, from: {left[0].id}")
                rc = 1
                break
            print(f"\n[{i + 1}/{len(cases)}] {time.time() - t0:.0f} s", flush=True)
            try:
                bench.run_case(c)
            except Stop:
                raise
            except Exception as e:
                print(f"case failed: {type(e).__name__}: {short(e, 400)}", flush=True)
                traceback.print_exc(limit=3)
                results.add(c, "harness", status=f"error: {type(e).__name__}: {short(e)}")
                rc = 1
                try:  # a sticky CUDA error poisons the context: stop rather than report nonsense
                    bench.torch.cuda.synchronize()
                except Exception as e2:
                    print(f"CUDA context unusable ({short(e2, 200)}); stopping", flush=True)
                    break
            results.save()
    except (Stop, KeyboardInterrupt) as e:
        print(f"\nstopped: {e}; writing what was measured", flush=True)
        rc = 1
    finally:
        results.save()
        try:
            plot(results.records, Path(args.out) / "bench.png")
        except Exception as e:  # the table matters more than the picture
            print(f"plot failed: {type(e).__name__}: {short(e, 200)}")
        print(f"json: {Path(args.out) / 'bench.json'} ({len(results.records)} records)")
        print_table(results.records)
    return rc


if __name__ == "__main__":
    sys.exit(main())
