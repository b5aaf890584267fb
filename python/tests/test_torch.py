"""flashjit.attention against PyTorch on a GPU (torch >= 2.5 with CUDA; skipped otherwise).

    FLASHJIT_LIB=$PWD/.device/libflashjit.so.0 python3 -m unittest discover -s python/tests -p test_torch.py -v

The numerics rule is FlashAttention's (docs/architecture.md): flashjit's error against an fp64
reference may be at most twice that of PyTorch's same-dtype SDPA (plus the fp64 result's own
rounding to the dtype), for the forward and for each gradient.
"""
import math
import os
import sys
import unittest
from pathlib import Path

if os.environ.get("FLASHJIT_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    import torch
    import torch.nn.functional as F
    HAVE_CUDA = torch.cuda.is_available()
except ImportError:
    HAVE_CUDA = False

import flashjit  # noqa: E402

DEV = "cuda"


def rand(*shape, dtype=None, grad=False):
    t = torch.randn(*shape, device=DEV, dtype=dtype or torch.bfloat16)
    return t.requires_grad_(grad)


def sdpa_bshd(q, k, v, mask=None, scale=None):
    """SDPA on [b, s, h, d] tensors (GQA by repeating k, v), mask a bool [b or 1, 1, s_q, s_kv]."""
    g = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(g, dim=1), vt.repeat_interleave(g, dim=1)
    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, scale=scale).transpose(1, 2)


def err(a, b):
    return (a.double() - b.double()).abs().max().item()


def rel_err(a, b):
    return err(a, b) / max(b.double().abs().max().item(), 1e-30)


@unittest.skipUnless(HAVE_CUDA, "needs torch with a CUDA device")
class Forward(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)

    def check_rule(self, out, mask, q, k, v, what, scale=None):
        ref = sdpa_bshd(q.double(), k.double(), v.double(), mask, scale)
        base = sdpa_bshd(q, k, v, mask, scale)
        floor = err(ref.to(q.dtype), ref)
        self.assertFalse(torch.isnan(out).any().item(), what)
        e, e_base = err(out, ref), err(base, ref)
        self.assertLessEqual(e, 2 * e_base + floor, f"{what}: flashjit error {e:.3g}, SDPA {e_base:.3g}")
        return ref

    def masks(self, s_q, s_kv):
        q = torch.arange(s_q, device=DEV)[:, None]
        kv = torch.arange(s_kv, device=DEV)[None, :]
        return q, kv

    def test_causal_bshd_and_bhsd(self):
        for d in (64, 128):
            q, k, v = rand(2, 512, 8, d), rand(2, 512, 8, d), rand(2, 512, 8, d)
            o = flashjit.attention(q, k, v, causal=True)
            qi, kvi = self.masks(512, 512)
            self.check_rule(o, (qi >= kvi)[None, None], q, k, v, f"causal d={d}")
            ob = flashjit.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=True, layout="bhsd")
            self.assertEqual(ob.shape, (2, 8, 512, d))
            self.check_rule(ob.transpose(1, 2), (qi >= kvi)[None, None], q, k, v, f"causal d={d}, layout='bhsd'")

    def test_window_gqa_and_lse(self):
        q, k, v = rand(1, 1024, 8, 128), rand(1, 1024, 2, 128), rand(1, 1024, 2, 128)
        o, lse = flashjit.attention(q, k, v, mask="window(256, 0)", return_lse=True)
        qi, kvi = self.masks(1024, 1024)
        mask = ((kvi >= qi - 256) & (kvi <= qi))[None, None]
        self.check_rule(o, mask, q, k, v, "window(256, 0), GQA 8/2")
        s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double().repeat_interleave(4, dim=2)) / math.sqrt(128)
        want = torch.logsumexp(s.masked_fill(~mask, float("-inf")), dim=-1)
        self.assertEqual(lse.shape, (1, 8, 1024))
        self.assertLess(err(lse, want), 1e-2)

    def test_document_mask_from_tensor(self):
        q, k, v = rand(2, 768, 4, 64), rand(2, 768, 4, 64), rand(2, 768, 4, 64)
        lengths = [[100, 300, 368], [768, 0, 0]]
        doc = torch.stack([torch.repeat_interleave(torch.arange(3), torch.tensor(n)) for n in lengths]).to(DEV, torch.int32)
        o = flashjit.attention(q, k, v, causal=True, mask="document(doc)", tensors={"doc": doc})
        qi, kvi = self.masks(768, 768)
        mask = ((qi >= kvi)[None] & (doc[:, :, None] == doc[:, None, :]))[:, None]
        self.check_rule(o, mask, q, k, v, "causal && document(doc)")
        spec = "dtype: bf16\nhead_dim: 64\nmask: \"causal && document(doc)\"\ntensors:\n  doc: {type: i32, dims: [batch, seq_kv]}\n"
        o2 = flashjit.attention(q, k, v, spec=spec, tensors={"doc": doc})
        self.check_rule(o2, mask, q, k, v, "causal && document(doc) as a whole spec")

    def test_score_softcap_and_params(self):
        q, k, v = rand(1, 256, 4, 64), rand(1, 256, 4, 64), rand(1, 256, 4, 64)
        o = flashjit.attention(q, k, v, score="cap * tanh(score / cap)", params={"cap": 5.0})
        s = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / 8.0
        p = torch.softmax(5.0 * torch.tanh(s / 5.0), dim=-1)
        ref = torch.einsum("bhqk,bkhd->bqhd", p, v.double())
        self.assertLess(err(o, ref), 2e-2)

    def test_value_errors_name_the_tensor(self):
        q, k, v = rand(1, 128, 4, 64), rand(1, 128, 4, 64), rand(1, 128, 4, 64)
        cases = [
            (lambda: flashjit.attention(q.float(), k, v), r"^q: dtype torch.float32|^q: .*float32"),
            (lambda: flashjit.attention(q, k.half(), v), r"^k: dtype torch.float16"),
            (lambda: flashjit.attention(q, k, v.cpu()), r"^v: on cpu"),
            (lambda: flashjit.attention(q, rand(1, 128, 3, 64), rand(1, 128, 3, 64)), r"^q: 4 heads is not a multiple"),
            (lambda: flashjit.attention(q, k[..., :32], v), r"^k: head dim 32; the spec's is 64"),
            (lambda: flashjit.attention(q, k, v.transpose(1, 3).contiguous().transpose(1, 3)), r"^v: the last"),
            (lambda: flashjit.attention(rand(1, 128, 4, 72)[..., 1:65], k, v), r"^q: data at .* not 16-byte aligned"),
            (lambda: flashjit.attention(q, k, v, mask="document(d)",
                                        tensors={"d": torch.zeros(128, device=DEV, dtype=torch.int64)}),
             r"^tensor 'd': dtype torch.int64"),
            (lambda: flashjit.attention(q, k, v, layout="sbhd"), r"^layout="),
        ]
        for fn, pattern in cases:
            with self.subTest(pattern=pattern), self.assertRaisesRegex(ValueError, pattern):
                fn()

    def test_cuda_graph_capture(self):
        q, k, v = rand(1, 256, 4, 64), rand(1, 256, 4, 64), rand(1, 256, 4, 64)
        eager = flashjit.attention(q, k, v, causal=True)  # compiles and tunes outside the capture
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = flashjit.attention(q, k, v, causal=True)
        g.replay()
        torch.cuda.synchronize()
        self.assertLess(rel_err(out, eager), 1e-2)


