"""What the tables report about a compiled kernel (suite.nvrtc.info.KernelInfo, defined beside the compiler that
fills it in), under the name the kernels import."""

from suite.nvrtc.info import KernelInfo

__all__ = ["KernelInfo"]
