"""flashjit's C ABI (include/flashjit/flashjit.h) through ctypes, for torch tensors: the layer under
flashjit.attention, usable on its own.

    rt = Runtime(0)                      # after torch has initialised CUDA (same primary context)
    kern = rt.compile(spec_yaml)         # raises FlashjitError (status FJ_ERR_SPEC, ...) on failure
    kern.forward(q, k, v, o)             # views of shape [batch, seq, heads, dim], any strides
    launch = kern.prepare(q, k, v, o)    # pre-built arguments: launch() costs one ctypes call
    kern.backward(q, k, v, o, d_o, dq, dk, dv, lse)   # gradients of a forward that wrote lse
    o = attention(kern, q, k, v)         # differentiable (torch.autograd): o.backward(d_o) fills q.grad, ...

Tensors are passed as data_ptr() and stride() in elements, viewed as [batch, seq, heads, dim]:
for BHSD storage pass `x.transpose(1, 2)`. The launch goes on torch.cuda.current_stream() unless
a stream is given. Where the library is found: library_path().
"""
import ctypes
import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
LIBRARY_NAMES = ("libflashjit.so.0", "libflashjit.so")

FJ_OK, FJ_ERROR, FJ_ERR_SPEC, FJ_ERR_USAGE, FJ_ERR_CUDA, FJ_ERR_NO_GPU, FJ_ERR_INTERNAL = 0, 1, 2, 3, 4, 69, 70
FJ_ERR_OUT_OF_MEMORY = 5
STATUS_NAMES = {0: "FJ_OK", 1: "FJ_ERROR", 2: "FJ_ERR_SPEC", 3: "FJ_ERR_USAGE", 4: "FJ_ERR_CUDA", 5: "FJ_ERR_OUT_OF_MEMORY",
                69: "FJ_ERR_NO_GPU", 70: "FJ_ERR_INTERNAL"}


class FlashjitError(RuntimeError):
    def __init__(self, status, message, where=""):
        self.status = status
        self.status_name = STATUS_NAMES.get(status, f"status {status}")
        self.message = message
        self.where = where
        super().__init__(f"{self.status_name}: {message}")


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("stride", ctypes.c_int64 * 4)]


class Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_double)]


class Buffer(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("numel", ctypes.c_int64)]


class ForwardArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("batch", ctypes.c_int64), ("seq_q", ctypes.c_int64), ("seq_kv", ctypes.c_int64),
                ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
                ("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor),
                ("lse", ctypes.c_void_p), ("scale", ctypes.c_float),
                ("params", ctypes.POINTER(Param)), ("num_params", ctypes.c_int),
                ("buffers", ctypes.POINTER(Buffer)), ("num_buffers", ctypes.c_int),
                ("stream", ctypes.c_void_p),
                ("block_map", ctypes.c_void_p),
                ("num_splits", ctypes.c_int),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_kv", ctypes.c_void_p),
                ("max_seqlen_q", ctypes.c_int64), ("max_seqlen_kv", ctypes.c_int64),
                ("block_table", ctypes.c_void_p), ("page_size", ctypes.c_int64),
                ("max_pages_per_seq", ctypes.c_int64), ("seqused_kv", ctypes.c_void_p)]


class BackwardArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("batch", ctypes.c_int64), ("seq_q", ctypes.c_int64), ("seq_kv", ctypes.c_int64),
                ("heads_q", ctypes.c_int64), ("heads_kv", ctypes.c_int64),
                ("q", Tensor), ("k", Tensor), ("v", Tensor), ("o", Tensor), ("d_o", Tensor),
                ("dq", Tensor), ("dk", Tensor), ("dv", Tensor),
                ("lse", ctypes.c_void_p), ("scale", ctypes.c_float),
                ("params", ctypes.POINTER(Param)), ("num_params", ctypes.c_int),
                ("buffers", ctypes.POINTER(Buffer)), ("num_buffers", ctypes.c_int),
                ("stream", ctypes.c_void_p),
                ("deterministic", ctypes.c_int),
                ("block_map", ctypes.c_void_p)]


class KernelInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("key", ctypes.c_char_p), ("entry", ctypes.c_char_p), ("description", ctypes.c_char_p),
                ("arch", ctypes.c_char_p), ("config_reason", ctypes.c_char_p), ("spec", ctypes.c_char_p),
                ("ptx", ctypes.c_char_p),
                ("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("num_warps", ctypes.c_int),
                ("num_stages", ctypes.c_int), ("threads", ctypes.c_int), ("shared_bytes", ctypes.c_int),
                ("registers", ctypes.c_int), ("spill_bytes", ctypes.c_int),
                ("head_dim_qk", ctypes.c_int), ("head_dim_v", ctypes.c_int)]


