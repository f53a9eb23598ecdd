"""CUDA C++ kernels written with libcu++'s ``cuda::pipeline`` and ``cuda::memcpy_async`` instead of inline PTX: the
design's advice ("start with cuda::pipeline / cuda::memcpy_async, profile, drop to PTX when exact scheduling
matters"), put beside the hand-written PTX of the same design so the tables show what the PTX buys, stage by stage.

One module per problem (``vector.py`` + ``vector.cu``, ``gemm.py`` + ``gemm.cu``), compiled by NVRTC through the same
loader as suite/ptx; ``headers.py`` finds libcu++ at run time.
"""
