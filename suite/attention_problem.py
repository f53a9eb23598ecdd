"""The attention problem: O = softmax(Q K^T * scale [+ causal mask]) V, the forward pass.

Operands in the layout attention libraries take: Q (b, hq, sq, d), K and V (b, hkv, skv, d), O (b, hq, sq, d), all
contiguous, fp16 or bf16 (one type for all four), d = 64 or 128, grouped-query attention (GQA: hq a multiple of hkv,
query head h reads key/value head h // (hq / hkv)), scale = 1 / sqrt(d).

A size is the tuple (b, hq, hkv, sq, skv, d, causal), causal 0 or 1; its shape label is "BxHQxHKVxSQxSKVxD", with
"-causal" appended for a causal size (what ``--size`` takes back). The inputs are (q, k, v, causal), causal a bool.

Causal mask, bottom-right aligned as FlashAttention aligns it when sq != skv: query row i sees key j when
j <= i + (skv - sq). With sq > skv the first sq - skv rows see no key at all: such a fully masked row's output is
zero (FlashAttention's answer), and the reference says so.

Work: 4 * d FLOPs (two multiply-adds, Q K^T and P V) per (query row, key) pair the mask keeps, times b * hq; without a
mask that is 4 * b * hq * sq * skv * d, and causal at sq == skv it is half of that plus the diagonal's sq / 2 pairs
(the kept pairs counted exactly, for any sq and skv). The fewest bytes: Q, K and V read once and O written once.

"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from suite.checks import canonical, check_no_overlap
from suite.problem_types import BadInput, DType, Problem, meta_tensor

Inputs = tuple  # (q, k, v, causal)
HEAD_DIMS = (64, 128)
TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LOG2E = 1.4426950408889634

# ---------------------------------------------------------------------------------------------------------------
# Sizes: (b, hq, hkv, sq, skv, d, causal)
# ---------------------------------------------------------------------------------------------------------------


def shape_label(size) -> str:
    *dims, causal = size
    return "x".join(str(x) for x in dims) + ("-causal" if causal else "")


def parse_size(text: str) -> tuple:
    """'BxHQxHKVxSQxSKVxD' or the same with '-causal'. ValueError naming the rule."""
    m = re.fullmatch(r"\s*([0-9x]+?)(-causal)?\s*", text.lower())
    parts = m[1].split("x") if m else []
    if not m or len(parts) != 6 or not all(p.isdigit() for p in parts):
        raise ValueError(
            f"{text!r}: an attention size is BxHQxHKVxSQxSKVxD, '-causal' appended for a causal mask "
            "(e.g. 4x32x8x4096x4096x128-causal)"
        )
    dims = [int(p) for p in parts]
    if min(dims) < 1:
        raise ValueError(f"{text!r}: every dimension must be >= 1")
    if max(dims) >= 2**31:
        raise ValueError(f"{text!r}: every dimension must be below 2^31")
    _, hq, hkv, _, _, d = dims
    if hq % hkv:  # the rules of attention_operands that a size alone decides, told before any work
        raise ValueError(f"{text!r}: HQ must be a multiple of HKV (grouped-query attention; got {hq} and {hkv})")
    if d not in HEAD_DIMS:
        raise ValueError(f"{text!r}: D (head_dim) must be one of {HEAD_DIMS} (got {d})")
    return (*dims, int(bool(m[2])))


def kept_pairs(sq: int, skv: int, causal: bool) -> int:
    """(query row, key) pairs the mask keeps: all of them, or with the bottom-right causal mask, row i keeps
    max(0, i + 1 + skv - sq) keys (never more than skv): the last m = min(sq, skv) rows keep skv, skv - 1, ...
    keys, the rows above them none."""
    if not causal:
        return sq * skv
    m = min(sq, skv)
    return m * skv - m * (m - 1) // 2


def work(size) -> float:
    b, hq, _, sq, skv, d, causal = size
    return 4.0 * b * hq * d * kept_pairs(sq, skv, bool(causal))


def min_bytes(size, dtype: str) -> float:
    """Q, K and V read once, O written once (2-byte elements)."""
    b, hq, hkv, sq, skv, d, _ = size
    return 2.0 * d * b * (2 * hq * sq + 2 * hkv * skv)


# ---------------------------------------------------------------------------------------------------------------
# Inputs and the reference
# ---------------------------------------------------------------------------------------------------------------


def make_inputs(size, seed: int, device, dtype: str | None = None) -> Inputs:
    """Q, K ~ N(0, 1), so the scores Q K^T / sqrt(d) are ~N(0, 1); V ~ N(0, 1), times sqrt(skv / e) without a mask.

    Whatever the rounding of P, an output element's error is at most its row's sqrt(sum p_j^2) times V's scale times
    the rounding (see the tolerances). A softmax over n keys of N(0, 1) scores has sum p_j^2 ~ e / n, so without a mask
    (every row n = skv) V's scale makes every output element of order 1 and every error relative to that: a small
    error in one block of keys shows whatever skv is. A causal row keeps 1 .. skv keys; V ~ N(0, 1) there bounds every
    row's error by the same absolute figure, and the short rows (a few keys, outputs of order 1) show any error of
    the mask itself."""
    b, hq, hkv, sq, skv, d, causal = size
    g = torch.Generator(device=device).manual_seed(seed)
    t = TORCH_DTYPES[dtype or "bf16"]
    v_scale = 1.0 if causal else math.sqrt(max(1.0, skv / math.e))
    q = torch.randn(b, hq, sq, d, generator=g, device=device, dtype=torch.float32)
    k = torch.randn(b, hkv, skv, d, generator=g, device=device, dtype=torch.float32)
    v = torch.randn(b, hkv, skv, d, generator=g, device=device, dtype=torch.float32) * v_scale
    return q.to(t), k.to(t), v.to(t), bool(causal)


def make_output(inputs: Inputs) -> torch.Tensor:
    return torch.empty_like(inputs[0])


def input_dtype(inputs: Inputs) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(inputs[0].dtype, str(inputs[0].dtype))


REFERENCE_CHUNK = 2**26  # score elements per reference step (256 MiB in fp32): bounded memory at 16k keys


def reference(inputs: Inputs) -> torch.Tensor:
    """O from the upcast inputs: fp64 where the score matrix is small (every CPU size), fp32 on the GPU's large
    sizes (exact products of 16-bit inputs, fp32 sums: ~1e-6 relative, far inside the tolerances), a chunk of query
    rows of every head at a time. A fully masked row (causal, sq > skv) is zero."""
    q, k, v, causal = inputs
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    group = hq // hkv
    acc = torch.float64 if b * hq * sq * skv <= 2**24 or q.device.type == "cpu" else torch.float32
    k = k.to(acc).repeat_interleave(group, dim=1)
    v = v.to(acc).repeat_interleave(group, dim=1)
    out = torch.empty(b, hq, sq, d, dtype=acc, device=q.device)
    rows = max(1, REFERENCE_CHUNK // max(1, b * hq * skv))
    keys = torch.arange(skv, device=q.device)
    for r0 in range(0, sq, rows):
        r1 = min(sq, r0 + rows)
        s = (q[:, :, r0:r1].to(acc) @ k.transpose(-1, -2)) / math.sqrt(d)  # (b, hq, rows, skv)
        if causal:
            visible = keys[None, :] <= torch.arange(r0, r1, device=q.device)[:, None] + (skv - sq)
            s = s.masked_fill(~visible, float("-inf"))
        m = s.amax(-1, keepdim=True)
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)  # a fully masked row: every exp is 0, not NaN
        p = torch.exp(s - m)
        denom = p.sum(-1, keepdim=True)
        out[:, :, r0:r1] = (p @ v) / torch.where(denom == 0, torch.ones_like(denom), denom)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The operands' rules, shared by every kernel of the problem (ValueError naming the rule, before any launch)
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AttentionOperands:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    out: torch.Tensor
    causal: bool
    b: int
    hq: int
    hkv: int
    sq: int
    skv: int
    d: int
    dtype: str  # "bf16" or "fp16"

    @property
    def group(self) -> int:
        return self.hq // self.hkv

    @property
    def scale(self) -> float:
        return 1.0 / math.sqrt(self.d)

    def kernel_scalars(self) -> tuple:
        """What the CUDA attention kernels take after their operands: hq, group, sq, skv, the scale times log2(e)
        (their softmax is in exp2) and the causal flag, as the kernels' C types."""
        import numpy as np

        return (
            *(np.int32(x) for x in (self.hq, self.group, self.sq, self.skv)),
            np.float32(self.scale * LOG2E),
            np.int32(self.causal),
        )


