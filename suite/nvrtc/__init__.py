"""NVRTC compilation, the cubin cache and launches through cuda.core: what every CUDA C++ backend (``suite.ptx``,
``suite.cuda``, plugins) uses to turn a ``.cu`` file into launches on torch's stream. ``loader`` compiles, loads and
launches; ``cache`` keeps cubins on disk; ``stream`` launches the streaming kernels at a pinned residency."""
