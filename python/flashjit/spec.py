"""Spec YAML from keyword arguments, as flashjit.attention builds it (no torch, no GPU needed).

    build_spec("bf16", 128, causal=True)
    build_spec("bf16", 128, mask="window(1024, 0)", score="30 * tanh(score / 30)")
    build_spec("bf16", 128, mask="causal && document(doc)", tensors={"doc": ("i32", ["batch", "seq_kv"])})

The mask and score languages are the spec DSL's (README "Specs"). Params are declared with
default 0 and take their values at every launch, so one kernel serves every value.
"""
DTYPES = {"bf16": "bf16", "bfloat16": "bf16", "torch.bfloat16": "bf16",
          "fp16": "fp16", "float16": "fp16", "half": "fp16", "torch.float16": "fp16"}
SCALAR_TYPES = {"i32": "i32", "int32": "i32", "torch.int32": "i32",
                "f32": "f32", "float32": "f32", "torch.float32": "f32"}
EXTENTS = ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv")


def quoted(text):
    """A YAML double-quoted scalar (JSON's escapes, which YAML shares)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def spec_dtype(dtype):
    """"bf16" or "fp16" for a dtype name or torch dtype; ValueError naming what is allowed."""
    name = DTYPES.get(str(dtype))
    if name is None:
        raise ValueError(f"dtype {dtype}: flashjit kernels take torch.bfloat16 or torch.float16 (bf16, fp16)")
    return name


def scalar_type(dtype, what):
    name = SCALAR_TYPES.get(str(dtype))
    if name is None:
        raise ValueError(f"{what}: dtype {dtype}; spec tensors are torch.int32 (i32) or torch.float32 (f32)")
    return name


def _param_type(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"param '{name}': {value!r} is not a number (ints are i32 params, floats f32)")
    return "i32" if isinstance(value, int) else "f32"


def build_spec(dtype, head_dim, head_dim_v=None, causal=False, mask=None, score=None, params=None, tensors=None,
               name=None):
    """The spec YAML text. params: {name: example value} (int → i32, float → f32); tensors:
    {name: (type, dims)} with type "i32"/"f32" and dims a list of extents (batch, heads_q,
    heads_kv, seq_q, seq_kv) or positive sizes."""
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0:
        raise ValueError(f"head_dim: expected a positive int, got {head_dim!r}")
    if head_dim_v is not None and (isinstance(head_dim_v, bool) or not isinstance(head_dim_v, int) or head_dim_v <= 0):
        raise ValueError(f"head_dim_v: expected a positive int, got {head_dim_v!r}")
    for what, text in (("mask", mask), ("score", score)):
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise ValueError(f"{what}: expected an expression string (README 'Specs'), got {text!r}")
    if causal and mask is not None:
        mask = f"causal && ({mask})"
    elif causal:
        mask = "causal"
    lines = [f"name: {name or 'python'}", f"dtype: {spec_dtype(dtype)}"]
    if head_dim_v is None or head_dim_v == head_dim:
        lines.append(f"head_dim: {head_dim}")
    else:
        lines.append(f"head_dim: {{qk: {head_dim}, v: {head_dim_v}}}")
    if mask is not None:
        lines.append(f"mask: {quoted(mask)}")
    if score is not None:
        lines.append(f"score: {quoted(score)}")
    if params:
        lines.append("params:")
        for pname, value in params.items():
            lines.append(f"  {pname}: {{type: {_param_type(pname, value)}, default: 0}}")
    if tensors:
        lines.append("tensors:")
        for tname, (ttype, dims) in tensors.items():
            for d in dims:
                if d not in EXTENTS and not (isinstance(d, int) and not isinstance(d, bool) and d > 0):
                    raise ValueError(f"tensor '{tname}': dim {d!r} is neither an extent ({', '.join(EXTENTS)}) "
                                     "nor a positive size")
            lines.append(f"  {tname}: {{type: {scalar_type(ttype, 'tensor ' + repr(tname))}, "
                         f"dims: [{', '.join(str(d) for d in dims)}]}}")
    return "\n".join(lines) + "\n"


def infer_tensor_dims(name, shape, sizes):
    """The dims of a spec tensor from its shape when exactly one of these fits: [seq_kv],
    [batch, seq_kv], [batch, heads_q, seq_kv] (document ids, per-key biases), [heads_q] (per-head
    slopes).
    `sizes`: {extent: size} of this call. ValueError asking for tensor_dims otherwise."""
    shape = tuple(shape)
    candidates = (("seq_kv",), ("heads_q",), ("batch", "seq_kv"), ("batch", "heads_q", "seq_kv"))
    found = [list(dims) for dims in candidates if shape == tuple(sizes[d] for d in dims)]
    if len(found) == 1:
        return found[0]
    raise ValueError(f"tensor '{name}' of shape {shape}: say which extents it spans with "
                     f"tensor_dims={{'{name}': [...]}} (each one of {', '.join(EXTENTS)} or a size; "
                     f"this call's sizes: {sizes})")
