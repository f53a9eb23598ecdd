"""``ptx:auto``: the PTX GEMM kernel and depth suite.gemm_rule picks for the shape (suite.gemm_auto), among the
kernel objects the PTX registrations name (suite/variants.py)."""

from __future__ import annotations

from suite.gemm_auto import AutoGemm
from suite.ptx import gemm_decode, gemm_tma

_TMA = (
    "128x256x64 ws 2wg persistent tma-store",
    "128x192x64 ws 2wg persistent tma-store",
    "256x128 stream-k",
    "128x128 split-k",
    "64x128 split-k",
)
CANDIDATES = {f"{name} tma+wgmma": gemm_tma.KERNELS[name] for name in _TMA} | {
    "decode swap-ab tma+wgmma": gemm_decode.KERNEL
}
KERNEL = AutoGemm("ptx", CANDIDATES)
