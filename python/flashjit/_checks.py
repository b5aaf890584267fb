"""Argument checks of flashjit.attention, on anything with torch's tensor attributes (shape,
stride(), dtype, device), so that they run without torch: every mismatch is a ValueError naming
the tensor and what is allowed, raised before anything reaches the C ABI (which sees only
pointers and strides, and would read a float32 tensor as bf16 without a word)."""

LAYOUTS = {"bshd": (0, 1, 2, 3), "bhsd": (0, 2, 1, 3)}
LAYOUT_DIMS = {"bshd": "[batch, seq, heads, dim]", "bhsd": "[batch, heads, seq, dim]"}


def check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}: use 'bshd' (flash-attn's [batch, seq, heads, dim]) or 'bhsd' "
                         "(SDPA's [batch, heads, seq, dim])")
    return LAYOUTS[layout]


def bshd_shape_stride(t, layout):
    """(shape, strides) of t seen as [batch, seq, heads, dim]; a size-1 dim's stride reads as 0
    (it is never stepped, whatever torch left there)."""
    perm = LAYOUTS[layout]
    shape = [int(t.shape[i]) for i in perm]
    stride = [int(t.stride()[i]) for i in perm]
    return shape, [0 if n == 1 else s for n, s in zip(shape, stride)]


def check_qkv(q, k, v, layout, want_dtype, spec_dtype, head_dim, head_dim_v):
    """Checks q, k, v against each other and the spec (want_dtype: the torch dtype of its
    spec_dtype "bf16"/"fp16"; head dims); returns (batch, seq_q, seq_kv, heads_q, heads_kv).
    Alignment is checked where the data pointers are real (check_aligned), not here: under
    torch.compile these are fake tensors. Only comparisons and integer arithmetic, so that
    TorchDynamo traces it without a graph break."""
    check_layout(layout)
    dims = LAYOUT_DIMS[layout]
    for name, t in (("q", q), ("k", k), ("v", v)):
        if len(t.shape) != 4:
            raise ValueError(f"{name}: expected 4 dimensions {dims} (layout={layout!r}), got shape {tuple(t.shape)}")
        if t.dtype != want_dtype:
            raise ValueError(f"{name}: dtype {t.dtype}; this kernel's spec is {spec_dtype}, so q, k and v must "
                             f"be {want_dtype}")
        if t.device.type != "cuda":
            raise ValueError(f"{name}: on {t.device}; q, k and v must be CUDA tensors")
        if t.device != q.device:
            raise ValueError(f"{name}: on {t.device} but q is on {q.device}; q, k and v must be on one device")
        if int(t.stride()[3]) != 1 and int(t.shape[3]) != 1:
            raise ValueError(f"{name}: the last (head) dimension must be contiguous (stride 1), got strides "
                             f"{tuple(t.stride())}; call .contiguous()")
    (bq, sq, hq, dq), (bk, sk, hk, dk), (bv, sv, hv, dv) = (bshd_shape_stride(t, layout)[0] for t in (q, k, v))
    if not bq == bk == bv:
        raise ValueError(f"k, v: batch sizes {bk}, {bv} differ from q's {bq}")
    if sk != sv:
        raise ValueError(f"v: {sv} keys but k has {sk}; k and v must have the same sequence length")
    if hk != hv:
        raise ValueError(f"v: {hv} heads but k has {hk}; k and v must have the same number of heads")
    if hq % hk != 0:
        raise ValueError(f"q: {hq} heads is not a multiple of k's and v's {hk} (grouped-query attention needs "
                         "heads_q divisible by heads_kv)")
    if dq != head_dim or dk != head_dim:
        raise ValueError(f"{'q' if dq != head_dim else 'k'}: head dim {dq if dq != head_dim else dk}; the spec's is "
                         f"{head_dim} (q and k)")
    want_v = head_dim_v or head_dim
    if dv != want_v:
        raise ValueError(f"v: head dim {dv}; the spec's is {want_v}")
    return bq, sq, sk, hq, hk


def check_aligned(name, t, layout="bshd"):
    """The C ABI's alignment rules, worded for Python: 16-byte aligned data, and strides of
    multiples of 8 elements (16 bytes) for every dim but the last."""
    if t.data_ptr() % 16 != 0:
        raise ValueError(f"{name}: data at {t.data_ptr():#x} is not 16-byte aligned (a view at an odd offset?); "
                         "flashjit needs 16-byte aligned tensors: pass a .clone()")
    _, strides = bshd_shape_stride(t, layout)
    if any(s < 0 or s % 8 != 0 for s in strides[:3]):
        raise ValueError(f"{name}: strides {tuple(t.stride())} (elements); every stride but the head dim's must be a "
                         "non-negative multiple of 8 (16 bytes): pass a .contiguous() copy")


def check_spec_tensor(name, t, device, want, want_type):
    """A tensor the spec reads (document ids, slopes): its declared type (want: the torch dtype of
    want_type "i32"/"f32"), contiguous, on q's device."""
    if t.dtype != want:
        raise ValueError(f"tensor '{name}': dtype {t.dtype}; the spec declares it {want_type}, so pass {want}")
    if t.device != device:
        raise ValueError(f"tensor '{name}': on {t.device}; it must be on q's device ({device})")
    if not t.is_contiguous():
        raise ValueError(f"tensor '{name}': must be contiguous (pass .contiguous())")
