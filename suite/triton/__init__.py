"""Triton kernels for the same problems, swept over ``num_stages``. One module per problem.

Set TRITON_INTERPRET=1 before importing these modules to run them on the CPU with CPU tensors.
"""
