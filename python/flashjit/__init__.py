"""flashjit for Python: FlashAttention kernels compiled at run time from a spec, over the library's
C ABI (ctypes; no compiled extension).

    import flashjit
    o = flashjit.attention(q, k, v, causal=True)                          # q: [batch, seq, heads, dim]
    o = flashjit.attention(q, k, v, mask="window(1024, 0)", score="30 * tanh(score / 30)")
    o, lse = flashjit.attention(q, k, v, spec=text, tensors={"doc": doc}, return_lse=True)
    ptx = flashjit.compile_ptx("dtype: bf16\\nhead_dim: 64\\n")           # no GPU needed

attention() needs torch (imported on first use); compile_ptx, build_spec and version do not.
"""
from ._capi import FlashjitError, library_path, version  # noqa: F401
from ._capi import compile_ptx as _compile_ptx
from .spec import build_spec  # noqa: F401

__version__ = "0.1.0"
__all__ = ["attention", "build_spec", "compile_ptx", "kernel", "library_path", "version", "FlashjitError"]


def compile_ptx(spec_yaml, arch=None):
    """The PTX text of a spec's forward kernel for arch (default sm_90a); no GPU needed.
    FlashjitError (status FJ_ERR_SPEC, with file:line:col messages) for a bad spec."""
    return _compile_ptx(spec_yaml, arch)[0]


def __getattr__(name):
    if name in ("attention", "kernel"):
        from . import _torch
        return getattr(_torch, name)
    raise AttributeError(f"module 'flashjit' has no attribute {name!r}")