def library_path():
    """Where libflashjit is loaded from, first found of: $FLASHJIT_LIB (the library or its folder);
    the package's own folder (a bundled copy); a lib/ folder above the package (an install prefix
    P whose P/lib/python3.*/site-packages holds it, or P/lib beside P/python); a source checkout's
    .device/ or build/ (this file in <checkout>/python/flashjit); then the name libflashjit.so.0 for
    the dynamic loader (LD_LIBRARY_PATH, /usr/lib from the Debian package, ldconfig's cache)."""
    env = os.environ.get("FLASHJIT_LIB")
    if env:
        p = Path(env)
        if p.is_dir():
            return next((p / n for n in LIBRARY_NAMES if (p / n).exists()), p / LIBRARY_NAMES[0])
        return p
    folders = [PACKAGE] + [parent / "lib" for parent in list(PACKAGE.parents)[:5]]
    folders += [PACKAGE.parent.parent / ".device", PACKAGE.parent.parent / "build"]
    for folder in folders:
        for name in LIBRARY_NAMES:
            if (folder / name).exists():
                return folder / name
    return None


_lib = None


def lib():
    """Loads libflashjit.so once and declares the C signatures."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if path is not None and not path.exists():
        raise FileNotFoundError(f"FLASHJIT_LIB={os.environ.get('FLASHJIT_LIB')}: no libflashjit there")
    try:
        L = ctypes.CDLL(str(path) if path is not None else LIBRARY_NAMES[0])
    except OSError as e:
        raise FileNotFoundError(f"libflashjit not found ({e}); install flashjit (make install, the .deb) or "
                                "set FLASHJIT_LIB to libflashjit.so or its folder") from e
    st = ctypes.c_int
    P = ctypes.c_void_p
    sigs = {
        "fj_last_error": (ctypes.c_char_p, []),
        "fj_status_name": (ctypes.c_char_p, [st]),
        "fj_version": (ctypes.c_char_p, []),
        "fj_free": (None, [P]),
        "fj_compile_ptx": (st, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(P), ctypes.POINTER(P)]),
        "fj_runtime_create": (st, [ctypes.c_int, ctypes.POINTER(P)]),
        "fj_runtime_destroy": (None, [P]),
        "fj_compile": (st, [P, ctypes.c_char_p, ctypes.POINTER(P)]),
        "fj_kernel_destroy": (None, [P]),
        "fj_kernel_get_info": (st, [P, ctypes.POINTER(KernelInfo)]),
        "fj_kernel_wait_full": (st, [P]),
        "fj_forward": (st, [P, ctypes.POINTER(ForwardArgs)]),
        "fj_block_map_build": (st, [P, ctypes.POINTER(ForwardArgs), ctypes.POINTER(P)]),
        "fj_block_map_destroy": (None, [P]),
        "fj_backward_block_map_build": (st, [P, ctypes.POINTER(BackwardArgs), ctypes.POINTER(P)]),
        "fj_backward": (st, [P, ctypes.POINTER(BackwardArgs)]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(L, name)
        fn.restype = res
        fn.argtypes = args
    _lib = L
    return L


def _check(status, where):
    if status != FJ_OK:
        msg = lib().fj_last_error().decode("utf-8", "replace")
        raise FlashjitError(status, msg, where)


def version():
    return lib().fj_version().decode()


def compile_ptx(spec_yaml, arch=None):
    """(ptx, entry) for a spec, without a GPU."""
    L = lib()
    ptx, entry = ctypes.c_void_p(), ctypes.c_void_p()
    _check(L.fj_compile_ptx(spec_yaml.encode(), arch.encode() if arch else None, ctypes.byref(ptx), ctypes.byref(entry)),
           "fj_compile_ptx")
    try:
        return ctypes.string_at(ptx).decode(), ctypes.string_at(entry).decode()
    finally:
        L.fj_free(ptx)
        L.fj_free(entry)


def _tensor(t, what):
    if t.dim() != 4:
        raise ValueError(f"{what}: expected a 4-d [batch, seq, heads, dim] view, got shape {tuple(t.shape)}")
    if not t.is_cuda:
        raise ValueError(f"{what}: not a CUDA tensor")
    c = Tensor()
    c.data = t.data_ptr()
    for i, s in enumerate(t.stride()):
        c.stride[i] = s
    return c


def _params_and_buffers(a, params, buffers, keep):
    """Fills a's params and buffers arrays from {name: value} and {name: tensor}; `keep` collects
    what the C arrays point into, which must outlive every call made with `a`."""
    if params:
        arr = (Param * len(params))()
        for i, (name, value) in enumerate(params.items()):
            nb = name.encode()
            keep.append(nb)
            arr[i].name, arr[i].value = nb, float(value)
        a.params, a.num_params = ctypes.cast(arr, ctypes.POINTER(Param)), len(params)
        keep.append(arr)
    if buffers:
        arr = (Buffer * len(buffers))()
        for i, (name, t) in enumerate(buffers.items()):
            if not t.is_contiguous():
                raise ValueError(f"buffer {name}: must be contiguous")
            nb = name.encode()
            keep.append(nb)
            keep.append(t)
            arr[i].name, arr[i].data, arr[i].numel = nb, t.data_ptr(), t.numel()
        a.buffers, a.num_buffers = ctypes.cast(arr, ctypes.POINTER(Buffer)), len(buffers)
        keep.append(arr)


class _Handle:
    """Owns one C handle: close() (or garbage collection) calls the library's `_destroy` on it once."""

    _destroy = None  # name of the fj_*_destroy function

    def close(self):
        if getattr(self, "_h", None):
            getattr(lib(), self._destroy)(self._h)
            self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _BlockMap(_Handle):
    """An fj_block_map, destroyed with the launch closure that keeps it."""

    _destroy = "fj_block_map_destroy"

    def __init__(self, handle):
        self._h = handle


