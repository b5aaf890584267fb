"""flashjit.attention for torch: kernels memoised per (spec, device), the forward and backward as
torch.library custom ops (with fake implementations, so torch.compile(fullgraph=True) traces
through them and CUDA graphs capture them), and autograd through the C ABI's fj_backward."""
import re
from typing import List, Tuple

import torch

from . import _capi, _checks
from .spec import build_spec, infer_tensor_dims

# Plain comparisons with torch dtypes (no str() of them), so that TorchDynamo traces the checks.
_DTYPES = ((torch.bfloat16, "bf16"), (torch.float16, "fp16"))
_SCALARS = ((torch.int32, "i32"), (torch.float32, "f32"))


def _name_of(dtype, table):
    for t, name in table:
        if dtype == t:
            return name
    return None


def _dtype_of(name, table):
    for t, n in table:
        if n == name:
            return t
    raise ValueError(f"dtype {name}: expected one of {', '.join(n for _, n in table)}")

_runtimes = {}  # device index → _capi.Runtime
_kernels = {}   # (spec text, device index) → _capi.Kernel


def kernel(spec_yaml, device):
    """The compiled kernel of a spec on a CUDA device (torch.device or index), memoised."""
    index = torch.device("cuda", device).index if isinstance(device, int) else torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    key = (spec_yaml, index)
    k = _kernels.get(key)
    if k is None:
        rt = _runtimes.get(index)
        if rt is None:
            torch.cuda.init()  # flashjit uses the primary context torch made current
            with torch.cuda.device(index):
                rt = _runtimes[index] = _capi.Runtime(index)
        k = _kernels[key] = rt.compile(spec_yaml)
    return k


def _bshd(t, layout):
    return t if layout == "bshd" else t.transpose(1, 2)


# Names travel as one newline-joined string: torch.library's schema has no list of str (DSL names
# are identifiers, never holding a newline).
def _names(joined):
    return joined.split("\n") if joined else []


def _launch_dicts(param_names, param_values, tensor_names, tensors):
    return dict(zip(_names(param_names), param_values)), dict(zip(_names(tensor_names), tensors))


@torch.library.custom_op("flashjit::forward", mutates_args=())
def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spec: str, scale: float, param_names: str,
             param_values: List[float], tensor_names: str, tensors: List[torch.Tensor]
             ) -> Tuple[torch.Tensor, torch.Tensor]:
    """O [b, s_q, h_q, d_v] and the LSE [b, h_q, s_q] (fp32) of q, k, v viewed as BSHD."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        _checks.check_aligned(name, t)
    b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    o = q.new_empty((b, s_q, h_q, v.shape[3]))
    lse = torch.empty((b, h_q, s_q), dtype=torch.float32, device=q.device)
    params, buffers = _launch_dicts(param_names, param_values, tensor_names, tensors)
    kernel(spec, q.device).forward(q, k, v, o, lse=lse, scale=scale, params=params, buffers=buffers)
    return o, lse


@_forward.register_fake
def _forward_fake(q, k, v, spec, scale, param_names, param_values, tensor_names, tensors):
    b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
    return q.new_empty((b, s_q, h_q, v.shape[3])), q.new_empty((b, h_q, s_q), dtype=torch.float32)


@torch.library.custom_op("flashjit::backward", mutates_args=())
def _backward(d_o: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
              lse: torch.Tensor, spec: str, scale: float, param_names: str, param_values: List[float],
              tensor_names: str, tensors: List[torch.Tensor], deterministic: bool
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV (FlashAttention-2's backward, P recomputed from the LSE) shaped like q, k, v."""
    # The incoming gradient may be broadcast (zero strides) or a view at any offset.
    d_o = d_o.contiguous()
    if d_o.data_ptr() % 16 != 0:
        d_o = d_o.clone()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    params, buffers = _launch_dicts(param_names, param_values, tensor_names, tensors)
    kernel(spec, q.device).backward(q, k, v, o, d_o, dq, dk, dv, lse, scale=scale, params=params, buffers=buffers,
                                    deterministic=deterministic)
    return dq, dk, dv


@_backward.register_fake
def _backward_fake(d_o, q, k, v, o, lse, spec, scale, param_names, param_values, tensor_names, tensors,
                   deterministic):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, spec, scale, param_names, param_values, tensor_names, tensors = inputs
    o, lse = output
    ctx.mark_non_differentiable(lse)  # fj_backward takes dO only: the LSE is an output, not a path for gradients
    ctx.save_for_backward(q, k, v, o, lse, *tensors)
    ctx.args = (spec, scale, param_names, param_values, tensor_names)
    ctx.deterministic = _deterministic()
    # torch.library wants the gradients in the inputs' structure: a list for each list input.
    ctx.no_grads = [[None] * len(x) if isinstance(x, (list, tuple)) else None for x in inputs]


def _grad(ctx, d_o, d_lse):
    q, k, v, o, lse, *tensors = ctx.saved_tensors
    spec, scale, param_names, param_values, tensor_names = ctx.args
    dq, dk, dv = torch.ops.flashjit.backward(d_o, q, k, v, o, lse, spec, scale, param_names, param_values,
                                             tensor_names, tensors, ctx.deterministic)
    # Spec tensors and params get no gradient.
    return (dq, dk, dv, *ctx.no_grads[3:])


