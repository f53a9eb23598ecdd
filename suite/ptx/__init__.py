"""Hand-written CUDA C++ kernels with inline PTX, compiled at run time by NVRTC and launched through cuda.core.

One module per problem (``vector.py`` + ``vector.cu``, ``gemm.py`` + ``gemm.cu``); ``ptx_wrappers.cuh`` holds the
inline-PTX wrappers they share and ``loader.py`` the NVRTC / cache / launch machinery.
"""
