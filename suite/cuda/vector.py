"""y = 2 * x through the cuda::pipeline ring of ``vector.cu``: the PTX ring's launcher (suite/ptx/vector.py) and
tile, another .cu."""

from __future__ import annotations

from pathlib import Path

from suite.cuda.headers import cccl_include_dir
from suite.ptx.vector import VectorRing


class PipelineRing(VectorRing):
    """suite/ptx/vector.py's ring (same tile, grid and defines), with the copies written in libcu++."""

    source = Path(__file__).with_name("vector.cu")

    def name_expressions(self, stages: int) -> tuple[str, ...]:
        return (f"scale2_cuda_pipeline<{stages}>",)

    def include_dirs(self) -> tuple[Path, ...]:
        return (cccl_include_dir(),)


KERNEL = PipelineRing()