def attention_operands(inputs, out, dtypes: tuple[str, ...] = tuple(TORCH_DTYPES)) -> AttentionOperands:
    """Check (q, k, v, causal) and the output: rank 4, one dtype of ``dtypes`` for all four tensors, contiguous,
    16-byte aligned, one device, head_dim 64 or 128 and equal in Q, K and V, K and V of one shape, hq a multiple of
    hkv, batch equal, every dimension >= 1, O shaped as Q and apart from Q, K and V. The tensors come back with the
    strides of their shape (suite.checks.canonical: a size-1 dimension's stride is not looked at by torch)."""
    if not isinstance(inputs, (tuple, list)) or len(inputs) != 4 or not isinstance(inputs[3], bool):
        raise ValueError("attention takes (q, k, v, causal): three tensors and a bool")
    q, k, v, causal = inputs
    names = (("q", q), ("k", k), ("v", v), ("out", out))
    for name, t in names:
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor (got {type(t).__name__})")
        if t.dim() != 4:
            raise ValueError(f"{name} must have rank 4, (batch, heads, seq, head_dim) (got shape {tuple(t.shape)})")
    if len({t.dtype for _, t in names}) != 1:
        raise ValueError(
            "q, k, v and out must have the same dtype (got " + ", ".join(f"{n} {t.dtype}" for n, t in names) + ")"
        )
    dtype = input_dtype(inputs)
    if dtype not in dtypes:
        raise ValueError(f"dtype {dtype} is not implemented by this kernel (it implements {', '.join(dtypes)})")
    for name, t in names:
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (got strides {t.stride()} for shape {tuple(t.shape)})")
        if t.data_ptr() % 16:
            raise ValueError(f"{name}'s data must start on a 16-byte boundary (address {t.data_ptr():#x})")
    if len({t.device for _, t in names}) != 1:
        raise ValueError(
            "q, k, v and out must be on one device (got " + ", ".join(str(t.device) for _, t in names) + ")"
        )
    b, hq, sq, d = q.shape
    if k.shape[-1] != d or v.shape[-1] != d:
        raise ValueError(
            f"head_dim mismatch: q, k and v must have one head_dim (got {d}, {k.shape[-1]}, {v.shape[-1]})"
        )
    if d not in HEAD_DIMS:
        raise ValueError(f"head_dim must be one of {HEAD_DIMS} (got {d})")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have one shape (got {tuple(k.shape)} and {tuple(v.shape)})")
    bk, hkv, skv, _ = k.shape
    if bk != b:
        raise ValueError(f"q, k and v must have one batch size (got {b} and {bk})")
    if min(b, hq, sq, hkv, skv) < 1:
        raise ValueError(f"every dimension must be >= 1 (got q {tuple(q.shape)}, k {tuple(k.shape)})")
    if hq % hkv:
        raise ValueError(f"hq must be a multiple of hkv (grouped-query attention; got hq={hq}, hkv={hkv})")
    if tuple(out.shape) != tuple(q.shape):
        raise ValueError(f"out must have shape {tuple(q.shape)} (got {tuple(out.shape)})")
    check_no_overlap("out", out, ("q", q), ("k", k), ("v", v))
    q, k, v, out = map(canonical, (q, k, v, out))  # a size-1 dimension's stride as its shape gives it
    return AttentionOperands(q, k, v, out, causal, b, hq, hkv, sq, skv, d, dtype)


