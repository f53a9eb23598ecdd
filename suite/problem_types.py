"""The types every problem is made of: a problem (``Problem``), its data types (``DType``), the verdict on one output
(``Check``) and an input every kernel must refuse (``BadInput``). The problems themselves are in suite.problems and,
one module each where they are large, beside it (suite.attention_problem).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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


def meta_tensor(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """A tensor of ``shape`` with no memory (torch's meta device): a bad input far past a size limit costs nothing."""
    return torch.empty(*shape, dtype=dtype, device="meta")


@dataclass(frozen=True)
class DType:
    """One data type of a problem: what the kernels are given and must return, and how close they must be."""

    name: str  # as --dtype takes it: "fp32", "fp16", "bf16", "fp8e4m3"
    label: str  # the rows' ``dtype``: input -> accumulator -> output, e.g. "fp16->fp32acc->fp16"
    tolerance: dict  # rtol / atol for torch.testing.assert_close; 0 / 0 means bit-exact
    bytes_in: float  # bytes of one input element (the roofline counts A, B and C once)
    bytes_out: float
    edge_sizes: tuple | None = None  # small odd sizes every variant is validated at; None: the problem's own
    default_sizes: tuple | None = None  # what a default run times at this dtype; None: the problem's own
    layout: str = ""  # how the operands are given, where it differs from the plain case (said in the tables)
    # GEMM sizes whose K is not a multiple of this are left out of the default run and the named shape sets at this
    # dtype (fp8: 16, torch._scaled_mm's and TMA's rule for 1-byte rows); --size still takes any, and kernels refuse
    k_multiple: int = 1
    # Validation also bounds each row's worst error by this multiple of the job's ceiling's own worst error on the same
    # inputs (against the same reference), the ceiling's error taken as at least the tolerance's atol (a ceiling exact
    # on small inputs would otherwise bound the row at 0); None: the tolerance alone judges
    error_vs_ceiling: float | None = None
    # How the ceiling accumulates at this dtype, and so how every row must (a kernel module's ``fp8_accumulation``):
    # each row states it, and a row that accumulates otherwise is not run (its ceiling would do other work); None: the
    # dtype's rows do not state it
    accumulation: str | None = None

    def error_bound(self, ceiling_error: float) -> float | None:
        """The largest max abs error a row may have where the ceiling's own, on the same inputs, is
        ``ceiling_error``: ``error_vs_ceiling`` x max(that, atol); None: no such bound at this dtype."""
        if self.error_vs_ceiling is None:
            return None
        return self.error_vs_ceiling * max(ceiling_error, self.tolerance.get("atol", 0.0))


@dataclass(frozen=True)
class Problem:
    name: str
    dtypes: dict  # name -> DType; the first is the default
    unit: str  # throughput unit: "GB/s" (bytes read + written) or "TFLOP/s"
    default_sizes: tuple  # a full run on a GPU
    quick_sizes: tuple  # --quick on a GPU
    cpu_sizes: tuple  # the Triton interpreter on a CPU
    edge_sizes: tuple  # small odd sizes every variant is validated at (tests/test_variants.py), on a CPU and a GPU
    make_inputs: Callable[..., Inputs]  # (size, seed, device, dtype name) -> inputs
    make_output: Callable[[Inputs], torch.Tensor]  # uninitialized; the driver poisons it
    reference: Callable[[Inputs], torch.Tensor]  # in higher precision where it matters
    bad_inputs: Callable[[], list[BadInput]]  # inputs every kernel of the problem must refuse, naming the rule
    work: Callable[[Any], float]  # bytes or flops of one solution, in the unit's base (B or FLOP)
    scale: float  # work / seconds / scale = the unit
    # The largest work(size) a run without a GPU accepts (the Triton interpreter is tens of thousands of times slower
    # than the GPU), and the same limit in the problem's own terms, for messages.
    cpu_max_work: float = math.inf
    cpu_limit: str = ""
    # --shapes NAME: named sets of sizes; the default run's sizes are ``default_sizes``
    shape_sets: dict = field(default_factory=dict)
    # the fewest bytes one solution must move through memory (each input read once, the output written once), for
    # the roofline; None: the problem is its own memory bound (the vector: ``work`` already counts bytes)
    min_bytes: Callable[[Any, str], float] | None = None
    # the dtype name of a tuple of inputs (a name of ``dtypes`` for inputs the problem makes)
    input_dtype: Callable[[Inputs], str] = lambda inputs: str(inputs[0].dtype)
    # a problem whose sizes are neither n nor (M, N, K): its --size parser and its shape label (parse_size's inverse)
    size_parser: Callable[[str], Any] | None = None
    shape_label: Callable[[Any], str] | None = None

    @property
    def default_dtype(self) -> str:
        return next(iter(self.dtypes))

    def dtype_of(self, name: str | None) -> DType:
        """The DType called ``name`` (None: the default); ValueError naming the known ones otherwise."""
        name = name or self.default_dtype
        if name not in self.dtypes:
            raise ValueError(f"{self.name} has no dtype {name!r}; known: {', '.join(self.dtypes)}")
        return self.dtypes[name]

    def edge_sizes_for(self, dtype: str | None = None) -> tuple:
        return self.dtype_of(dtype).edge_sizes or self.edge_sizes

    def default_sizes_for(self, dtype: str | None = None) -> tuple:
        return self.fits(self.dtype_of(dtype).default_sizes or self.default_sizes, dtype)

    def fits(self, sizes: tuple, dtype: str | None = None) -> tuple:
        """The sizes a named set or the default run takes at ``dtype``: those whose K is a multiple of its
        ``k_multiple`` (every size for a problem whose sizes are not M x N x K)."""
        k = self.dtype_of(dtype).k_multiple
        return tuple(s for s in sizes if not isinstance(s, tuple) or s[2] % k == 0)

    def shape(self, size) -> str:
        if self.shape_label is not None:
            return self.shape_label(size)
        return "x".join(str(s) for s in size) if isinstance(size, tuple) else str(size)

    def check(self, out: torch.Tensor, ref: torch.Tensor, dtype: str | None = None) -> Check:
        """Compare every element of ``out`` with ``ref`` within ``dtype``'s tolerance. A poisoned (NaN) element that
        the kernel left unwritten fails the check."""
        diff = (out.double() - ref.double()).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        ref_norm = float(ref.double().norm())
        rel = float(diff.norm()) / ref_norm if ref_norm else float(diff.norm())
        try:
            torch.testing.assert_close(out.to(ref.dtype), ref, **self.dtype_of(dtype).tolerance, equal_nan=False)
        except AssertionError as e:
            # assert_close's lines in one: what failed, how many elements, the worst difference and what is allowed
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            return Check(False, max_abs, rel, "; ".join(lines) or "mismatch")
        return Check(True, max_abs, rel)

    def parse_size(self, text: str):
        """'268435456' or '2^28' for vector; '8192' (a cube) or '4000x3000x1000' for gemm. Every dimension a whole
        number >= 1 (and below 2^63). Raises ValueError naming the rule broken."""
        if self.size_parser is not None:
            return self.size_parser(text)
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