class Kernel(_Handle):
    _destroy = "fj_kernel_destroy"

    def __init__(self, handle, runtime):
        self._h = ctypes.c_void_p(handle)
        self._runtime = runtime  # kernels keep their context alive anyway; this keeps the wrapper tidy
        self._read_info()

    def wait_full(self):
        """Blocks until a tiered compile's full kernel has loaded (fj_kernel_wait_full): compile()
        may return with the kernel's quick form serving, the same results bit for bit, slower.
        Call it before timing the kernel. `info` and `config` then describe the full kernel."""
        _check(lib().fj_kernel_wait_full(self._h), "fj_kernel_wait_full")
        self._read_info()

    def _read_info(self):
        info = KernelInfo()
        info.struct_size = ctypes.sizeof(KernelInfo)
        _check(lib().fj_kernel_get_info(self._h, ctypes.byref(info)), "fj_kernel_get_info")
        self.spec_text = info.spec.decode()  # canonical YAML
        self.info = {}
        for name, _ in KernelInfo._fields_:
            if name in ("struct_size", "ptx", "spec"):
                continue
            val = getattr(info, name)
            self.info[name] = val.decode() if isinstance(val, bytes) else val
        self.config = f"bm{info.block_m}_bn{info.block_n}_w{info.num_warps}_s{info.num_stages}"

    def prepare(self, q, k, v, o, lse=None, scale=0.0, params=None, buffers=None, stream=None, block_map=False,
                num_splits=0, cu_seqlens_q=None, cu_seqlens_kv=None, max_seqlen_q=0, max_seqlen_kv=0,
                block_table=None, seqused_kv=None, seq_kv=None):
        """Builds the C argument struct once; returns launch() that runs the forward on it.

        q, k, v, o: torch views [batch, seq, heads, dim]; params: {name: value};
        buffers: {name: torch tensor (contiguous, of the spec's element type)}.
        block_map=True (masks that read tensors): build the block map once here, as
        FlexAttention's create_block_mask does, instead of a pre-pass before every launch; the
        buffers' contents must not change while launch() is used.
        num_splits: split-KV pieces per row (0 automatic, 1 never, 2..128).
        Varlen: q, k, v, o are packed [total_tokens, heads, dim] (or [1, total, heads, dim]) and
        cu_seqlens_q / cu_seqlens_kv are int32 CUDA tensors of batch + 1 offsets; max_seqlen_q/kv
        bound the longest sequence.
        Paged K/V: k and v are page pools [num_pages, page_size, heads_kv, dim], block_table an int32
        CUDA tensor [batch, max_pages_per_seq], seq_kv the most keys a sequence has (default: the
        table's capacity) and seqused_kv (optional, int32 [batch]) each sequence's key count."""
        import torch
        if cu_seqlens_q is not None or cu_seqlens_kv is not None:
            q, k, v, o = (t.unsqueeze(0) if t.dim() == 3 else t for t in (q, k, v, o))
        a = ForwardArgs()
        a.struct_size = ctypes.sizeof(ForwardArgs)
        a.batch, a.seq_q, a.heads_q = q.shape[0], q.shape[1], q.shape[2]
        a.seq_kv, a.heads_kv = k.shape[1], k.shape[2]
        keep = []
        if cu_seqlens_q is not None or cu_seqlens_kv is not None:
            for name, t in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_kv", cu_seqlens_kv)):
                if t is None or t.dtype != torch.int32 or not t.is_cuda or t.dim() != 1:
                    raise ValueError(f"{name}: expected a 1-d int32 CUDA tensor of batch + 1 offsets")
            if cu_seqlens_q.numel() != cu_seqlens_kv.numel():
                raise ValueError("cu_seqlens_q and cu_seqlens_kv: different lengths")
            a.batch = cu_seqlens_q.numel() - 1
            a.cu_seqlens_q, a.cu_seqlens_kv = cu_seqlens_q.data_ptr(), cu_seqlens_kv.data_ptr()
            a.max_seqlen_q, a.max_seqlen_kv = int(max_seqlen_q), int(max_seqlen_kv)
            keep.extend([cu_seqlens_q, cu_seqlens_kv])
        if block_table is not None:
            if block_table.dtype != torch.int32 or not block_table.is_cuda or block_table.dim() != 2:
                raise ValueError("block_table: expected a 2-d int32 CUDA tensor [batch, max_pages_per_seq]")
            a.block_table = block_table.data_ptr()
            a.page_size, a.max_pages_per_seq = k.shape[1], block_table.shape[1]
            a.seq_kv = int(seq_kv) if seq_kv is not None else k.shape[1] * block_table.shape[1]
            keep.append(block_table)
            if seqused_kv is not None:
                if seqused_kv.dtype != torch.int32 or not seqused_kv.is_cuda or seqused_kv.dim() != 1:
                    raise ValueError("seqused_kv: expected a 1-d int32 CUDA tensor [batch]")
                a.seqused_kv = seqused_kv.data_ptr()
                keep.append(seqused_kv)
        a.q, a.k, a.v, a.o = (_tensor(t, n) for t, n in ((q, "q"), (k, "k"), (v, "v"), (o, "o")))
        a.lse = lse.data_ptr() if lse is not None else None
        a.scale = float(scale)
        a.num_splits = int(num_splits)
        _params_and_buffers(a, params, buffers, keep)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        a.stream = stream
        keep.extend([q, k, v, o, lse])
        if block_map:
            m = ctypes.c_void_p()
            _check(lib().fj_block_map_build(self._h, ctypes.byref(a), ctypes.byref(m)), "fj_block_map_build")
            keep.append(_BlockMap(m))
            a.block_map = m
        return self._launcher("fj_forward", a, keep)

    def _launcher(self, entry, args, keep):
        """launch(): one call of the C entry `entry` on the prepared struct `args`; `keep` holds the
        tensors and C arrays the struct points into for as long as launch lives."""
        fn = getattr(lib(), entry)
        h = self._h
        ref = ctypes.byref(args)

        def launch():
            st = fn(h, ref)
            if st != FJ_OK:
                _check(st, entry)

        launch.args = args
        launch.keep = keep
        return launch

    def forward(self, q, k, v, o, **kw):
        self.prepare(q, k, v, o, **kw)()

    def prepare_backward(self, q, k, v, o, d_o, dq, dk, dv, lse, scale=0.0, params=None, buffers=None,
                         stream=None, deterministic=False, block_map=False):
        """Builds the fj_backward_args struct once; returns launch() that runs the backward on it.

        q, k, v, o, scale, params, buffers: as given to the forward that wrote `lse` (required:
        fp32 [batch, heads_q, seq_q], contiguous); d_o: dL/dO shaped like o; dq, dk, dv: written,
        shaped like q, k, v (GQA: dk, dv summed over each group's query heads).
        block_map=True (masks that read tensors): build the backward's block maps once here, as
        FlexAttention's BlockMask is built once, instead of before every launch; valid while the
        sizes, params and tensor contents stay the same."""
        import torch
        a = BackwardArgs()
        a.struct_size = ctypes.sizeof(BackwardArgs)
        a.batch, a.seq_q, a.heads_q = q.shape[0], q.shape[1], q.shape[2]
        a.seq_kv, a.heads_kv = k.shape[1], k.shape[2]
        named = (("q", q), ("k", k), ("v", v), ("o", o), ("d_o", d_o), ("dq", dq), ("dk", dk), ("dv", dv))
        for name, t in named:
            setattr(a, name, _tensor(t, name))
        if lse is not None:
            # The C ABI sees only a pointer: a wrong dtype or layout would give wrong gradients.
            want = (q.shape[0], q.shape[2], q.shape[1])
            if lse.dtype != torch.float32 or tuple(lse.shape) != want or not lse.is_contiguous() or not lse.is_cuda:
                raise ValueError(f"lse: expected a contiguous CUDA float32 tensor of shape {want} [batch, heads_q, "
                                 f"seq_q], got {lse.dtype} {tuple(lse.shape)} strides {lse.stride()}")
            a.lse = lse.data_ptr()
        a.scale = float(scale)
        keep = [t for _, t in named] + [lse]
        _params_and_buffers(a, params, buffers, keep)
        if stream is None:
            stream = torch.cuda.current_stream().cuda_stream
        a.stream = stream
        a.deterministic = 1 if deterministic else 0
        if block_map:
            m = ctypes.c_void_p()
            _check(lib().fj_backward_block_map_build(self._h, ctypes.byref(a), ctypes.byref(m)),
                   "fj_backward_block_map_build")
            keep.append(_BlockMap(m))
            a.block_map = m
        return self._launcher("fj_backward", a, keep)

    def backward(self, q, k, v, o, d_o, dq, dk, dv, lse, **kw):
        self.prepare_backward(q, k, v, o, d_o, dq, dk, dv, lse, **kw)()

    def attention(self, q, k, v, scale=0.0, params=None, buffers=None, deterministic=False):
        """The module's attention() through this kernel: O, differentiable in q, k and v."""
        return attention(self, q, k, v, scale=scale, params=params, buffers=buffers, deterministic=deterministic)


