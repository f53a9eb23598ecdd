"""The problems both backends solve: how to make inputs, the reference answer (in higher precision), how to judge
an output against it, and how much work one solution does (for the throughput columns).

A size is an int for ``vector`` (n) and an (M, N, K) tuple for ``gemm``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import torch

Inputs = tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class Check:
    valid: bool
    max_abs_error: float
    rel_error: float  # ||out - ref|| / ||ref||
    message: str = ""


@dataclass(frozen=True)
class BadInput:
    """An input that breaks one rule: a kernel's factory, given it, must raise ValueError matching ``rule``."""

    inputs: Inputs
    out: torch.Tensor
    rule: str  # a regular expression the error message must match
    why: str  # what is wrong, for test ids and messages


@dataclass(frozen=True)
class Problem:
    name: str
    dtype: str  # for the tables: input -> output precision
    unit: str  # throughput unit: "GB/s" (bytes read + written) or "TFLOP/s"
    default_sizes: tuple  # a full run on a GPU
    quick_sizes: tuple  # --quick on a GPU
    cpu_sizes: tuple  # the Triton interpreter on a CPU
    edge_sizes: tuple  # small odd sizes every variant is validated at (tests/test_variants.py), on a CPU and a GPU
    make_inputs: Callable[[Any, int, torch.device], Inputs]
    make_output: Callable[[Inputs], torch.Tensor]  # uninitialized; the driver poisons it
    reference: Callable[[Inputs], torch.Tensor]  # in higher precision where it matters
    bad_inputs: Callable[[], list[BadInput]]  # inputs every kernel of the problem must refuse, naming the rule
    tolerance: dict  # rtol / atol for torch.testing.assert_close; 0 / 0 means bit-exact
    work: Callable[[Any], float]  # bytes or flops of one solution, in the unit's base (B or FLOP)
    scale: float  # work / seconds / scale = the unit
    # The largest work(size) a run without a GPU accepts (the Triton interpreter is tens of thousands of times slower
    # than the GPU), and the same limit in the problem's own terms, for messages.
    cpu_max_work: float = math.inf
    cpu_limit: str = ""

    def shape(self, size) -> str:
        return "x".join(str(s) for s in size) if isinstance(size, tuple) else str(size)

    def check(self, out: torch.Tensor, ref: torch.Tensor) -> Check:
        """Compare every element of ``out`` with ``ref``. A poisoned (NaN) element that the kernel left unwritten
        fails the check."""
        diff = (out.double() - ref.double()).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        ref_norm = float(ref.double().norm())
        rel = float(diff.norm()) / ref_norm if ref_norm else float(diff.norm())
        try:
            torch.testing.assert_close(out.to(ref.dtype), ref, **self.tolerance, equal_nan=False)
        except AssertionError as e:
            return Check(False, max_abs, rel, str(e).strip().splitlines()[0] if str(e).strip() else "mismatch")
        return Check(True, max_abs, rel)

    def parse_size(self, text: str):
        """'268435456' or '2^28' for vector; '8192' (a cube) or '4000x3000x1000' for gemm. Every dimension a whole
        number >= 1 (and below 2^63). Raises ValueError naming the rule broken."""
        example = "e.g. 268435456 or 2^28" if self.name == "vector" else "e.g. 8192 for a cube, or 4000x3000x1000"

        def num(t: str) -> int:
            m = re.fullmatch(r"\s*(-?\d+)(?:\^(-?\d+))?\s*", t)
            if not m:
                raise ValueError(f"{text!r}: sizes are whole numbers ({example})")
            base, exp = int(m[1]), int(m[2]) if m[2] is not None else 1
            if base < 1 or exp < 0:
                raise ValueError(f"{text!r}: every dimension must be >= 1")
            if (base.bit_length() - 1) * exp > 63 or base**exp >= 2**63:  # the first test spares computing 10^99999
                raise ValueError(f"{text!r}: every dimension must be below 2^63")
            return base**exp

        parts = [num(p) for p in text.lower().split("x")]
        if self.name == "gemm":
            if len(parts) == 1:
                parts *= 3
            if len(parts) != 3:
                raise ValueError(f"{text!r}: a gemm size is M (a cube) or MxNxK")
            return tuple(parts)
        if len(parts) != 1:
            raise ValueError(f"{text!r}: a vector size is one element count ({example})")
        return parts[0]


# ---------------------------------------------------------------------------------------------------------------
# vector: y = 2 * x, fp32, bit-exact
# ---------------------------------------------------------------------------------------------------------------


def _vector_inputs(n: int, seed: int, device: torch.device) -> Inputs:
    g = torch.Generator(device=device).manual_seed(seed)
    return (torch.randn(n, generator=g, device=device, dtype=torch.float32),)


def _f32(n: int, offset: int = 0) -> torch.Tensor:
    return torch.randn(n + offset)[offset:]