MAX_GRID_Y = 65535  # a CUDA grid's y dimension, where the attention kernels put batch x query heads


def check_grid_limits(ops: AttentionOperands, tile_rows: int) -> AttentionOperands:
    """What a kernel launching one program per (tile_rows query rows, batch x query head) needs: 32-bit row and key
    indices up to one tile past sq and skv, and b * hq within the grid's y dimension. ValueError naming the rule."""
    if max(ops.sq, ops.skv) > 2**31 - 1 - tile_rows:
        raise ValueError(f"sq and skv must be <= 2^31 - 1 - {tile_rows} (32-bit row and key indices)")
    if ops.b * ops.hq > MAX_GRID_Y:
        raise ValueError(f"b * hq must be <= {MAX_GRID_Y} (the grid's y dimension; got {ops.b * ops.hq})")
    return ops


def cuda_launch_operands(inputs, out, dtypes: tuple[str, ...], tile_rows: int) -> AttentionOperands:
    """attention_operands, check_grid_limits, and every tensor on a CUDA device: what an NVRTC kernel needs.
    ValueError naming the rule, before any launch."""
    from suite.checks import check_cuda

    ops = check_grid_limits(attention_operands(inputs, out, dtypes), tile_rows)
    check_cuda(("q", ops.q), ("k", ops.k), ("v", ops.v), ("out", out))
    return ops


