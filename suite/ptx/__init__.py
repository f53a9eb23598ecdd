"""Hand-written CUDA C++ kernels with inline PTX, compiled at run time by NVRTC and launched through cuda.core.

One module per (problem, kernel), each ``.py`` next to its ``.cu``: ``vector`` (the cp.async ring), ``vector_bulk``
(the Hopper bulk-copy ring), ``gemm`` (the cp.async + ldmatrix + mma.sync design), ``gemm_tma`` (Hopper: TMA, mbarriers, wgmma);
``latency`` is the memory-latency probe. ``ptx_wrappers.cuh`` holds every inline-PTX wrapper they share,
``tile_schedule.cuh`` how the
streaming kernels deal tiles to blocks, ``stream.py`` their launch and residency pinning, and ``loader.py`` the NVRTC
/ cache / launch machinery.
"""
