"""The problems both backends solve: how to make inputs, the reference answer (in higher precision), how to judge
an output against it, and how much work one solution does (for the throughput columns).

A size is an int for ``vector`` (n) and an (M, N, K) tuple for ``gemm``. A problem has one or more data types
(``DType``): the vector is fp32; the GEMM is fp16 (the default), bf16 or fp8 e4m3, each with its own inputs, output
type, tolerance and ceiling. Named shape sets (``Problem.shape_sets``) are what ``--shapes NAME`` picks; a set
given as a function of (seed, count) is drawn when the plan is made (the GEMM's ``sweep``, suite.model_shapes).
"""

from __future__ import annotations

import math

import torch

from suite.attention_problem import attention_problem
from suite.model_shapes import sweep_shapes
from suite.problem_types import BadInput, Check, DType, Inputs, Problem

__all__ = ["BadInput", "Check", "DType", "Inputs", "Problem", "PROBLEMS"]


# ---------------------------------------------------------------------------------------------------------------
# vector: y = 2 * x, fp32, bit-exact
# ---------------------------------------------------------------------------------------------------------------


def _vector_inputs(n: int, seed: int, device: torch.device, dtype: str | None = None) -> Inputs:
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(n, generator=g, device=device, dtype=torch.float32),)


def _f32(n: int, offset: int = 0) -> torch.Tensor:
    return torch.randn(n + offset)[offset:]


def _vector_bad_inputs() -> list[BadInput]:
    shared = torch.randn(12)  # y 4 elements (16 bytes) past x
    return [
        BadInput((torch.randn(8, dtype=torch.float64),), torch.empty(8), "dtype torch.float32", "x fp64"),
        BadInput((torch.randn(4, 4),), torch.empty(4, 4), "rank 1", "x 2-D"),
        BadInput((torch.randn(16)[::2],), torch.empty(8), "contiguous", "x strided"),
        BadInput((_f32(8, offset=1),), torch.empty(8), "16-byte boundary", "x misaligned"),
        BadInput((torch.randn(8),), torch.empty(9), r"shape \(8,\)", "y longer"),
        BadInput((torch.randn(8),), torch.empty(8, dtype=torch.float16), "dtype torch.float32", "y fp16"),
        BadInput((shared[:8],), shared[4:], "y must not overlap x", "y overlaps x"),
    ]


VECTOR = Problem(
    name="vector",
    dtypes={"fp32": DType("fp32", "fp32", tolerance={"rtol": 0.0, "atol": 0.0}, bytes_in=4, bytes_out=4)},  # exact
    unit="GB/s",
    default_sizes=(2**28,),  # 1 GiB in + 1 GiB out: 35x the 60 MiB L2
    quick_sizes=(2**26,),
    cpu_sizes=(5 * 8192 + 3,),  # several tiles, several programs, a ragged tail
    # one element, no whole 16-byte chunk, one 1 KiB row and a tail (the descriptor loop's rows == 1, which Triton's
    # launcher would specialize), ragged tails over tiles
    edge_sizes=(1, 3, 4, 300, 4097, 3 * 8192 + 5),
    make_inputs=_vector_inputs,
    make_output=lambda inputs: torch.empty_like(inputs[0]),
    reference=lambda inputs: inputs[0] * 2,  # exact in fp32
    bad_inputs=_vector_bad_inputs,
    work=lambda n: 2 * n * 4,  # bytes read + written
    scale=1e9,
    cpu_max_work=2 * 4 * 2**24,  # n <= 2^24: about 2 s per stage count in the interpreter
    cpu_limit="n <= 2^24 (16777216)",
    input_dtype=lambda inputs: "fp32" if inputs[0].dtype == torch.float32 else str(inputs[0].dtype),
)

