"""C = A @ B (fp16 in, fp32 accumulate, fp16 out) with ``gemm.cu``: the PTX GEMM's launcher (suite/ptx/gemm.py),
tile and mma.sync math, its global -> shared ring written with cuda::pipeline / cuda::memcpy_async."""

from __future__ import annotations

from pathlib import Path

from suite.cuda.headers import cccl_include_dir
from suite.ptx.gemm import GemmMmaSync


class PipelineGemm(GemmMmaSync):
    """suite/ptx/gemm.py's kernel module (tile, stages, sanitizer sizes, faults), another .cu."""

    source = Path(__file__).with_name("gemm.cu")

    def name_expression(self, stages: int, n_aligned: bool, dtype: str = "fp16") -> str:
        bf16 = ", true" if dtype == "bf16" else ""  # the template's default is fp16
        return f"gemm_cuda_pipeline<{stages}, {'true' if n_aligned else 'false'}, {self.block_k}{bf16}>"

    def include_dirs(self) -> tuple[Path, ...]:
        return (cccl_include_dir(),)


GEMM_K32 = PipelineGemm(32, dtypes=("fp16",))
