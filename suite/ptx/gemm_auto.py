"""``ptx:auto``: the PTX GEMM kernel and depth suite.gemm_rule picks for the shape (suite.gemm_auto), among the
kernel objects the PTX registrations name (suite/variants.py)."""

from __future__ import annotations

from suite.gemm_auto import AutoGemm
from suite.ptx import gemm_decode, gemm_tma

_TMA = {  # registered name (suite/variants.py): gemm_tma.KERNELS key
    "128x256x64 ws 2wg persistent tma-store tma+wgmma": "128x256x64 ws 2wg persistent tma-store",
    "128x192x64 ws 2wg persistent tma-store tma+wgmma": "128x192x64 ws 2wg persistent tma-store",
    "128x256 split-tail tma-store tma+wgmma": "128x256 split-tail",
    "128x192 split-tail tma-store tma+wgmma": "128x192 split-tail",
    "256x128 stream-k tma+wgmma": "256x128 stream-k",
    "128x128 split-k tma+wgmma": "128x128 split-k",
    "64x128 split-k tma+wgmma": "64x128 split-k",
}
CANDIDATES = {name: gemm_tma.KERNELS[key] for name, key in _TMA.items()} | {
    "decode swap-ab tma+wgmma": gemm_decode.KERNEL,
    "mid-m swap-ab tma+wgmma": gemm_decode.MID,
}
KERNEL = AutoGemm("ptx", CANDIDATES)