def _deterministic():
    return torch.are_deterministic_algorithms_enabled()


_forward.register_autograd(_grad, setup_context=_setup_context)


@torch.compiler.assume_constant_result
def _spec_info(spec, device_index):
    """(dtype, head_dim, head_dim_v, ((tensor, type), ...)) of a spec given as text, from its kernel
    (compiled here, memoised): a constant for TorchDynamo, which cannot trace the C library."""
    k = kernel(spec, device_index)
    canonical = k.spec_text
    dtype = re.search(r"^dtype: (\w+)", canonical, re.M).group(1)
    tensors = canonical.split("\ntensors:", 1)[1] if "\ntensors:" in canonical else ""
    types = tuple(re.findall(r"^  (\w+): \{type: (i32|f32)", tensors, re.M))
    return dtype, k.info["head_dim_qk"], k.info["head_dim_v"], types


def attention(q, k, v, *, causal=False, mask=None, score=None, spec=None, params=None, tensors=None,
              tensor_dims=None, return_lse=False, layout="bshd", scale=None, head_dim_v=None):
    """softmax(score(scale·QKᵀ) masked)·V with a flashjit kernel; differentiable in q, k and v.

    q: [batch, seq_q, heads_q, d], k: [batch, seq_kv, heads_kv, d], v: [batch, seq_kv, heads_kv, d_v]
    (layout="bhsd": [batch, heads, seq, dim], as SDPA). The spec is built from causal, mask, score,
    params and tensors (flashjit.spec.build_spec) or given whole as `spec` (YAML text), with
    `tensors` its tensors by name and `params` its params' values. Returns O in q's layout, and
    with return_lse=True also the LSE [batch, heads_q, seq_q] (fp32, natural log; no gradient).
    Every argument mismatch is a ValueError naming the tensor; spec errors are flashjit.FlashjitError."""
    _checks.check_layout(layout)
    params = dict(params or {})
    tensors = dict(tensors or {})
    if spec is not None:
        if causal or mask is not None or score is not None or head_dim_v is not None:
            raise ValueError("spec: give either a whole spec or causal/mask/score/head_dim_v, not both")
        if tensor_dims:
            raise ValueError("tensor_dims: a whole spec declares its tensors' dims itself")
        if not getattr(q, "is_cuda", False):
            raise ValueError(f"q: on {q.device}; q, k and v must be CUDA tensors")
        dtype, d, d_v, declared = _spec_info(spec, q.device.index if q.device.index is not None else 0)
        types = dict(declared)
        for name in tensors:
            if name not in types:
                raise ValueError(f"tensor '{name}': the spec declares no such tensor (it has: "
                                 f"{', '.join(types) or 'none'})")
    else:
        if not hasattr(q, "dtype") or len(q.shape) != 4:
            raise ValueError(f"q: expected a 4-d tensor, got {type(q).__name__} of shape {tuple(getattr(q, 'shape', ()))}")
        dtype, d = _name_of(q.dtype, _DTYPES), int(q.shape[3])
        if dtype is None:
            raise ValueError(f"q: dtype {q.dtype}; flashjit kernels take torch.bfloat16 or torch.float16")
        d_v = head_dim_v if head_dim_v is not None else int(v.shape[3])
    b, s_q, s_kv, h_q, h_kv = _checks.check_qkv(q, k, v, layout, _dtype_of(dtype, _DTYPES), dtype, d, d_v)
    if spec is None:
        sizes = {"batch": b, "seq_q": s_q, "seq_kv": s_kv, "heads_q": h_q, "heads_kv": h_kv}
        dims = dict(tensor_dims or {})
        for name in dims:
            if name not in tensors:
                raise ValueError(f"tensor_dims: '{name}' is not in tensors ({', '.join(tensors) or 'none'})")
        decls = {}
        for n, t in tensors.items():
            if _name_of(t.dtype, _SCALARS) is None:
                raise ValueError(f"tensor '{n}': dtype {t.dtype}; spec tensors are torch.int32 or torch.float32")
            decls[n] = (_name_of(t.dtype, _SCALARS), dims.get(n) or infer_tensor_dims(n, t.shape, sizes))
        types = {n: decl[0] for n, decl in decls.items()}
        spec = build_spec(dtype, d, d_v, causal=causal, mask=mask, score=score, params=params, tensors=decls)
    for name, t in tensors.items():
        _checks.check_spec_tensor(name, t, q.device, _dtype_of(types[name], _SCALARS), types[name])
    if scale is not None and not (float(scale) > 0 and float(scale) != float("inf")):
        raise ValueError(f"scale: {scale!r}; it must be a finite number > 0 (None: 1/sqrt(head dim))")
    o, lse = torch.ops.flashjit.forward(_bshd(q, layout), _bshd(k, layout), _bshd(v, layout), spec,
                                        0.0 if scale is None else float(scale), "\n".join(params),
                                        [float(x) for x in params.values()], "\n".join(tensors),
                                        list(tensors.values()))
    o = _bshd(o, layout)
    return (o, lse) if return_lse else o