def grid_limit_bad_inputs() -> list[BadInput]:
    """The b * hq rule of check_grid_limits as a kernel's bad input, on meta tensors (no memory)."""
    q, kv = (1, MAX_GRID_Y + 1, 8, 64), (1, 1, 8, 64)
    inputs = (meta_tensor(*q), meta_tensor(*kv), meta_tensor(*kv), False)
    return [BadInput(inputs, meta_tensor(*q), "b \\* hq must be", "b x hq past 65535")]


def _bad_inputs() -> list[BadInput]:
    def h(*shape, dtype=torch.bfloat16):
        return torch.randn(*shape).to(dtype)

    q, kv = (1, 2, 8, 64), (1, 1, 8, 64)
    unaligned = torch.randn(1 * 2 * 8 * 64 + 1).bfloat16()[1:].view(q)
    shared = h(3 * 8 * 64)  # v its first 512 elements, out 1024 from the 256th
    return [
        BadInput((h(2, 8, 64), h(*kv), h(*kv), False), h(2, 8, 64), "rank 4", "q 3-D"),
        BadInput((h(*q), h(1, 1, 8, 128), h(1, 1, 8, 128), False), h(*q), "head_dim mismatch", "k d=128"),
        BadInput((h(1, 2, 64, 8).transpose(-1, -2), h(*kv), h(*kv), False), h(*q), "contiguous", "q strided"),
        BadInput((unaligned, h(*kv), h(*kv), True), h(*q), "16-byte boundary", "q misaligned"),
        BadInput((h(*q), h(*kv, dtype=torch.float16), h(*kv), False), h(*q), "same dtype", "k fp16, q and v bf16"),
        BadInput((h(1, 3, 8, 64), h(1, 2, 8, 64), h(1, 2, 8, 64), False), h(1, 3, 8, 64), "multiple of hkv", "GQA 3/2"),
        BadInput((h(1, 2, 8, 32), h(1, 1, 8, 32), h(1, 1, 8, 32), False), h(1, 2, 8, 32), "head_dim must be", "d=32"),
        BadInput((h(*q), h(*kv), h(*kv), False), h(1, 2, 9, 64), "out must have shape", "out longer"),
        BadInput((h(*q), h(*kv), h(*kv)), h(*q), r"\(q, k, v, causal\)", "no causal flag"),
        BadInput(
            (h(*q), h(*kv), shared[:512].view(kv), False),
            shared[256:1280].view(q),
            "must not overlap v",
            "out overlaps v",
        ),
    ]


# ---------------------------------------------------------------------------------------------------------------
# Shape sets: public model configurations (Hugging Face config.json), batch x seq held at 16k tokens
# ---------------------------------------------------------------------------------------------------------------