@unittest.skipUnless(HAVE_CUDA, "needs torch with a CUDA device")
class Backward(unittest.TestCase):
    def grads(self, fn, q, k, v, d_o):
        q, k, v = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
        fn(q, k, v).backward(d_o.to(q.dtype))
        return q.grad, k.grad, v.grad

    def test_matches_sdpa(self):
        torch.manual_seed(1)
        for mask_kind in ("causal", "window"):
            q, k, v = rand(2, 512, 8, 64), rand(2, 512, 4, 64), rand(2, 512, 4, 64)
            d_o = torch.randn(2, 512, 8, 64, device=DEV)
            qi = torch.arange(512, device=DEV)[:, None]
            kvi = torch.arange(512, device=DEV)[None, :]
            mask = (qi >= kvi) if mask_kind == "causal" else ((kvi >= qi - 128) & (kvi <= qi))
            kw = {"causal": True} if mask_kind == "causal" else {"mask": "window(128, 0)"}
            got = self.grads(lambda a, b, c: flashjit.attention(a, b, c, **kw), q, k, v, d_o)
            ref = self.grads(lambda a, b, c: sdpa_bshd(a, b, c, mask[None, None]), q.double(), k.double(), v.double(),
                             d_o)
            base = self.grads(lambda a, b, c: sdpa_bshd(a, b, c, mask[None, None]), q, k, v, d_o)
            for name, g, r, b in zip(("dq", "dk", "dv"), got, ref, base):
                floor = err(r.to(g.dtype), r)
                self.assertLessEqual(err(g, r), 2 * err(b, r) + floor, f"{mask_kind} {name}")


@unittest.skipUnless(HAVE_CUDA, "needs torch with a CUDA device")
class Compile(unittest.TestCase):
    def test_fullgraph_block_forward_and_backward(self):
        torch.manual_seed(2)

        class Block(torch.nn.Module):
            def __init__(self, dim=256, heads=4):
                super().__init__()
                self.heads = heads
                self.qkv = torch.nn.Linear(dim, 3 * dim, bias=False)
                self.out = torch.nn.Linear(dim, dim, bias=False)

            def forward(self, x):
                b, s, dim = x.shape
                q, k, v = self.qkv(x).view(b, s, 3, self.heads, dim // self.heads).unbind(2)
                o = flashjit.attention(q, k, v, mask="window(64, 0)")
                return self.out(o.reshape(b, s, dim))

        block = Block().to(DEV, torch.bfloat16)
        x = torch.randn(2, 256, 256, device=DEV, dtype=torch.bfloat16)
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)
        out = compiled(x)
        self.assertLess(rel_err(out, eager), 2e-2)
        out.float().square().mean().backward()
        g_compiled = block.qkv.weight.grad.clone()
        block.zero_grad()
        eager.float().square().mean().backward()
        self.assertLess(rel_err(g_compiled, block.qkv.weight.grad), 5e-2)


if __name__ == "__main__":
    unittest.main()
