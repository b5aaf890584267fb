"""flashjit's Python package without torch or a GPU: compile_ptx, spec building and the argument
checks of flashjit.attention (on stand-in tensors with torch's attributes). Run by CTest:
    FLASHJIT_LIB=build/libflashjit.so python3 -m unittest discover -s python/tests -p 'test_nogpu.py'
"""
import os
import re
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if os.environ.get("FLASHJIT_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(ROOT))

import flashjit  # noqa: E402
from flashjit import _checks  # noqa: E402
from flashjit.spec import build_spec, infer_tensor_dims  # noqa: E402


class Device:
    def __init__(self, name):
        self.type, _, index = name.partition(":")
        self.index = int(index) if index else None

    def __eq__(self, other):
        return (self.type, self.index) == (other.type, other.index)

    def __str__(self):
        return self.type + ("" if self.index is None else f":{self.index}")


class FakeTensor:
    """What the checks read of a torch tensor: shape, stride(), dtype, device, data_ptr()."""

    def __init__(self, shape, dtype="bf16", device="cuda:0", stride=None, ptr=4096):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = Device(device)
        if stride is None:
            stride, n = [], 1
            for s in reversed(self.shape):
                stride.insert(0, n)
                n *= s
        self._stride = tuple(stride)
        self._ptr = ptr

    def stride(self):
        return self._stride

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        return self._stride == FakeTensor(self.shape).stride()


def qkv(b=2, s=128, h=4, h_kv=4, d=64, d_v=None, **kw):
    return (FakeTensor((b, s, h, d), **kw), FakeTensor((b, s, h_kv, d), **kw),
            FakeTensor((b, s, h_kv, d_v or d), **kw))


def check(q, k, v, layout="bshd", d=64, d_v=None):
    return _checks.check_qkv(q, k, v, layout, "bf16", "bf16", d, d_v)


class CompilePtx(unittest.TestCase):
    def test_the_issue_example(self):
        ptx = flashjit.compile_ptx("dtype: bf16\nhead_dim: 64\n")
        self.assertIn(".entry", ptx)
        self.assertIn(".target sm_90a", ptx)

    def test_arch(self):
        self.assertIn(".target sm_80", flashjit.compile_ptx("dtype: fp16\nhead_dim: 64\n", arch="sm_80"))

    def test_a_bad_spec_is_an_error_with_its_position(self):
        with self.assertRaises(flashjit.FlashjitError) as e:
            flashjit.compile_ptx("dtype: bf16\nhead_dim: 64\nmask: \"causal && q <\"\n")
        self.assertEqual(e.exception.status_name, "FJ_ERR_SPEC")
        self.assertRegex(e.exception.message, r":3:\d+")

    def test_version_is_the_headers(self):
        header = (ROOT.parent / "include" / "flashjit" / "version.h").read_text()
        want = ".".join(re.search(rf"FLASHJIT_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH"))
        self.assertEqual(flashjit.version(), want)
        self.assertEqual(flashjit.__version__, want)
        self.assertIn(f'version = "{want}"', (ROOT / "pyproject.toml").read_text())


class BuildSpec(unittest.TestCase):
    def test_causal_window_score_params_compile(self):
        text = build_spec("bf16", 128, causal=True, mask="q - kv < window", score="30 * tanh(score / 30)",
                          params={"window": 256})
        self.assertIn('mask: "causal && (q - kv < window)"', text)
        self.assertIn("window: {type: i32, default: 0}", text)
        self.assertIn(".entry", flashjit.compile_ptx(text))

    def test_document_mask_and_head_dim_v_compile(self):
        text = build_spec("fp16", 192, 128, mask="causal && document(doc)",
                          tensors={"doc": ("i32", ["batch", "seq_kv"])})
        self.assertIn("head_dim: {qk: 192, v: 128}", text)
        self.assertIn(".entry", flashjit.compile_ptx(text))

    def test_quotes_in_expressions(self):
        self.assertIn('mask: "window(256, 0)"', build_spec("bf16", 64, mask="window(256, 0)"))

    def test_errors_name_the_argument(self):
        for kwargs, word in (({"dtype": "float32"}, "dtype float32"), ({"head_dim": 0}, "head_dim"),
                             ({"mask": ""}, "mask"), ({"params": {"w": "x"}}, "param 'w'"),
                             ({"tensors": {"t": ("i32", ["seqq"])}}, "tensor 't'"),
                             ({"tensors": {"t": ("int64", ["batch"])}}, "tensor 't'")):
            args = {"dtype": "bf16", "head_dim": 64, **kwargs}
            with self.assertRaisesRegex(ValueError, word):
                build_spec(args.pop("dtype"), args.pop("head_dim"), **args)

    def test_tensor_dims_are_inferred_only_when_one_fits(self):
        sizes = {"batch": 2, "seq_q": 128, "seq_kv": 128, "heads_q": 4, "heads_kv": 4}
        self.assertEqual(infer_tensor_dims("doc", (2, 128), sizes), ["batch", "seq_kv"])
        self.assertEqual(infer_tensor_dims("slope", (4,), sizes), ["heads_q"])
        with self.assertRaisesRegex(ValueError, "tensor 'x'.*tensor_dims"):
            infer_tensor_dims("x", (3, 5), sizes)
        with self.assertRaisesRegex(ValueError, "tensor 'x'"):
            infer_tensor_dims("x", (4,), dict(sizes, seq_kv=4))  # [seq_kv] or [heads_q]


class Checks(unittest.TestCase):
    def test_valid(self):
        self.assertEqual(check(*qkv()), (2, 128, 128, 4, 4))
        self.assertEqual(check(*qkv(h=8, h_kv=2, d_v=32), d_v=32), (2, 128, 128, 8, 2))

    def test_bhsd(self):
        q, k, v = (FakeTensor((2, 4, 128, 64)) for _ in range(3))
        self.assertEqual(check(q, k, v, layout="bhsd"), (2, 128, 128, 4, 4))
        with self.assertRaisesRegex(ValueError, "layout='bsdh'"):
            check(q, k, v, layout="bsdh")

    def test_each_mismatch_names_the_tensor(self):
        q, k, v = qkv()
        cases = [
            ((FakeTensor((2, 128, 4)), k, v), r"^q: expected 4 dimensions"),
            ((q, FakeTensor((2, 128, 4, 64), dtype="f32"), v), r"^k: dtype f32.*spec is bf16"),
            ((q, k, FakeTensor((2, 128, 4, 64), device="cpu")), r"^v: on cpu"),
            ((q, k, FakeTensor((2, 128, 4, 64), device="cuda:1")), r"^v: on cuda:1 but q is on cuda:0"),
            ((q, k, FakeTensor((2, 128, 4, 64), stride=(32768, 256, 1, 4))), r"^v: the last .* contiguous"),
            ((q, FakeTensor((1, 128, 4, 64)), v), r"^k, v: batch sizes"),
            ((q, k, FakeTensor((2, 64, 4, 64))), r"^v: 64 keys but k has 128"),
            ((FakeTensor((2, 128, 6, 64)), FakeTensor((2, 128, 4, 64)), FakeTensor((2, 128, 4, 64))),
             r"^q: 6 heads is not a multiple"),
            ((FakeTensor((2, 128, 4, 32)), k, v), r"^q: head dim 32; the spec's is 64"),
            ((q, k, FakeTensor((2, 128, 4, 32))), r"^v: head dim 32; the spec's is 64"),
        ]
        for args, pattern in cases:
            with self.subTest(pattern=pattern), self.assertRaisesRegex(ValueError, pattern):
                check(*args)

    def test_alignment(self):
        _checks.check_aligned("q", FakeTensor((2, 128, 4, 64)))
        with self.assertRaisesRegex(ValueError, "^k: data at 0x1002 is not 16-byte aligned"):
            _checks.check_aligned("k", FakeTensor((2, 128, 4, 64), ptr=0x1002))
        with self.assertRaisesRegex(ValueError, "^v: strides .* multiple of 8"):
            _checks.check_aligned("v", FakeTensor((2, 128, 4, 60), stride=(30720, 240, 60, 1)))
        # A size-1 dim's stride is never stepped, whatever it is.
        _checks.check_aligned("q", FakeTensor((1, 128, 1, 64), stride=(3, 64, 5, 1)))

    def test_spec_tensor(self):
        dev = Device("cuda:0")
        _checks.check_spec_tensor("doc", FakeTensor((2, 128), dtype="i32"), dev, "i32", "i32")
        with self.assertRaisesRegex(ValueError, "^tensor 'doc': dtype i64; the spec declares it i32"):
            _checks.check_spec_tensor("doc", FakeTensor((2, 128), dtype="i64"), dev, "i32", "i32")
        with self.assertRaisesRegex(ValueError, "^tensor 'doc': must be contiguous"):
            _checks.check_spec_tensor("doc", FakeTensor((2, 128), dtype="i32", stride=(1, 2)), dev, "i32", "i32")


class Library(unittest.TestCase):
    def test_flashjit_lib_names_a_missing_file(self):
        saved = os.environ.get("FLASHJIT_LIB")
        os.environ["FLASHJIT_LIB"] = "/nonexistent/libflashjit.so"
        try:
            self.assertEqual(str(flashjit.library_path()), "/nonexistent/libflashjit.so")
        finally:
            if saved is None:
                del os.environ["FLASHJIT_LIB"]
            else:
                os.environ["FLASHJIT_LIB"] = saved

    def test_importing_flashjit_does_not_import_torch(self):
        import subprocess
        code = "import sys, flashjit; flashjit.build_spec('bf16', 64); assert 'torch' not in sys.modules, 'torch'"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
