"""Hand-written CUDA C++ kernels with inline PTX, compiled at run time by NVRTC and launched through cuda.core.

One module per (problem, kernel), each ``.py`` next to its ``.cu``: ``vector`` (the cp.async ring), ``vector_bulk``
(the Hopper bulk-copy ring), ``gemm`` (the cp.async + ldmatrix + mma.sync design), ``gemm_tma`` (Hopper: TMA,
mbarriers, wgmma; the ladder, split-K and stream-K). What they share lives elsewhere: the inline-PTX wrappers and the
pipeline skeleton in ``suite/include``, the NVRTC loader, cubin cache and streaming launches in ``suite.nvrtc``.
"""
