"""``triton:auto``: the Triton GEMM kernel and depth suite.gemm_rule picks for the shape (suite.gemm_auto), among the
kernel objects the Triton registrations name (suite/variants.py). Without a GPU the rule leaves out the sm_90a-only
Gluon kernels, so the interpreter runs what it picks."""

from __future__ import annotations

from suite.gemm_auto import AutoGemm
from suite.triton import gemm_decode, gemm_desc, gemm_gluon, gemm_mid, gemm_mid_gluon, gemm_splitk, gemm_streamk

CANDIDATES = {
    "decode swap-ab desc": gemm_decode.KERNEL,
    "mid-m swap-ab desc": gemm_mid.KERNEL,
    "split-k desc": gemm_splitk.KERNEL,
    "stream-k desc": gemm_streamk.KERNEL,
    "split-tail desc": gemm_streamk.SPLIT_TAIL,
    "128x256x64 desc persistent host": gemm_desc.KERNELS["persistent host"],
    "128x256x64 gluon ws persistent": gemm_gluon.KERNEL,
    "128x256x64 gluon ws stream-k": gemm_gluon.STREAM_K,
    "mid-m swap-ab gluon ws": gemm_mid_gluon.KERNEL,
}
KERNEL = AutoGemm("triton", CANDIDATES)