class Runtime(_Handle):
    _destroy = "fj_runtime_destroy"

    def __init__(self, device=0):
        h = ctypes.c_void_p()
        _check(lib().fj_runtime_create(device, ctypes.byref(h)), "fj_runtime_create")
        self._h = h

    def compile(self, spec_yaml):
        h = ctypes.c_void_p()
        _check(lib().fj_compile(self._h, spec_yaml.encode(), ctypes.byref(h)), "fj_compile")
        return Kernel(h.value, self)


_attention_function = None


def _autograd_function():
    """The torch.autograd.Function over fj_forward and fj_backward, defined on first use so that
    this module imports where torch is absent."""
    global _attention_function
    if _attention_function is not None:
        return _attention_function
    import torch

    class FlashjitAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, kernel, scale, params, buffers, deterministic):
            b, s_q, h_q = q.shape[0], q.shape[1], q.shape[2]
            o = q.new_empty((b, s_q, h_q, v.shape[3]))
            lse = torch.empty((b, h_q, s_q), dtype=torch.float32, device=q.device)
            kernel.forward(q, k, v, o, lse=lse, scale=scale, params=params, buffers=buffers)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.kernel, ctx.scale, ctx.params, ctx.buffers = kernel, scale, params, buffers
            ctx.deterministic = deterministic
            return o

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, d_o):
            q, k, v, o, lse = ctx.saved_tensors
            # The incoming gradient may be broadcast (zero strides) or a view at any offset; the
            # kernel needs unit head-dim stride and 16-byte aligned rows.
            d_o = d_o.contiguous()
            if d_o.data_ptr() % 16 != 0:
                d_o = d_o.clone()
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            ctx.kernel.backward(q, k, v, o, d_o, dq, dk, dv, lse, scale=ctx.scale, params=ctx.params,
                                buffers=ctx.buffers, deterministic=ctx.deterministic)
            return dq, dk, dv, None, None, None, None, None

    _attention_function = FlashjitAttention
    return FlashjitAttention


def attention(kernel, q, k, v, scale=0.0, params=None, buffers=None, deterministic=False):
    """O = attention(q, k, v) through `kernel`, recorded for torch.autograd: the forward keeps q, k,
    v, O and the LSE; the backward runs fj_backward on the current stream (the forward's, as
    autograd arranges) into fresh dq, dk, dv (torch.empty_like, so they keep q, k, v's strides
    where those are dense). Views [batch, seq, heads, dim], as Kernel.forward takes them."""
    return _autograd_function().apply(q, k, v, kernel, scale, params, buffers, deterministic)
