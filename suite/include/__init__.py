"""CUDA headers shared by every CUDA C++ backend, on the NVRTC loader's include path (suite.nvrtc.loader)."""