# ---------------------------------------------------------------------------------------------------------------
# gemm: C = A @ B, fp32 accumulate; fp16 (default), bf16 or fp8 e4m3 in
# ---------------------------------------------------------------------------------------------------------------

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def _fp8_scaled(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` (fp32) as e4m3 with a per-tensor scale: x ~= q * scale, q using e4m3's whole range."""
    scale = (x.abs().amax().clamp(min=1e-12) / FP8_MAX).to(torch.float32).reshape(())
    return (x / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def _gemm_inputs(size: tuple[int, int, int], seed: int, device: torch.device, dtype: str | None = None) -> Inputs:
    """Fresh random operands from one set of fp32 draws, whatever the type: A ~ N(0, 1) (M x K) and B ~ N(0, 1/K)
    (K x N), so every C element is ~N(0, 1) whatever K is and the error bound need not grow with K.

    fp16 / bf16: (A, B), B row-major K x N. fp8e4m3: (A, B, scale_a, scale_b), each operand scaled into e4m3's range
    with a per-tensor fp32 scale (0-dim tensors), B given as N x K (K-major: what wgmma's fp8 form and Triton's fp8
    ``tl.dot`` need, and what ``torch._scaled_mm`` takes as its transposed second operand)."""
    m, n, k = size
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=g, device=device, dtype=torch.float32)
    b = torch.randn(k, n, generator=g, device=device, dtype=torch.float32) / math.sqrt(k)
    dtype = dtype or "fp16"
    if dtype == "fp8e4m3":
        (a8, scale_a), (b8, scale_b) = _fp8_scaled(a), _fp8_scaled(b.t().contiguous())
        return a8, b8, scale_a, scale_b
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    return a.to(torch_dtype), b.to(torch_dtype)


def gemm_dtype_of(inputs: Inputs) -> str:
    """The GEMM dtype name of a tuple of inputs (fp8: four tensors, A first)."""
    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float8_e4m3fn: "fp8e4m3"}.get(
        inputs[0].dtype, str(inputs[0].dtype)
    )


def gemm_output_dtype(input_dtype: torch.dtype) -> torch.dtype:
    """C's type: fp16 for fp16 inputs, bf16 for bf16 and fp8 ones."""
    return torch.bfloat16 if input_dtype in (torch.bfloat16, torch.float8_e4m3fn) else torch.float16


def _gemm_output(inputs: Inputs) -> torch.Tensor:
    a, b = inputs[0], inputs[1]
    n = b.shape[0] if len(inputs) == 4 else b.shape[1]  # fp8: B is N x K
    return torch.empty(a.shape[0], n, dtype=gemm_output_dtype(a.dtype), device=a.device)


def _gemm_reference(inputs: Inputs) -> torch.Tensor:
    """The exact product of the inputs as given, in fp64 (exact products, double accumulation); for fp8 the
    dequantized operands (A * scale_a) @ (B * scale_b)^T."""
    if len(inputs) == 4:
        a, b, scale_a, scale_b = inputs
        return (a.double() * scale_a.double()) @ (b.double() * scale_b.double()).t()
    a, b = inputs
    return a.double() @ b.double()


def _h(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).half()


def _gemm_bad_inputs() -> list[BadInput]:
    same, shared = _h(16, 16), _h(24, 16)  # C as A itself; C over B's last 8 rows
    return [
        BadInput((torch.randn(16, 16), _h(16, 16)), _h(16, 16), "dtype", "a fp32"),
        BadInput((_h(16), _h(16, 16)), _h(16, 16), "rank 2", "a 1-D"),
        BadInput((_h(16, 32)[:, :16], _h(16, 16)), _h(16, 16), "contiguous", "a column slice"),
        BadInput((_h(16, 17)[:, 1:], _h(16, 16)), _h(16, 16), "contiguous", "a offset rows"),
        BadInput((_h(16, 16), _h(24, 16)), _h(16, 16), "a's columns must equal b's rows", "K mismatch"),
        BadInput((_h(16, 16), _h(16, 16)), _h(16, 8), r"shape \(16, 16\)", "c narrow"),
        BadInput(
            (torch.randn(16 * 16 + 1).half()[1:].view(16, 16), _h(16, 16)),
            _h(16, 16),
            "16-byte boundary",
            "a misaligned",
        ),
        BadInput((_h(16, 16), torch.randn(16, 16).bfloat16()), _h(16, 16), "same dtype", "a fp16, b bf16"),
        BadInput((same, _h(16, 16)), same, "must not overlap a", "c aliases a"),
        BadInput((_h(16, 16), shared[:16]), shared[8:], "must not overlap b", "c overlaps b"),
    ]


# Real projection weights (N, K) of two public model configurations (Hugging Face config.json):
#   Llama-3-8B (meta-llama/Meta-Llama-3-8B): hidden_size 4096, intermediate_size 14336, 32 heads, 8 KV heads of 128;
#   Llama-3-70B (meta-llama/Meta-Llama-3-70B): hidden_size 8192, intermediate_size 28672, 64 heads, 8 KV heads of 128.
# QKV: N = hidden + 2 x KV heads x 128; O: hidden x hidden; gate/up fused: N = 2 x intermediate; down: K = intermediate.
LLM_WEIGHTS = {
    "llama3-8b qkv": (6144, 4096),
    "llama3-8b o": (4096, 4096),
    "llama3-8b gate_up": (28672, 4096),
    "llama3-8b down": (4096, 14336),
    "llama3-70b qkv": (10240, 8192),
    "llama3-70b o": (8192, 8192),
    "llama3-70b gate_up": (57344, 8192),
    "llama3-70b down": (8192, 28672),
}
DECODE_M = (1, 16, 64, 128, 256)  # tokens in flight in a decode step
PREFILL_M = (2048, 8192)  # tokens of a prompt
LLM_SHAPES = tuple((m, n, k) for (n, k) in LLM_WEIGHTS.values() for m in DECODE_M + PREFILL_M)
# output tiles fewer than the SMs: a 128 x 256 tile grid of 8 and 16 tiles, K long enough that it is all the work
LONG_K_SHAPES = ((512, 512, 65536), (1024, 1024, 32768))
SQUARE_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (4000, 3000, 1000))
# what the default run takes of llm and long-k: decode at M = 16 and 128 and a prefill, against the 70B O projection,
# and the shorter long-K shape
DEFAULT_LLM = ((16, 8192, 8192), (128, 8192, 8192), (2048, 8192, 8192))
DEFAULT_LONG_K = ((512, 512, 65536),)

# fp16 output: off by up to 2^-11 relative (half an ulp); fp32 accumulation of K products of ~N(0, 1) terms adds
# ~sqrt(K) x 2^-24. rtol of 4 half-ulps and atol 1e-3 (C ~ N(0, 1)) bound both with margin.
_FP16_TOL = {"rtol": 2e-3, "atol": 1e-3}
# bf16 output (fp16 and fp8 inputs alike are exact in the reference, so only the output rounding and the
# accumulation remain): bf16 keeps 8 significant bits, half an ulp is 2^-8 = 3.9e-3 relative; fp32 accumulation
# adds ~sqrt(K) x 2^-24 as above, and Hopper's fp8 wgmma accumulates with fewer mantissa bits than fp32 (about 2^-13
# relative per addition, published measurements), ~sqrt(K) x 2^-13 / sqrt(K) = 2^-13 on an N(0, 1) result. rtol of
# 4 half-ulps (1.6e-2) and atol 1e-2 bound all of it with margin and still catch a wrong element, row or scale.
_BF16_TOL = {"rtol": 1.6e-2, "atol": 1e-2}
# The bound against the ceiling's own error on the same inputs (DType.error_vs_ceiling). bf16: a kernel and cuBLAS both
# sum in fp32 and round once to bf16, so each worst error is about half an ulp of the largest |C|; 2x leaves room for a
# ceiling that rounded its largest elements luckily, and a row beyond it is off by more than its rounding. fp8: 2x
# promoted cuBLAS (issue 52): a row that kept the products in wgmma's narrow accumulator across K misses it by orders
# of magnitude.
_VS_CEILING = 2.0
GEMM_DTYPES = {
    "fp16": DType("fp16", "fp16->fp32acc->fp16", _FP16_TOL, bytes_in=2, bytes_out=2),
    "bf16": DType(
        "bf16",
        "bf16->fp32acc->bf16",
        _BF16_TOL,
        bytes_in=2,
        bytes_out=2,
        default_sizes=SQUARE_SHAPES,
        error_vs_ceiling=_VS_CEILING,
    ),
    # K a multiple of 16: TMA and wgmma's k32 fp8 steps need 16-byte rows; M, N odd
    "fp8e4m3": DType(
        "fp8e4m3",
        "fp8e4m3->fp32acc->bf16",
        _BF16_TOL,
        bytes_in=1,
        bytes_out=2,
        edge_sizes=((1, 1, 16), (67, 45, 48), (133, 250, 32), (129, 257, 16)),
        default_sizes=SQUARE_SHAPES,
        layout="B given as N x K (K-major), per-tensor scales applied in the epilogue, bf16 out",
        k_multiple=16,
        error_vs_ceiling=_VS_CEILING,
        # every fp8 row promotes each K tile's wgmma sum into fp32, as the ceiling (torch._scaled_mm,
        # use_fast_accum=False); the driver times no fast-accumulation ceiling, so a "fast" row is not run
        accumulation="promoted",
    ),
}


def _gemm_min_bytes(size: tuple[int, int, int], dtype: str) -> float:
    """A, B and C, each moved once."""
    m, n, k = size
    d = GEMM_DTYPES[dtype]
    return (m * k + k * n) * d.bytes_in + m * n * d.bytes_out


GEMM = Problem(
    name="gemm",
    dtypes=GEMM_DTYPES,
    unit="TFLOP/s",
    default_sizes=SQUARE_SHAPES + DEFAULT_LLM + DEFAULT_LONG_K,
    quick_sizes=((4096, 4096, 4096),),
    cpu_sizes=((200, 264, 80), (67, 45, 48)),  # K % 16 == 0 for fp8, K % 64 != 0: a partial K tile
    # tiny; K < BLOCK_K; odd N (no 16-byte B rows); one past the 128 x 256 tile in M and N
    edge_sizes=((1, 1, 8), (67, 45, 40), (133, 250, 16), (129, 257, 8)),
    make_inputs=_gemm_inputs,
    make_output=_gemm_output,
    reference=_gemm_reference,
    bad_inputs=_gemm_bad_inputs,
    work=lambda size: 2 * size[0] * size[1] * size[2],
    scale=1e12,
    cpu_max_work=2 * 2**28,  # M*N*K <= 2^28: a few seconds per stage count in the interpreter
    cpu_limit="M*N*K <= 2^28 (e.g. 512x512x1024)",
    # sweep: drawn from public model dimensions by --sweep-seed and --sweep-count when the plan is made
    shape_sets={"square": SQUARE_SHAPES, "llm": LLM_SHAPES, "long-k": LONG_K_SHAPES, "sweep": sweep_shapes},
    min_bytes=_gemm_min_bytes,
    input_dtype=gemm_dtype_of,
)

# attention: its own module, built on the types above (suite/attention_problem.py)
ATTENTION = attention_problem()

PROBLEMS: dict[str, Problem] = {p.name: p for p in (VECTOR, GEMM, ATTENTION)}
