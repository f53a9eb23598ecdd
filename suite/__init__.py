"""pipesuite: Triton and hand-written inline-PTX kernels side by side, per software-pipeline depth."""
