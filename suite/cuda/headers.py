"""Where libcu++ (CCCL's ``<cuda/pipeline>``) is, found at run time as cuda.core finds NVRTC: cuda-pathfinder (the
``cuda-toolkit[cccl]`` / ``nvidia-cuda-cccl`` wheels, conda, a system toolkit), then $CUDA_HOME, $CUDA_PATH and
/usr/local/cuda (CUDA 13 keeps libcu++ in include/cccl, CUDA 12 in include)."""

from __future__ import annotations

import functools
import os
from pathlib import Path


@functools.cache
def cccl_include_dir() -> Path:
    """The directory holding ``cuda/pipeline``; FileNotFoundError saying where it looked when there is none."""
    candidates: list[Path] = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        found = find_nvidia_header_directory("cccl")
        if found:
            candidates.append(Path(found))
    except Exception:  # an older cuda-pathfinder without "cccl", or none: fall back to the toolkit roots
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            candidates += [Path(root) / "include" / "cccl", Path(root) / "include"]
    for d in candidates:
        if (d / "cuda" / "pipeline").is_file():
            return d
    raise FileNotFoundError(
        "libcu++ headers (cuda/pipeline) not found; looked in " + ", ".join(map(str, candidates)) + ". Install "
        "the CUDA toolkit's CCCL headers (pip install 'cuda-toolkit[cccl]'), or point CUDA_HOME at a toolkit."
    )