# (hq, hkv, d): Llama-3-8B: 32 heads, 8 KV heads of 128; Llama-3-70B: 64 / 8 of 128; Llama-3.2-1B: 32 / 8 of 64
MODELS = {"llama3-8b": (32, 8, 128), "llama3-70b": (64, 8, 128), "llama3.2-1b": (32, 8, 64)}
TOKENS = 16384
SEQS = (512, 1024, 2048, 4096, 8192, 16384)


def model_shapes(model: str) -> tuple:
    hq, hkv, d = MODELS[model]
    return tuple((TOKENS // s, hq, hkv, s, s, d, causal) for s in SEQS for causal in (1, 0))


SHAPE_SETS = {
    "attn-8b": model_shapes("llama3-8b"),
    "attn-70b": model_shapes("llama3-70b"),
    "attn-d64": model_shapes("llama3.2-1b"),
}
DEFAULT_SIZES = ((4, 32, 8, 4096, 4096, 128, 1), (4, 32, 8, 4096, 4096, 128, 0))

# The edge sizes every variant validates at: one row and one key; odd lengths (not multiples of any tile) under a
# causal mask with GQA; sq < skv and batch 2 at d = 128; sq > skv causal (rows 0 .. 84 fully masked) with 4 query
# heads per KV head; a causal sq < skv one row past two 64-row tiles.
EDGE_SIZES = (
    (1, 2, 1, 1, 1, 64, 0),
    (1, 4, 2, 67, 67, 64, 1),
    (2, 2, 2, 45, 130, 128, 0),
    (1, 4, 1, 130, 45, 128, 1),
    (1, 2, 1, 129, 200, 64, 1),
)

# Tolerances. The kernels keep the scores and the softmax in fp32 and round the probabilities P to the input type for
# the P V product, as FlashAttention does: each p_j off by up to half an ulp relative, which is 2^-8 for bf16 (8
# significant bits: 2^-9 to 2^-8 across a binade) and 2^-11 for fp16 at most, errors independent, so an output element
# is off by up to ~2^-8 / sqrt(3) x sqrt(sum p_j^2 v_j^2) at one sigma (bf16), which the inputs' scaling (make_inputs)
# keeps at ~2.3e-3 (bf16) or ~2.8e-4 (fp16) of order-1 outputs in every row; then O itself is rounded to the input
# type (half an ulp, relative). rtol of 4 half-ulps (bf16) and an atol of ~9 sigma bound both with margin over 10^8
# elements (the largest of 10^8 normal draws is ~6 sigma) and still catch a wrong head, row, mask or key block (a
# 64-key block moves an unmasked row's outputs by ~sqrt(64 / skv) of their scale: 6% at 16k keys, so its largest
# shift in a row of 128 outputs is several times the atol).
_BF16_TOL = {"rtol": 1.6e-2, "atol": 2e-2}
_FP16_TOL = {"rtol": 4e-3, "atol": 2.5e-3}


def attention_problem() -> Problem:
    """The attention Problem."""
    dtypes = {
        "bf16": DType("bf16", "bf16->fp32acc->bf16", _BF16_TOL, bytes_in=2, bytes_out=2),
        "fp16": DType("fp16", "fp16->fp32acc->fp16", _FP16_TOL, bytes_in=2, bytes_out=2),
    }
    return Problem(
        name="attention",
        dtypes=dtypes,
        unit="TFLOP/s",
        default_sizes=DEFAULT_SIZES,
        quick_sizes=(DEFAULT_SIZES[0],),
        cpu_sizes=((1, 4, 2, 200, 200, 64, 1), (1, 2, 1, 130, 260, 128, 0)),
        edge_sizes=EDGE_SIZES,
        make_inputs=make_inputs,
        make_output=make_output,
        reference=reference,
        bad_inputs=_bad_inputs,
        work=work,
        scale=1e12,
        cpu_max_work=2**30,
        cpu_limit="4*b*hq*sq*skv*d <= 2^30 (e.g. 1x4x2x512x512x128)",
        shape_sets=SHAPE_SETS,
        min_bytes=min_bytes,
        input_dtype=input_dtype,
        size_parser=parse_size,
        shape_label=shape_label,
    )