def _vector_bad_inputs() -> list[BadInput]:
    return [
        BadInput((torch.randn(8, dtype=torch.float64),), torch.empty(8), "dtype torch.float32", "x fp64"),
        BadInput((torch.randn(4, 4),), torch.empty(4, 4), "rank 1", "x 2-D"),
        BadInput((torch.randn(16)[::2],), torch.empty(8), "contiguous", "x strided"),
        BadInput((_f32(8, offset=1),), torch.empty(8), "16-byte boundary", "x misaligned"),
        BadInput((torch.randn(8),), torch.empty(9), r"shape \(8,\)", "y longer"),
        BadInput((torch.randn(8),), torch.empty(8, dtype=torch.float16), "dtype torch.float32", "y fp16"),
    ]


VECTOR = Problem(
    name="vector",
    dtype="fp32",
    unit="GB/s",
    default_sizes=(2**28,),  # 1 GiB in + 1 GiB out: 35x the 60 MiB L2
    quick_sizes=(2**26,),
    cpu_sizes=(5 * 8192 + 3,),  # several tiles, several programs, a ragged tail
    edge_sizes=(1, 3, 4, 4097, 3 * 8192 + 5),  # one element, no whole 16-byte chunk, ragged tails over tiles
    make_inputs=_vector_inputs,
    make_output=lambda inputs: torch.empty_like(inputs[0]),
    reference=lambda inputs: inputs[0] * 2,  # exact in fp32
    bad_inputs=_vector_bad_inputs,
    tolerance={"rtol": 0.0, "atol": 0.0},
    work=lambda n: 2 * n * 4,  # bytes read + written
    scale=1e9,
    cpu_max_work=2 * 4 * 2**24,  # n <= 2^24: about 2 s per stage count in the interpreter
    cpu_limit="n <= 2^24 (16777216)",
)

# ---------------------------------------------------------------------------------------------------------------
# gemm: C = A @ B, fp16 in, fp32 accumulate, fp16 out
# ---------------------------------------------------------------------------------------------------------------


def _gemm_inputs(size: tuple[int, int, int], seed: int, device: torch.device) -> Inputs:
    m, n, k = size
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(m, k, generator=g, device=device, dtype=torch.float32).to(torch.float16)
    # B scaled by 1/sqrt(K): every C element is ~N(0, 1) whatever K is, so the error bound need not grow with K.
    b = (torch.randn(k, n, generator=g, device=device, dtype=torch.float32) / math.sqrt(k)).to(torch.float16)
    return a, b


def _gemm_reference(inputs: Inputs) -> torch.Tensor:
    a, b = inputs
    return a.double() @ b.double()  # exact products, double accumulation: the fp16 inputs' true product


def _h(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).half()


def _gemm_bad_inputs() -> list[BadInput]:
    return [
        BadInput((torch.randn(16, 16), _h(16, 16)), _h(16, 16), "dtype torch.float16", "a fp32"),
        BadInput((_h(16), _h(16, 16)), _h(16, 16), "rank 2", "a 1-D"),
        BadInput((_h(16, 32)[:, :16], _h(16, 16)), _h(16, 16), "contiguous", "a column slice"),
        BadInput((_h(16, 17)[:, 1:], _h(16, 16)), _h(16, 16), "contiguous", "a offset rows"),
        BadInput((_h(16, 16), _h(24, 16)), _h(16, 16), "a's columns must equal b's rows", "K mismatch"),
        BadInput((_h(16, 16), _h(16, 16)), _h(16, 8), r"shape \(16, 16\)", "c narrow"),
        BadInput((torch.randn(16 * 16 + 1).half()[1:].view(16, 16), _h(16, 16)), _h(16, 16), "16-byte boundary",
                 "a misaligned"),
    ]


GEMM = Problem(
    name="gemm",
    dtype="fp16->fp32acc->fp16",
    unit="TFLOP/s",
    default_sizes=((8192, 8192, 8192), (4096, 4096, 4096), (4000, 3000, 1000)),
    quick_sizes=((4096, 4096, 4096),),
    cpu_sizes=((200, 264, 72), (67, 45, 40)),
    # tiny; K < BLOCK_K; odd N (no 16-byte B rows); one past the 128 x 256 tile in M and N
    edge_sizes=((1, 1, 8), (67, 45, 40), (133, 250, 16), (129, 257, 8)),
    make_inputs=_gemm_inputs,
    make_output=lambda inputs: torch.empty(inputs[0].shape[0], inputs[1].shape[1], dtype=torch.float16,
                                           device=inputs[0].device),
    reference=_gemm_reference,
    bad_inputs=_gemm_bad_inputs,
    # The fp16 output alone is off by up to 2^-11 relative (half an ulp); fp32 accumulation of K products of ~N(0,1)
    # terms adds ~sqrt(K) * 2^-24. rtol of 4 half-ulps and atol 1e-3 (C ~ N(0, 1)) bound both with margin.
    tolerance={"rtol": 2e-3, "atol": 1e-3},
    work=lambda size: 2 * size[0] * size[1] * size[2],
    scale=1e12,
    cpu_max_work=2 * 2**28,  # M*N*K <= 2^28: a few seconds per stage count in the interpreter
    cpu_limit="M*N*K <= 2^28 (e.g. 512x512x1024)",
)

PROBLEMS: dict[str, Problem] = {p.name: p for p in (VECTOR, GEMM)}
